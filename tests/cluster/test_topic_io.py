"""produce() and read_topic(): lists, tuples, records, DataFrames (row and columnar forms)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from kstream_nb.cluster.base import TopicSpec
from kstream_nb.cluster.memory import get_cluster
from kstream_nb.cluster.partitioner import default_partition
from kstream_nb.cluster.records import ProducerRecord, TopicPartition
from kstream_nb.cluster.serdes import JsonSerde, LongSerde
from kstream_nb.cluster.topic_io import produce, read_topic
from kstream_nb.errors import DeserializationError, StreamsError, UnknownTopicError


def test_produce_values_and_read(bootstrap: str) -> None:
    assert produce("t", [{"a": 1}, {"a": 2}], bootstrap, timestamps=[10, 20]) == 2
    df = read_topic("t", bootstrap)
    assert list(df.columns) == ["partition", "offset", "timestamp", "time", "key", "value", "headers"]
    assert df["value"].tolist() == [{"a": 1}, {"a": 2}]
    assert df["timestamp"].tolist() == [10, 20]
    assert df["key"].tolist() == [None, None]


def test_produce_tuples_partitions_by_key(bootstrap: str) -> None:
    produce("t", [("alice", 1), ("bob", 2), ("alice", 3)], bootstrap, partitions=3, timestamps=100)
    df = read_topic("t", bootstrap)
    expected = default_partition(JsonSerde().serialize("t", "alice") or b"", 3)
    alice = df[df["key"] == "alice"]
    assert set(alice["partition"]) == {expected}
    assert alice["value"].tolist() == [1, 3]
    assert sorted(df["timestamp"]) == [100, 101, 102]
    assert list(df.sort_values(["partition", "offset"]).index) == list(df.index)


def test_produce_records_with_headers_and_serdes(bootstrap: str) -> None:
    records = [ProducerRecord(1, 10, 5, {"h": "x"}), ProducerRecord(2, None, 6)]
    produce("t", records, bootstrap, key_serde="long", value_serde=LongSerde(), headers={"d": b"y"})
    df = read_topic("t", bootstrap, key_serde="long", value_serde="long")
    assert df[["key", "value", "timestamp"]].values.tolist() == [[1, 10, 5], [2, None, 6]]
    assert df["headers"].tolist() == [(("h", b"x"),), (("d", b"y"),)]


def test_existing_topic_keeps_partition_count(bootstrap: str) -> None:
    get_cluster(bootstrap).create_topics([TopicSpec("t", 2)])
    produce("t", [1], bootstrap, partitions=5)
    assert get_cluster(bootstrap).admin().partition_count("t") == 2


def test_dataframe_with_value_column(bootstrap: str) -> None:
    frame = pd.DataFrame(
        {
            "key": ["a", "b"],
            "value": [{"x": 1}, {"x": 2}],
            "timestamp": pd.to_datetime(["1970-01-01 00:00:01", "1970-01-01 00:00:02"]),
        }
    )
    produce("t", frame, bootstrap)
    df = read_topic("t", bootstrap)
    assert df[["key", "value", "timestamp"]].values.tolist() == [["a", {"x": 1}, 1000], ["b", {"x": 2}, 2000]]
    cluster = get_cluster(bootstrap)
    consumer = cluster.consumer(None)
    consumer.assign([TopicPartition("t", 0)])
    assert all(b.columnar is None for b in consumer.poll(0))


def test_dataframe_columnar_fast_path(bootstrap: str) -> None:
    n = 1_000
    frame = pd.DataFrame(
        {
            "key": [f"k{i % 7}" for i in range(n)],
            "amount": np.arange(n, dtype=np.float64),
            "qty": np.arange(n, dtype=np.int64),
            "timestamp": np.arange(n, dtype=np.int64) + 1_000,
        }
    )
    assert produce("cols", frame, bootstrap, partitions=3) == n
    cluster = get_cluster(bootstrap)
    consumer = cluster.consumer(None)
    consumer.assign([TopicPartition("cols", p) for p in range(3)])
    batches = consumer.poll(0, max_records=10 * n)
    assert sum(len(b) for b in batches) == n
    assert all(b.columnar is not None and not b.materialized for b in batches)
    for batch in batches:
        assert batch.columnar is not None
        keys = batch.columnar.keys
        expected = {default_partition(k.encode("utf-8"), 3) for k in keys}  # as Java StringSerializer
        assert expected == {batch.partition}
        assert list(batch.columnar.values.columns) == ["amount", "qty"]
        assert np.all(np.diff(batch.columnar.values["qty"].to_numpy()) > 0)
    df = read_topic("cols", bootstrap)
    assert len(df) == n
    row = df[df["value"].map(lambda v: v["qty"] == 5)].iloc[0]
    assert row["key"] == "k5" and row["value"] == {"amount": 5.0, "qty": 5} and row["timestamp"] == 1_005


def test_columnar_null_keys_round_robin(bootstrap: str) -> None:
    frame = pd.DataFrame({"x": range(6)})
    produce("t", frame, bootstrap, partitions=3, timestamps=0)
    df = read_topic("t", bootstrap)
    assert df["partition"].tolist() == [0, 0, 1, 1, 2, 2]
    assert df["value"].tolist() == [{"x": 0}, {"x": 3}, {"x": 1}, {"x": 4}, {"x": 2}, {"x": 5}]


def test_dataframe_partition_column(bootstrap: str) -> None:
    frame = pd.DataFrame({"x": [1, 2, 3], "partition": [1, 0, 1]})
    produce("t", frame, bootstrap, partitions=2)
    df = read_topic("t", bootstrap)
    assert df[["partition", "offset"]].values.tolist() == [[0, 0], [1, 0], [1, 1]]
    with pytest.raises(StreamsError, match="'t' has no partition 4"):
        produce("t", pd.DataFrame({"x": [1], "partition": [4]}), bootstrap)


def test_read_topic_limits(bootstrap: str) -> None:
    produce("t", list(range(10)), bootstrap)
    assert read_topic("t", bootstrap, max_records=3)["value"].tolist() == [0, 1, 2]
    assert read_topic("t", bootstrap, from_beginning=False, max_records=2)["value"].tolist() == [8, 9]
    assert read_topic("t", bootstrap, from_beginning=False).empty


def test_read_missing_topic(bootstrap: str) -> None:
    with pytest.raises(UnknownTopicError, match="'ghost'"):
        read_topic("ghost", bootstrap)


def test_deserialization_error_names_position(bootstrap: str) -> None:
    produce("t", ["a", "b"], bootstrap, value_serde="string")
    with pytest.raises(DeserializationError, match=r"topic=t, partition=0, offset=0"):
        read_topic("t", bootstrap, value_serde="json")


def test_read_topic_decodes_each_record_as_it_was_written_by_default(bootstrap: str) -> None:
    produce("t", ["a", "b"], bootstrap, value_serde="string")
    produce("t", [("k", {"n": 1})], bootstrap)
    produce("t", [7], bootstrap, value_serde="long")
    assert read_topic("t", bootstrap)["value"].tolist() == ["a", "b", {"n": 1}, 7]


def test_empty_frame_and_timestamp_count_mismatch(bootstrap: str) -> None:
    assert produce("t", pd.DataFrame({"x": []}), bootstrap) == 0
    with pytest.raises(ValueError, match="2 timestamps for 3 records"):
        produce("t", [1, 2, 3], bootstrap, timestamps=[1, 2])


def test_invalid_bootstrap_is_rejected() -> None:
    with pytest.raises(StreamsError, match="bootstrap_servers"):
        produce("t", [1], "")


def test_a_partition_that_stops_short_of_its_end_is_an_error_not_a_partial_frame(
    bootstrap: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The end offsets promise records the broker does not hand over: read_topic names the partition and
    where it stopped instead of returning what it got as if it were all."""
    import kstream_nb.cluster.topic_io as topic_io

    produce("t", list(range(5)), bootstrap)
    admin_type = type(get_cluster(bootstrap).admin())
    real_end_offsets = admin_type.end_offsets
    monkeypatch.setattr(
        admin_type,
        "end_offsets",
        lambda self, tps: {tp: end + 3 for tp, end in real_end_offsets(self, tps).items()},
    )
    monkeypatch.setattr(topic_io, "_STALL_S", 0.3)
    with pytest.raises(
        StreamsError, match=r"topic 't' partition 0: no record for 0.3s at offset 5, before its end offset 8"
    ):
        read_topic("t", bootstrap)
