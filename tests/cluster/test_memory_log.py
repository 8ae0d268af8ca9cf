"""The partition log: offsets, timestamps, headers, columnar segments, compaction and retention."""

from __future__ import annotations

import time

import numpy as np
import pandas as pd

from kstream_nb.cluster.base import TopicSpec
from kstream_nb.cluster.memory import MemoryCluster
from kstream_nb.cluster.records import LOG_APPEND_TIME, ColumnarBatch, ConsumerRecord, TopicPartition
from kstream_nb.cluster.serdes import JsonSerde, StringSerde


def read_all(cluster: MemoryCluster, topic: str, partition: int = 0) -> list[ConsumerRecord]:
    consumer = cluster.consumer(None)
    consumer.assign([TopicPartition(topic, partition)])
    out: list[ConsumerRecord] = []
    while batches := consumer.poll(0):
        for batch in batches:
            out.extend(batch.records)
    consumer.close()
    return out


def test_offsets_timestamps_headers(cluster: MemoryCluster) -> None:
    producer = cluster.producer()
    metas = [producer.send("t", b"k", b"v%d" % i, 1000 + i, (("h", b"x"),)) for i in range(3)]
    assert [m.offset for m in metas] == [0, 1, 2]
    assert [m.timestamp for m in metas] == [1000, 1001, 1002]
    records = read_all(cluster, "t")
    assert [(r.offset, r.timestamp, r.value, r.headers) for r in records] == [
        (0, 1000, b"v0", (("h", b"x"),)),
        (1, 1001, b"v1", (("h", b"x"),)),
        (2, 1002, b"v2", (("h", b"x"),)),
    ]


def test_missing_timestamp_is_wall_clock(cluster: MemoryCluster) -> None:
    before = time.time_ns() // 1_000_000
    meta = cluster.producer().send("t", None, b"v")
    assert before <= meta.timestamp <= time.time_ns() // 1_000_000


def test_log_append_time_overwrites_timestamp(cluster: MemoryCluster) -> None:
    cluster.create_topics([TopicSpec("t", 1, {"message.timestamp.type": "LogAppendTime"})])
    before = time.time_ns() // 1_000_000
    meta = cluster.producer().send("t", None, b"v", timestamp=5)
    assert meta.timestamp >= before
    [record] = read_all(cluster, "t")
    assert record.timestamp == meta.timestamp
    assert record.timestamp_type == LOG_APPEND_TIME


def test_segments_roll_and_offsets_stay_contiguous(bootstrap: str) -> None:
    cluster = MemoryCluster("seg", segment_records=3)
    producer = cluster.producer()
    for i in range(10):
        producer.send("t", None, str(i).encode())
    records = read_all(cluster, "t")
    assert [r.offset for r in records] == list(range(10))
    consumer = cluster.consumer(None)
    consumer.assign([TopicPartition("t", 0)])
    consumer.seek(TopicPartition("t", 0), 4)
    batches = consumer.poll(0, max_records=4)
    assert [r.offset for b in batches for r in b.records] == [4, 5, 6, 7]
    assert consumer.position(TopicPartition("t", 0)) == 8


NOW = time.time_ns() // 1_000_000


def _columnar(n: int, start_ts: int = NOW) -> ColumnarBatch:
    return ColumnarBatch(
        keys=[f"k{i % 10}" for i in range(n)],
        values=pd.DataFrame({"x": np.arange(n), "y": np.arange(n) * 0.5}),
        timestamps=np.arange(start_ts, start_ts + n, dtype=np.int64),
        key_serde=StringSerde(),
        value_serde=JsonSerde(),
    )


def test_columnar_poll_does_not_materialize(cluster: MemoryCluster) -> None:
    producer = cluster.producer()
    producer.send("t", b"a", b"1", NOW)
    producer.send_columnar("t", _columnar(100_000, NOW + 10), 0)
    consumer = cluster.consumer(None)
    consumer.assign([TopicPartition("t", 0)])
    started = time.perf_counter()
    batches = consumer.poll(0, max_records=200_000)
    assert time.perf_counter() - started < 0.5
    raw, col = batches
    assert raw.columnar is None and len(raw) == 1
    assert col.columnar is not None and not col.materialized
    assert len(col) == 100_000 and col.base_offset == 1 and col.next_offset == 100_001
    assert col.columnar.values["x"].iloc[-1] == 99_999
    assert not col.materialized


def test_columnar_fetch_is_sliced(cluster: MemoryCluster) -> None:
    producer = cluster.producer()
    producer.send_columnar("t", _columnar(10), 0)
    producer.send("t", b"after", b"1")
    consumer = cluster.consumer(None)
    consumer.assign([TopicPartition("t", 0)])
    consumer.seek(TopicPartition("t", 0), 3)
    [batch] = consumer.poll(0, max_records=4)
    assert batch.columnar is not None
    assert batch.columnar.values["x"].tolist() == [3, 4, 5, 6]
    assert not batch.materialized
    first = batch.records[0]
    assert (first.offset, first.key, first.timestamp) == (3, b"k3", NOW + 3)
    assert JsonSerde().deserialize("t", first.value) == {"x": 3, "y": 1.5}
    assert [r.offset for r in batch.records] == [3, 4, 5, 6]
    rest = consumer.poll(0)
    assert [r.offset for b in rest for r in b.records] == [7, 8, 9, 10]


def test_columnar_log_append_time(cluster: MemoryCluster) -> None:
    cluster.create_topics([TopicSpec("t", 1, {"message.timestamp.type": "LogAppendTime"})])
    before = time.time_ns() // 1_000_000
    cluster.producer().send_columnar("t", _columnar(5), 0)
    assert all(r.timestamp >= before for r in read_all(cluster, "t"))


def test_compaction_keeps_latest_per_key_and_drops_tombstones() -> None:
    cluster = MemoryCluster("compact", segment_records=1_000_000)
    cluster.create_topics([TopicSpec("c", 1, {"cleanup.policy": "compact", "delete.retention.ms": "0"})])
    producer = cluster.producer()
    for i, (k, v) in enumerate([(b"a", b"1"), (b"b", b"1"), (b"a", b"2"), (b"c", b"1"), (b"b", None)]):
        producer.send("c", k, v, 100 + i)
    assert cluster.compact("c") == 0  # the active segment is never cleaned
    removed = cluster.compact("c", roll=True)
    assert removed == 3
    producer.send("c", b"a", b"3", 200)
    records = read_all(cluster, "c")
    assert [(r.offset, r.key, r.value) for r in records] == [
        (2, b"a", b"2"),
        (3, b"c", b"1"),
        (5, b"a", b"3"),
    ]
    assert cluster.admin().end_offsets([TopicPartition("c", 0)]) == {TopicPartition("c", 0): 6}


def test_compaction_keeps_recent_tombstones() -> None:
    cluster = MemoryCluster("compact2")
    cluster.create_topics([TopicSpec("c", 1, {"cleanup.policy": "compact"})])
    producer = cluster.producer()
    producer.send("c", b"a", b"1")
    producer.send("c", b"a", None)
    cluster.compact(roll=True)
    assert [(r.offset, r.value) for r in read_all(cluster, "c")] == [(1, None)]


def test_automatic_compaction_and_seek_into_gap() -> None:
    cluster = MemoryCluster("compact3", segment_records=10)
    cluster.create_topics([TopicSpec("c", 1, {"cleanup.policy": "compact"})])
    producer = cluster.producer()
    for i in range(100):
        producer.send("c", b"k%d" % (i % 3), b"%d" % i)
    records = read_all(cluster, "c")
    assert len(records) < 30
    latest = {r.key: r.value for r in records}
    assert latest == {b"k0": b"99", b"k1": b"97", b"k2": b"98"}
    consumer = cluster.consumer(None)
    consumer.assign([TopicPartition("c", 0)])
    consumer.seek(TopicPartition("c", 0), 1)
    offsets = [r.offset for b in consumer.poll(0) for r in b.records]
    assert offsets == sorted(offsets) and offsets[0] > 1 and offsets[-1] == 99


def test_retention_drops_old_segments_and_consumer_resets() -> None:
    cluster = MemoryCluster("retention", segment_records=2)
    cluster.create_topics([TopicSpec("r", 1, {"retention.ms": "60000"})])
    now = time.time_ns() // 1_000_000
    producer = cluster.producer()
    old_consumer = cluster.consumer(None, {"auto.offset.reset": "earliest"})
    old_consumer.assign([TopicPartition("r", 0)])
    old_consumer.seek(TopicPartition("r", 0), 0)
    for i in range(4):
        producer.send("r", None, b"old%d" % i, 1000 + i)
    for i in range(3):
        producer.send("r", None, b"new%d" % i, now)
    cluster.apply_retention("r")
    tp = TopicPartition("r", 0)
    assert cluster.admin().beginning_offsets([tp]) == {tp: 4}
    assert [r.value for r in read_all(cluster, "r")] == [b"new0", b"new1", b"new2"]
    assert [r.offset for b in old_consumer.poll(0) for r in b.records] == [4, 5, 6]


def test_infinite_retention_keeps_everything() -> None:
    cluster = MemoryCluster("forever", segment_records=2)
    cluster.create_topics([TopicSpec("r", 1, {"retention.ms": "-1"})])
    producer = cluster.producer()
    for i in range(6):
        producer.send("r", None, b"x", i)
    assert cluster.apply_retention() == 0
    assert len(read_all(cluster, "r")) == 6
