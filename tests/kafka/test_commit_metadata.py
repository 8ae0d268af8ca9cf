"""Offset commit metadata on the Kafka path: what carries a task's stream time and processor metadata (the
emit-on-close windows' last emit time) across restarts. A plain commit keeps it on librdkafka's mock
cluster (tansu 0.6 drops the metadata of every commit, so it cannot show it)."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer

from kstream_nb.cluster import connect
from kstream_nb.cluster.base import TopicSpec
from kstream_nb.cluster.records import TopicPartition

pytestmark = pytest.mark.kafka


@pytest.fixture(scope="module")
def mock_bootstrap() -> Iterator[str]:
    """A librdkafka mock cluster (one broker on loopback), alive while its creating client is."""
    owner = Producer({"bootstrap.servers": "mock", "test.mock.num.brokers": 1}, logger=logging.getLogger("mock"))
    brokers = owner.list_topics(timeout=10).brokers
    broker = next(iter(brokers.values()))
    yield f"{broker.host}:{broker.port}"
    owner.flush(5)


def _topic(bootstrap: str) -> str:
    """A topic the mock cluster auto-creates (4 partitions) by a first write."""
    name = f"meta-{os.urandom(4).hex()}"
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce(name, b"x", partition=0)
    assert producer.flush(10) == 0
    return name


def test_a_commit_keeps_its_metadata_and_a_later_commit_replaces_it(mock_bootstrap: str) -> None:
    cluster = connect(mock_bootstrap)
    tp = TopicPartition(_topic(mock_bootstrap), 0)
    consumer = cluster.consumer(f"g-{os.urandom(4).hex()}")
    consumer.assign([tp])
    consumer.commit({tp: 1}, {tp: '{"stream_time": 7}'})
    assert consumer.committed([tp]) == {tp: 1}
    assert consumer.committed_metadata([tp]) == {tp: '{"stream_time": 7}'}
    consumer.commit({tp: 1})
    assert consumer.committed_metadata([tp]) == {}
    consumer.close()


def test_offsets_with_metadata_commit_in_a_transaction_on_tansu(kafka_bootstrap: str) -> None:
    """The transactional path sends the metadata with the offsets. Neither broker at hand shows it back:
    librdkafka's mock cluster does not apply transactional offset commits at all, and tansu 0.6 keeps the
    offsets but drops the metadata (then exactly-once emit-on-close windows resume from their restored
    store instead). This checks the offsets still commit with metadata attached, on a real broker."""
    cluster = connect(kafka_bootstrap)
    topic = f"meta-{os.urandom(4).hex()}"
    cluster.admin().create_topics([TopicSpec(topic, 1)])
    consumer = cluster.consumer(
        f"g-{os.urandom(4).hex()}", {"session.timeout.ms": 6000, "heartbeat.interval.ms": 500}
    )
    consumer.subscribe([topic])
    deadline = time.monotonic() + 30
    while not consumer.assignment():
        assert time.monotonic() < deadline, "no assignment"
        consumer.poll(0.05)
    tp = TopicPartition(topic, 0)
    producer = cluster.producer({"transactional.id": f"t-{os.urandom(4).hex()}"})
    producer.send(topic, None, b"x")
    producer.send_offsets_to_transaction({tp: 1}, consumer, {tp: '{"processors": {"wc": 20000}}'})
    producer.commit_transaction()
    assert consumer.committed([tp]) == {tp: 1}
    assert consumer.committed_metadata([tp]) in ({}, {tp: '{"processors": {"wc": 20000}}'})
    producer.close()
    consumer.close()
