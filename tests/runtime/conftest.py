"""Fixtures for runtime tests: a fresh embedded cluster per test and apps that are always stopped."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import kstream_nb as ks
from kstream_nb.cluster.memory import reset_cluster


@pytest.fixture
def url() -> Iterator[str]:
    """A unique ``memory://t-<uuid>`` address, forgotten after the test."""
    address = f"memory://t-{uuid.uuid4().hex}"
    yield address
    reset_cluster(address)


@pytest.fixture
def make_app(url: str) -> Iterator[Callable[..., ks.KafkaStreams]]:
    """``make_app(topology, application_id=..., **config)``: a KafkaStreams on the test's cluster.

    Every app made here is stopped in teardown, so a failing test never leaves threads behind.
    """
    apps: list[ks.KafkaStreams] = []

    def make(topology: ks.Topology, application_id: str = "app", **config: Any) -> ks.KafkaStreams:
        config.setdefault("commit_interval_ms", 50)
        config.setdefault("poll_ms", 20)
        app = ks.KafkaStreams(topology, application_id=application_id, bootstrap_servers=url, **config)
        apps.append(app)
        return app

    yield make
    for app in apps:
        app.stop(timeout=10)
