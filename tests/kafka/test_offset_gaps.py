"""Reading along partitions while they are written, and over the offset gaps transactions leave: every
record once, in offset order, and reading goes on to the end."""

from __future__ import annotations

import threading
import time

import pytest

from kstream_nb.cluster.base import TopicSpec
from kstream_nb.cluster.kafka import KafkaCluster, get_kafka_cluster
from kstream_nb.cluster.records import TopicPartition
from tests.kafka_broker import FAST_CLIENT_CONFIG

pytestmark = pytest.mark.kafka

PRODUCERS = 4
PER_PRODUCER = 50_000
PARTITIONS = 2


@pytest.fixture
def cluster(kafka_bootstrap: str) -> KafkaCluster:
    return get_kafka_cluster(kafka_bootstrap, {"fetch.wait.max.ms": 10})


def test_partitions_several_producers_write_are_read_whole_while_they_write(cluster: KafkaCluster, names) -> None:
    """A group member reads two partitions while four producers write both: every record exactly once, in
    offset order."""
    topic = names("shared")
    cluster.admin().create_topics([TopicSpec(topic, PARTITIONS)])
    consumer = cluster.consumer(names("readers"), dict(FAST_CLIENT_CONFIG))
    consumer.subscribe([topic])
    while len(consumer.assignment()) < PARTITIONS:
        consumer.poll(0.1)

    def write(tag: int) -> None:
        producer = cluster.producer({"linger.ms": 1})
        for i in range(PER_PRODUCER):
            producer.send(topic, None, b"%d-%d" % (tag, i), partition=i % PARTITIONS)
        producer.flush()

    writers = [threading.Thread(target=write, args=(t,)) for t in range(PRODUCERS)]
    for w in writers:
        w.start()
    offsets: dict[int, list[int]] = {p: [] for p in range(PARTITIONS)}
    values: list[bytes] = []
    last_read = time.monotonic()
    try:
        while any(w.is_alive() for w in writers) or time.monotonic() - last_read < 3:
            for batch in consumer.poll(0.2):
                last_read = time.monotonic()
                for record in batch.records:
                    offsets[batch.partition].append(record.offset)
                    values.append(record.value)
    finally:
        for w in writers:
            w.join()
        consumer.close()
    total = PRODUCERS * PER_PRODUCER
    assert len(values) == total, f"read {len(values)} of {total} records"
    for partition, read in offsets.items():
        assert read == list(range(total // PARTITIONS)), f"partition {partition}"
    assert sorted(values) == sorted(b"%d-%d" % (t, i) for t in range(PRODUCERS) for i in range(PER_PRODUCER))


def test_transaction_markers_gaps_are_stepped_over(cluster: KafkaCluster, names) -> None:
    """Transaction markers leave gaps in the offsets: two adjacent markers (two producers' transactions
    ending one after the other), then one. Each record comes once, in order, and reading goes on to the end."""
    topic = names("markers")
    cluster.admin().create_topics([TopicSpec(topic, 1)])
    a, b = (cluster.producer({"transactional.id": names(f"txn-{p}")}) for p in "ab")
    for producer, tag in ((a, "a"), (b, "b")):
        producer.init_transactions()
        producer.begin_transaction()
        for i in range(3):
            producer.send(topic, None, f"{tag}-{i}".encode(), partition=0)
        producer.flush()  # a's records, then b's, then a's marker and b's marker
    a.commit_transaction()
    b.commit_transaction()
    for first in (3, 6):  # two more transactions of a: one marker between them
        a.begin_transaction()
        for i in range(first, first + 3):
            a.send(topic, None, f"a-{i}".encode(), partition=0)
        a.commit_transaction()
    a.close()
    b.close()
    consumer = cluster.consumer(None, {"isolation.level": "read_committed"})
    consumer.assign([TopicPartition(topic, 0)])
    expected = [f"{tag}-{i}".encode() for tag, i in [("a", 0), ("a", 1), ("a", 2), ("b", 0), ("b", 1), ("b", 2)]]
    expected += [f"a-{i}".encode() for i in range(3, 9)]
    records = []
    deadline = time.monotonic() + 20
    while len(records) < len(expected):
        assert time.monotonic() < deadline, f"read {[r.value for r in records]}"
        for batch in consumer.poll(0.2):
            records.extend(batch.records)
    for _ in range(5):  # nothing more comes: no record twice
        for batch in consumer.poll(0.1):
            records.extend(batch.records)
    consumer.close()
    assert [r.value for r in records] == expected
    offsets = [r.offset for r in records]
    assert offsets[6] - offsets[5] == 3 and offsets[9] - offsets[8] == 2  # two markers, then one
