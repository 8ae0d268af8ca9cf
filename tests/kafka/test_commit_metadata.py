"""Offset commit metadata on Kafka: what carries a task's stream time and processor metadata (the
emit-on-close windows' last emit time) across restarts, by a plain commit (at-least-once) and inside a
transaction (exactly-once). Kafka keeps it with the offset; a later commit without metadata replaces it."""

from __future__ import annotations

import os
import time

import pytest

from kstream_nb.cluster import connect
from kstream_nb.cluster.base import Consumer, TopicSpec
from kstream_nb.cluster.records import TopicPartition
from kstream_nb.errors import BrokerUnavailableError
from tests.kafka_broker import FAST_CLIENT_CONFIG

pytestmark = pytest.mark.kafka


def member_of(bootstrap: str, topic: str) -> Consumer:
    """A group member that holds ``topic``'s only partition."""
    consumer = connect(bootstrap).consumer(f"g-{os.urandom(4).hex()}", dict(FAST_CLIENT_CONFIG))
    consumer.subscribe([topic])
    deadline = time.monotonic() + 30
    while not consumer.assignment():
        assert time.monotonic() < deadline, "no assignment"
        consumer.poll(0.05)
    return consumer


def test_a_commit_keeps_its_metadata_and_a_later_commit_replaces_it(kafka_bootstrap: str) -> None:
    topic = f"meta-{os.urandom(4).hex()}"
    connect(kafka_bootstrap).admin().create_topics([TopicSpec(topic, 1)])
    tp = TopicPartition(topic, 0)
    consumer = member_of(kafka_bootstrap, topic)
    consumer.commit({tp: 1}, {tp: '{"stream_time": 7}'})
    assert consumer.committed([tp]) == {tp: 1}
    assert consumer.committed_metadata([tp]) == {tp: '{"stream_time": 7}'}
    consumer.commit({tp: 1})
    assert consumer.committed_metadata([tp]) == {}
    consumer.close()


def test_offsets_committed_in_a_transaction_keep_their_metadata(kafka_bootstrap: str) -> None:
    cluster = connect(kafka_bootstrap)
    topic = f"meta-{os.urandom(4).hex()}"
    cluster.admin().create_topics([TopicSpec(topic, 1)])
    tp = TopicPartition(topic, 0)
    consumer = member_of(kafka_bootstrap, topic)
    producer = cluster.producer({"transactional.id": f"t-{os.urandom(4).hex()}"})
    producer.send(topic, None, b"x")
    producer.send_offsets_to_transaction({tp: 1}, consumer, {tp: '{"processors": {"wc": 20000}}'})
    producer.commit_transaction()
    assert consumer.committed([tp]) == {tp: 1}
    assert consumer.committed_metadata([tp]) == {tp: '{"processors": {"wc": 20000}}'}
    producer.close()
    consumer.close()


class _FetchTimesOut:
    """A librdkafka consumer whose offset fetch times out, as one did for minutes after a broker restart."""

    def __init__(self, consumer: object) -> None:
        self._consumer = consumer

    def committed(self, *args: object, **kwargs: object) -> object:
        from confluent_kafka import KafkaError, KafkaException

        raise KafkaException(
            KafkaError(KafkaError._TIMED_OUT, "Failed to get committed offsets: Local: Timed out")
        )

    def __getattr__(self, name: str) -> object:
        return getattr(self._consumer, name)


def test_a_fetch_that_times_out_is_answered_through_the_admin_client(kafka_bootstrap: str) -> None:
    topic = f"meta-{os.urandom(4).hex()}"
    connect(kafka_bootstrap).admin().create_topics([TopicSpec(topic, 2)])
    tps = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
    consumer = member_of(kafka_bootstrap, topic)
    consumer.commit({tps[0]: 5, tps[1]: 9}, {tps[0]: '{"stream_time": 3}'})
    real = consumer._consumer  # type: ignore[attr-defined]
    consumer._consumer = _FetchTimesOut(real)  # type: ignore[attr-defined]
    try:
        assert consumer.committed(tps) == {tps[0]: 5, tps[1]: 9}
        assert consumer.committed_metadata(tps) == {tps[0]: '{"stream_time": 3}'}
    finally:
        consumer._consumer = real  # type: ignore[attr-defined]
        consumer.close()


def test_offsets_a_transaction_holds_are_not_read_as_no_commit_when_the_fetch_times_out(
    kafka_bootstrap: str,
) -> None:
    """While a transaction holds offsets for the group, the admin client answers the partition with
    UNSTABLE_OFFSET_COMMIT (it does not wait): the fallback reports the offsets unavailable (retried by the
    task manager), never "nothing committed", which would start the task from auto.offset.reset."""
    cluster = connect(kafka_bootstrap)
    topic = f"meta-{os.urandom(4).hex()}"
    cluster.admin().create_topics([TopicSpec(topic, 1)])
    tp = TopicPartition(topic, 0)
    consumer = member_of(kafka_bootstrap, topic)
    consumer.commit({tp: 2})
    producer = cluster.producer({"transactional.id": f"t-{os.urandom(4).hex()}"})
    real = consumer._consumer  # type: ignore[attr-defined]
    try:
        producer.send(topic, None, b"x")
        producer.send_offsets_to_transaction({tp: 5}, consumer)  # pending until the transaction ends
        consumer._consumer = _FetchTimesOut(real)  # type: ignore[attr-defined]
        with pytest.raises(BrokerUnavailableError, match=r"through the admin client: .*UNSTABLE_OFFSET_COMMIT"):
            consumer.committed([tp])
        producer.commit_transaction()
        consumer._consumer = real  # type: ignore[attr-defined]
        assert consumer.committed([tp]) == {tp: 5}  # (librdkafka's own fetch waits for the markers)
    finally:
        consumer._consumer = real  # type: ignore[attr-defined]
        producer.close()
        consumer.close()
