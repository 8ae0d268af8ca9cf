"""Apache Kafka 4.4 for the tests: one single-node KRaft broker on a free loopback port per test session
(``kstream_nb.cluster.local_kafka``), shared by the Kafka, Spark and runtime suites.

Imported as ``tests.kafka_broker`` (``tests/conftest.py`` puts the repository root on ``sys.path``). The
broker's jars come from Maven Central through ``mvn`` on first use; a missing Java 17 or Maven fails the
fixture loudly, naming what to install (``scripts/test.sh`` installs both).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from kstream_nb.cluster.local_kafka import LocalKafka, LocalKafkaError

#: Broker settings of Kafka's own integration tests (on top of local_kafka's single-node ones): few
#: partitions for the internal topics, so the first group and the first transaction start at once; timed-out
#: transactions aborted within a second (10 s by default).
TEST_BROKER_PROPERTIES: dict[str, Any] = {
    "offsets.topic.num.partitions": 5,
    "transaction.state.log.num.partitions": 5,
    "group.min.session.timeout.ms": 1000,
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": 1000,
}

#: Client settings that keep the tests fast: a member that died without leaving is noticed within 6 s
#: and a topic created by another client is seen within a second.
FAST_CLIENT_CONFIG = {
    "session.timeout.ms": 6000,
    "heartbeat.interval.ms": 500,
    "topic.metadata.refresh.interval.ms": 1000,
}


def make_broker(data_dir: Path, port: int = 0, **kwargs: Any) -> LocalKafka:
    """A test broker under ``data_dir`` (not started); ``port=0`` picks a free port at its first start."""
    props = {**TEST_BROKER_PROPERTIES, **kwargs.pop("properties", {})}
    return LocalKafka(data_dir, port, properties=props, heap=kwargs.pop("heap", "768m"), **kwargs)


def start_broker(broker: LocalKafka) -> LocalKafka:
    """Starts it; a broker that cannot be installed or started fails the test with the reason."""
    try:
        return broker.start(timeout=90)
    except LocalKafkaError as e:
        pytest.fail(f"the Kafka tests need a running Apache Kafka: {e}", pytrace=False)


@contextmanager
def running_kafka(data_dir: Path, **kwargs: Any) -> Iterator[LocalKafka]:
    """A started test broker for the ``with`` block; afterwards the shared clients of its address are
    closed and the broker stopped."""
    from kstream_nb.cluster.kafka import close_clusters

    broker = start_broker(make_broker(data_dir, **kwargs))
    try:
        yield broker
    finally:
        close_clusters(broker.bootstrap_servers)
        broker.stop()
