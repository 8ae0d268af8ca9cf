"""Fixtures for the Jupyter layer: an in-process IPython shell with the extension, a fresh cluster."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from IPython.core.interactiveshell import InteractiveShell

import kstream_nb as ks
from kstream_nb.cluster.memory import reset_cluster
from kstream_nb.jupyter import live_refreshers, stop_all
from tests.helpers import wait_for

SEED_RECORDS = [("Jack", 1), ("Lily", 2), ("Mike", 4), ("Jack", 3), ("Lily", 5)]


@pytest.fixture
def url() -> Iterator[str]:
    address = f"memory://j-{uuid.uuid4().hex[:10]}"
    yield address
    reset_cluster(address)


@pytest.fixture
def shell() -> Iterator[InteractiveShell]:
    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "kstream_nb.jupyter")
    yield ip
    stop_all(timeout=10)


@pytest.fixture
def make_app(url: str) -> Iterator[Callable[..., ks.KafkaStreams]]:
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


@pytest.fixture(autouse=True)
def no_leftover_threads() -> Iterator[None]:
    yield
    stop_all(timeout=10)
    wait_for(lambda: not live_refreshers(), 5, "refresher threads to end")
    left = [t.name for t in threading.enumerate() if t.name.startswith("kstream-")]
    assert not left, f"threads left running: {left}"
