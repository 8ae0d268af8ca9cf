"""Loaded before every suite's own conftest: importing this package puts the repository root on
``sys.path`` (pytest's rootdir-based import), so the suites share ``tests.helpers``, ``tests.kafka_broker``
and ``tests.lab_server``. The session's Apache Kafka broker and schema registry are here, started on first use."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kstream_nb.cluster.local_kafka import LocalKafka
from tests.kafka_broker import running_kafka
from tests.registry_server import running_registry


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalKafka]:
    """One Apache Kafka 4.4 broker for the whole session (stopped at the end); tests share it, each with
    its own topic names and application ids."""
    with running_kafka(tmp_path_factory.mktemp("kafka")) as broker:
        yield broker


@pytest.fixture(scope="session")
def kafka_bootstrap(kafka_broker: LocalKafka) -> str:
    """``host:port`` of the session's broker."""
    return kafka_broker.bootstrap_servers


@pytest.fixture(scope="session")
def schema_registry_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Confluent's Schema Registry API (``http://127.0.0.1:PORT/apis/ccompat/v7``) of one Apicurio Registry
    for the whole session (stopped at the end); tests share it, each with its own subject names."""
    with running_registry(tmp_path_factory.mktemp("registry")) as server:
        yield server.url
