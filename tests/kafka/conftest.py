"""The Kafka suite runs on the session's Apache Kafka 4.4 broker (``kafka_bootstrap`` in ``tests/conftest.py``).

Tests share the broker, so each uses its own topic names and application ids (``names``).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import kstream_nb as ks
from tests.kafka_broker import FAST_CLIENT_CONFIG


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
