"""``ks.profile_topic`` on ``memory://``: the profile of a topic written byte by byte here equals a recount with
pandas of what was written (records, bytes, skew, time range, formats, columns, null rates, distinct keys), and
its HTML shows those numbers."""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping
from typing import Any

import pandas as pd
import pytest

import kstream_nb as ks
from kstream_nb.cluster.base import TopicSpec
from kstream_nb.cluster.connection import connect
from kstream_nb.cluster.registry_serdes import AvroSerde
from kstream_nb.cluster.schema_registry import registry_configs
from kstream_nb.errors import UnknownTopicError

BASE_MS = 1_764_000_000_000  # 2025-11-24 16:00:00 UTC
#: records per partition: a known skew (max 60 over a mean of 100/3: 1.80)
PER_PARTITION = {0: 60, 1: 30, 2: 10}
DISTINCT_KEYS = 13
HEADERS = (("source", b"test"),)


def orders_frame() -> pd.DataFrame:
    """The rows to write: partition, offset, timestamp, key and value bytes, and the value as a dict.

    Keys ``cust-N`` (13 distinct), values JSON objects with a nested address and ``note`` null in every third;
    partition p's records are 1 s apart from ``BASE_MS + p * 100 s``."""
    rows = []
    n = 0
    for partition, count in PER_PARTITION.items():
        for offset in range(count):
            value = {
                "id": n,
                "amount": round(n * 1.25 + 0.5, 2),
                "note": None if n % 3 == 0 else f"note {n}",
                "address": {"city": ["Oslo", "Lima", "Pune"][n % 3], "zip": 1000 + n},
            }
            rows.append(
                {
                    "partition": partition,
                    "offset": offset,
                    "timestamp": BASE_MS + partition * 100_000 + offset * 1000,
                    "key": f"cust-{(n * 7) % DISTINCT_KEYS}".encode(),
                    "value": json.dumps(value).encode(),
                    "decoded": value,
                }
            )
            n += 1
    return pd.DataFrame(rows)


def write_rows(
    bootstrap: str, topic: str, rows: pd.DataFrame, client_config: Mapping[str, Any] | None = None
) -> None:
    """Writes the rows' bytes as they are, to their partitions (headers: ``HEADERS``)."""
    cluster = connect(bootstrap, client_config)
    cluster.admin().create_topics([TopicSpec(topic, len(PER_PARTITION))], exist_ok=True)
    producer = cluster.producer()
    for row in rows.to_dict("records"):
        producer.send(topic, row["key"], row["value"], int(row["timestamp"]), HEADERS, int(row["partition"]))
    producer.flush()
    producer.close()


def recount(rows: pd.DataFrame) -> pd.DataFrame:
    """Per partition, with pandas: records, bytes (key + value + header name and value), first/last timestamps."""
    header_bytes = sum(len(name.encode()) + len(value) for name, value in HEADERS)
    sizes = rows["key"].map(len) + rows["value"].map(len) + header_bytes
    return (
        rows.assign(size=sizes)
        .groupby("partition")
        .agg(
            records=("offset", "size"),
            bytes=("size", "sum"),
            first=("timestamp", "min"),
            last=("timestamp", "max"),
        )
    )


def check_profile_matches(profile: ks.TopicProfile, rows: pd.DataFrame) -> None:
    """The profile of ``rows`` (all sampled) against the recount and the literal facts of ``orders_frame``."""
    expected = recount(rows)
    table = profile.to_pandas()
    assert table["partition"].tolist() == [0, 1, 2]
    assert table["records"].tolist() == expected["records"].tolist() == [60, 30, 10]
    assert table["bytes"].tolist() == expected["bytes"].tolist()
    assert table["first_timestamp"].tolist() == pd.to_datetime(expected["first"], unit="ms", utc=True).tolist()
    assert table["last_timestamp"].tolist() == pd.to_datetime(expected["last"], unit="ms", utc=True).tolist()
    assert profile.records == len(rows) == 100
    assert profile.skew == pytest.approx(60 / (100 / 3))
    assert profile.first_timestamp == BASE_MS and profile.last_timestamp == BASE_MS + 200_000 + 9_000
    assert profile.sampled == 100
    assert dict(profile.key_formats) == {"string": 100}
    assert dict(profile.value_formats) == {"json": 100}
    assert profile.distinct_keys == rows["key"].nunique() == DISTINCT_KEYS
    notes = pd.json_normalize(rows["decoded"].tolist(), max_level=1)
    columns = profile.to_pandas("columns")
    assert columns["column"].tolist() == ["id", "amount", "note", "address.city", "address.zip"]
    assert columns["dtype"].tolist() == ["int64", "float64", "string", "string", "int64"]
    assert columns["nulls"].tolist() == notes.isna().sum().loc[columns["column"]].tolist() == [0, 0, 34, 0, 0]
    assert columns.set_index("column").loc["note", "null_rate"] == pytest.approx(0.34)
    html = profile._repr_html_()
    for number in [*expected["bytes"].tolist(), 60, 30, 10]:
        assert f">{number:,}<" in html
    assert "<b>100</b> records" in html and f"<b>{sum(expected['bytes']):,}</b> bytes" in html
    assert "skew (max/mean records) <b>1.80</b>" in html
    assert "2025-11-24 16:00:00.000 UTC" in html and "2025-11-24 16:03:29.000 UTC" in html
    assert f"Distinct keys: <b>{DISTINCT_KEYS}</b> in the sample of 100 records" in html
    assert ">34.0%<" in html and "json 100" in html


def test_profile_equals_a_pandas_recount(bootstrap: str) -> None:
    rows = orders_frame()
    write_rows(bootstrap, "orders", rows)
    profile = ks.profile_topic("orders", bootstrap)
    assert profile.bytes_exact
    check_profile_matches(profile, rows)
    assert "estimated" not in profile._repr_html_()
    newest = profile.to_pandas("records")
    assert newest["partition"].tolist() == [2] * 5  # partition 2's last records are the newest
    assert newest["offset"].tolist() == [5, 6, 7, 8, 9]
    assert newest["value"].tolist() == rows[rows["partition"] == 2]["decoded"].tolist()[-5:]


def test_a_sample_of_the_last_records_per_partition(bootstrap: str) -> None:
    """Counts, bytes and time range stay exact for the whole topic; keys, formats and columns are the sample's."""
    rows = orders_frame()
    write_rows(bootstrap, "orders", rows)
    profile = ks.profile_topic("orders", bootstrap, sample=4)
    last = rows.groupby("partition").tail(4)
    expected = recount(rows)
    assert profile.to_pandas()["sampled"].tolist() == [4, 4, 4]
    assert profile.to_pandas()["bytes"].tolist() == expected["bytes"].tolist()
    assert profile.first_timestamp == BASE_MS
    assert profile.distinct_keys == last["key"].nunique() == 8
    nulls = sum(v["note"] is None for v in last["decoded"])
    assert profile.to_pandas("columns").set_index("column").loc["note", "nulls"] == nulls == 4
    assert "in the sample of 12 records" in profile._repr_html_()
    assert "the last 4 records of each partition" in profile._repr_html_()


def test_spread_sampling_sees_older_formats_than_the_last_records(bootstrap: str) -> None:
    """A topic whose first 50 values are JSON and last 50 plain text: the last 10 are all text, a spread sample
    of 10 (runs from the first record to the last) sees both."""
    cluster = connect(bootstrap)
    cluster.admin().create_topics([TopicSpec("moved", 1)])
    producer = cluster.producer()
    for i in range(100):
        value = json.dumps({"n": i}).encode() if i < 50 else f"line {i}".encode()
        producer.send("moved", None, value, BASE_MS + i)
    producer.close()
    last = ks.profile_topic("moved", bootstrap, sample=10)
    spread = ks.profile_topic("moved", bootstrap, sample=10, sampling="spread")
    assert dict(last.value_formats) == {"string": 10}
    assert dict(spread.value_formats) == {"json": 5, "string": 5}
    assert spread.sampled == 10 and spread.null_keys == 10 and spread.distinct_keys == 0
    for profile in (last, spread):
        assert (profile.first_timestamp, profile.last_timestamp) == (BASE_MS, BASE_MS + 99)
        assert dict(profile.key_formats) == {"null": 10}
    assert "10 null keys" in spread._repr_html_()


AVRO_CLICK = {
    "type": "record",
    "name": "Click",
    "fields": [{"name": "page", "type": "string"}, {"name": "ms", "type": ["null", "long"], "default": None}],
}


def test_a_topic_of_mixed_formats_reports_each_formats_count(bootstrap: str) -> None:
    """JSON, text, Avro through the embedded registry, Java longs and tombstones, record by record."""
    avro = AvroSerde(AVRO_CLICK).configure(registry_configs(bootstrap), False)
    clicks = [{"page": f"/p{i}", "ms": None if i % 2 else i} for i in range(6)]
    values: list[bytes | None] = [avro.serialize("mixed", c) for c in clicks]  # 6 avro
    values += [json.dumps({"page": f"/j{i}", "ms": i}).encode() for i in range(4)]  # 4 json
    values += [f"plain {i}".encode() for i in range(3)]  # 3 string
    values += [struct.pack(">q", BASE_MS + i) for i in range(2)]  # 2 long (Java's LongSerializer)
    values += [None]  # 1 tombstone
    keys = [struct.pack(">i", i) if i < 5 else f"k{i % 4}".encode() for i in range(len(values))]
    cluster = connect(bootstrap)
    cluster.admin().create_topics([TopicSpec("mixed", 1)])
    producer = cluster.producer()
    for i, (key, value) in enumerate(zip(keys, values, strict=True)):
        producer.send("mixed", key, value, BASE_MS + i)
    producer.close()
    profile = ks.profile_topic("mixed", bootstrap)
    assert dict(profile.value_formats) == {"avro": 6, "json": 4, "string": 3, "long": 2, "null": 1}
    assert list(profile.value_formats) == ["avro", "json", "string", "long", "null"]  # most frequent first
    assert dict(profile.key_formats) == {"string": 11, "int": 5}
    assert profile.distinct_keys == 5 + 4
    columns = profile.to_pandas("columns").set_index("column")
    assert columns.loc["page", "dtype"] == "string" and columns.loc["page", "nulls"] == 0
    assert columns.loc["ms", "dtype"] == "int64" and columns.loc["ms", "nulls"] == 3  # Avro's nulls
    assert profile.structured_values == 10
    formats = profile.to_pandas("formats")
    assert formats[formats["of"] == "value"].set_index("format")["records"].to_dict() == dict(
        profile.value_formats
    )
    html = profile._repr_html_()
    assert "Value formats: avro 6, json 4, string 3, long 2, null 1." in html
    assert "Key formats: string 11, int 5." in html


def test_an_empty_topic_and_a_missing_one(bootstrap: str) -> None:
    connect(bootstrap).admin().create_topics([TopicSpec("empty", 2)])
    profile = ks.profile_topic("empty", bootstrap)
    assert (profile.records, profile.bytes, profile.sampled, profile.skew) == (0, 0, 0, None)
    assert profile.first_timestamp is None and profile.columns == ()
    assert "<b>0</b> records" in profile._repr_html_()
    with pytest.raises(UnknownTopicError, match=f"topic 'nope' does not exist on {bootstrap}"):
        ks.profile_topic("nope", bootstrap)
    with pytest.raises(ValueError, match="sample must be a positive number"):
        ks.profile_topic("empty", bootstrap, sample=0)
    with pytest.raises(ValueError, match="sampling must be 'last' or 'spread'"):
        ks.profile_topic("empty", bootstrap, sampling="first")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown table 'cols'"):
        profile.to_pandas("cols")


def test_bytes_of_a_columnar_topic_are_its_serialized_records(bootstrap: str) -> None:
    """A DataFrame produced column-wise is stored decoded; its bytes are those of its records as JSON."""
    frame = pd.DataFrame({"key": ["a", "bb", "a"], "x": [1, 22, 333]})
    ks.produce("cols", frame, bootstrap, timestamps=BASE_MS)
    profile = ks.profile_topic("cols", bootstrap)
    read = ks.read_topic("cols", bootstrap, key_serde="bytes", value_serde="bytes")
    assert profile.bytes == sum(len(k) + len(v) for k, v in zip(read["key"], read["value"], strict=True))
    assert profile.distinct_keys == 2
