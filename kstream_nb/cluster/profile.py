"""``profile_topic``: what a topic holds, at a glance: records and bytes per partition (skew), time range, the
formats of keys and values, the columns of structured values, key cardinality and a few records.

Counts are exact for the whole topic (end - beginning offsets); formats, columns and keys come from a sample:
the last ``sample`` records of each partition (``sampling="last"``, the default: what the topic holds now, one
seek per partition), or ``sample`` records in up to ``SPREAD_RUNS`` runs evenly spread from its first record to
its last (``sampling="spread"``: older formats too, one seek per run).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import pandas as pd

from kstream_nb.cluster.auto_serde import AutoSerde
from kstream_nb.cluster.base import Consumer
from kstream_nb.cluster.connection import connect
from kstream_nb.cluster.memory import MemoryCluster
from kstream_nb.cluster.records import ConsumerRecord, TopicPartition
from kstream_nb.cluster.schema_registry import registry_configs
from kstream_nb.cluster.topic_io import read_range
from kstream_nb.errors import UnknownTopicError

DEFAULT_SAMPLE = 1000
#: how many evenly spread runs ``sampling="spread"`` reads per partition
SPREAD_RUNS = 10
#: how many sampled records a profile keeps to show (the newest)
SHOWN_RECORDS = 5
#: the dtype a column gets, by ``pandas.api.types.infer_dtype`` of its non-null sampled values
_DTYPES = {
    "integer": "int64",
    "floating": "float64",
    "mixed-integer-float": "float64",
    "decimal": "float64",
    "string": "string",
    "boolean": "bool",
    "empty": "null",
    "bytes": "bytes",
}
Sampling = Literal["last", "spread"]
TABLES = ("partitions", "columns", "formats", "records")


@dataclass(frozen=True)
class PartitionProfile:
    """One partition: offsets, bytes (exact or estimated: see ``TopicProfile.bytes_exact``), the timestamps (ms)
    of its first and last records by offset (None when it is empty) and how many records were sampled."""

    partition: int
    begin_offset: int
    end_offset: int
    bytes: int | None
    first_timestamp: int | None
    last_timestamp: int | None
    sampled: int

    @property
    def records(self) -> int:
        """End minus beginning offset: the records the partition holds (transaction markers and compacted-away
        records included: an upper bound on topics written transactionally or compacted)."""
        return self.end_offset - self.begin_offset


@dataclass(frozen=True)
class ColumnProfile:
    """A field of the sampled structured (dict) values, nested dicts flattened one level (``address.city``)."""

    name: str
    dtype: str
    nulls: int
    values: int  # the structured values sampled: a missing field counts as a null

    @property
    def null_rate(self) -> float:
        return self.nulls / self.values if self.values else 0.0


@dataclass(frozen=True, eq=False)
class TopicProfile:
    """What ``profile_topic`` found; a notebook shows it as HTML, ``to_pandas`` gives its tables."""

    topic: str
    bootstrap_servers: str
    partitions: tuple[PartitionProfile, ...]
    sampling: Sampling
    sample_per_partition: int
    bytes_exact: bool  # True: the log's stored sizes (memory://); False: the sample's sizes extrapolated
    key_formats: Mapping[str, int]
    value_formats: Mapping[str, int]
    columns: tuple[ColumnProfile, ...]
    structured_values: int
    distinct_keys: int
    null_keys: int
    records_shown: pd.DataFrame = field(repr=False)

    @property
    def records(self) -> int:
        return sum(p.records for p in self.partitions)

    @property
    def bytes(self) -> int | None:
        sizes = [p.bytes for p in self.partitions]
        return None if any(b is None for b in sizes) else sum(b for b in sizes if b is not None)

    @property
    def sampled(self) -> int:
        return sum(p.sampled for p in self.partitions)

    @property
    def skew(self) -> float | None:
        """Records of the fullest partition over the mean per partition (1.0: even; None: empty topic)."""
        return _skew([p.records for p in self.partitions])

    @property
    def bytes_skew(self) -> float | None:
        sizes = [p.bytes for p in self.partitions]
        return None if any(b is None for b in sizes) else _skew([b for b in sizes if b is not None])

    @property
    def first_timestamp(self) -> int | None:
        found = [p.first_timestamp for p in self.partitions if p.first_timestamp is not None]
        return min(found) if found else None

    @property
    def last_timestamp(self) -> int | None:
        found = [p.last_timestamp for p in self.partitions if p.last_timestamp is not None]
        return max(found) if found else None

    @property
    def sampling_text(self) -> str:
        if self.sampling == "last":
            return f"the last {self.sample_per_partition:,} records of each partition"
        return f"{self.sample_per_partition:,} records per partition in up to {SPREAD_RUNS} evenly spread runs"

    def to_pandas(self, table: str = "partitions") -> pd.DataFrame:
        """One of the profile's tables: ``"partitions"`` (records, bytes, offsets, time range, sampled per
        partition), ``"columns"`` (dtype, nulls, null rate), ``"formats"`` (key/value format counts of the
        sample) or ``"records"`` (the newest sampled records, decoded)."""
        if table == "partitions":
            return pd.DataFrame(
                {
                    "partition": [p.partition for p in self.partitions],
                    "records": [p.records for p in self.partitions],
                    "bytes": pd.array([p.bytes for p in self.partitions], dtype="Int64"),
                    "begin_offset": [p.begin_offset for p in self.partitions],
                    "end_offset": [p.end_offset for p in self.partitions],
                    "first_timestamp": _datetimes([p.first_timestamp for p in self.partitions]),
                    "last_timestamp": _datetimes([p.last_timestamp for p in self.partitions]),
                    "sampled": [p.sampled for p in self.partitions],
                }
            )
        if table == "columns":
            return pd.DataFrame(
                [(c.name, c.dtype, c.nulls, c.null_rate) for c in self.columns],
                columns=["column", "dtype", "nulls", "null_rate"],
            )
        if table == "formats":
            rows = [("key", f, n) for f, n in self.key_formats.items()]
            rows += [("value", f, n) for f, n in self.value_formats.items()]
            return pd.DataFrame(rows, columns=["of", "format", "records"])
        if table == "records":
            return self.records_shown.copy()
        raise ValueError(f"unknown table {table!r}; choose one of {', '.join(TABLES)}")

    def __repr__(self) -> str:
        total = "?" if self.bytes is None else f"{self.bytes:,}"
        return (
            f"<TopicProfile {self.topic!r} on {self.bootstrap_servers}: {self.records:,} records, {total} bytes, "
            f"{len(self.partitions)} partition(s), {self.distinct_keys:,} distinct keys in a sample of "
            f"{self.sampled:,}>"
        )

    def _repr_html_(self) -> str:
        """The profile as HTML (``cluster/profile_html.py``, imported when a notebook asks)."""
        from kstream_nb.cluster.profile_html import profile_html

        return profile_html(self)


def profile_topic(
    topic: str,
    bootstrap_servers: str = "memory://",
    sample: int = DEFAULT_SAMPLE,
    sampling: Sampling = "last",
    client_config: Mapping[str, Any] | None = None,
    schema_registry_url: str | None = None,
    schema_registry_config: Mapping[str, Any] | None = None,
) -> TopicProfile:
    """Profiles ``topic``: exact records per partition, bytes, time range; from a sample of ``sample`` records
    per partition (module docstring: ``sampling``) the key and value formats (the ``auto`` serde's names),
    the columns of dict values with dtypes and null rates, the distinct keys and the newest records.

    Bytes are the keys', values' and headers' sizes: exact from the log on ``memory://``; on Kafka the sample's
    mean record size times the partition's records (confluent-kafka has no DescribeLogDirs, and a log's disk
    size also counts batch headers and compression). Only committed records are sampled (read_committed).
    ``client_config`` / ``schema_registry_url`` / ``schema_registry_config``: as for ``read_topic``.
    """
    if isinstance(sample, bool) or not isinstance(sample, int) or sample < 1:
        raise ValueError(f"sample must be a positive number of records per partition, got {sample!r}")
    if sampling not in ("last", "spread"):
        raise ValueError(f"sampling must be 'last' or 'spread', got {sampling!r}")
    cluster = connect(bootstrap_servers, client_config)
    admin = cluster.admin()
    count = admin.partition_count(topic)
    if count is None:
        raise UnknownTopicError(topic, f"topic {topic!r} does not exist on {bootstrap_servers}")
    tps = [TopicPartition(topic, p) for p in range(count)]
    begins, ends, stable = admin.beginning_offsets(tps), admin.end_offsets(tps), admin.committed_end_offsets(tps)
    samples: dict[int, list[ConsumerRecord]] = {}
    edges: dict[int, tuple[int | None, int | None]] = {}
    consumer = cluster.consumer(None, {"auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    try:
        for tp in tps:
            samples[tp.partition], edges[tp.partition] = _sample_partition(
                consumer, tp, begins[tp], stable[tp], sample, sampling
            )
    finally:
        consumer.close()
    if isinstance(cluster, MemoryCluster):
        sizes: dict[int, int | None] = {}
        for tp in tps:
            log = cluster.partition_log(tp)
            sizes[tp.partition] = log.payload_bytes() if log is not None else 0
    else:
        sizes = _estimated_sizes(samples, {tp.partition: ends[tp] - begins[tp] for tp in tps})
    configs = registry_configs(bootstrap_servers, schema_registry_url, schema_registry_config)
    keys, values = AutoSerde().configure(configs, True), AutoSerde().configure(configs, False)
    decoded = _decode([r for p in sorted(samples) for r in samples[p]], keys, values)
    partitions = tuple(
        PartitionProfile(
            tp.partition,
            begins[tp],
            ends[tp],
            sizes[tp.partition],
            edges[tp.partition][0],
            edges[tp.partition][1],
            len(samples[tp.partition]),
        )
        for tp in tps
    )
    structured = [v for v in decoded["value"] if isinstance(v, Mapping)]
    raw_keys = [r.key for p in samples.values() for r in p]
    return TopicProfile(
        topic=topic,
        bootstrap_servers=bootstrap_servers,
        partitions=partitions,
        sampling=sampling,
        sample_per_partition=sample,
        bytes_exact=isinstance(cluster, MemoryCluster),
        key_formats=_counts(decoded["key_format"]),
        value_formats=_counts(decoded["value_format"]),
        columns=columns_of(structured),
        structured_values=len(structured),
        distinct_keys=len({k for k in raw_keys if k is not None}),
        null_keys=sum(k is None for k in raw_keys),
        records_shown=_newest(decoded, SHOWN_RECORDS),
    )


def columns_of(values: Iterable[Mapping[str, Any]]) -> tuple[ColumnProfile, ...]:
    """The fields of dict values (nested dicts flattened one level), in order of first appearance, each with
    the dtype pandas infers for its non-null values and its nulls (None, NaN or missing)."""
    rows = [_flatten(v) for v in values]
    if not rows:
        return ()
    frame = pd.DataFrame(rows, dtype=object)
    out = []
    for name in frame.columns:
        column = frame[name]
        nulls = column.map(_is_null)
        kind = pd.api.types.infer_dtype(column[~nulls], skipna=True)
        out.append(ColumnProfile(str(name), _DTYPES.get(kind, "object"), int(nulls.sum()), len(rows)))
    return tuple(out)


def _flatten(value: Mapping[str, Any]) -> dict[str, Any]:
    row: dict[str, Any] = {}
    for name, item in value.items():
        if isinstance(item, Mapping) and item:
            for inner, nested in item.items():
                row[f"{name}.{inner}"] = nested
        else:
            row[str(name)] = item
    return row


def _is_null(value: Any) -> bool:
    return value is None or (isinstance(value, float) and value != value)


def _sample_partition(
    consumer: Consumer, tp: TopicPartition, begin: int, end: int, sample: int, sampling: Sampling
) -> tuple[list[ConsumerRecord], tuple[int | None, int | None]]:
    """The sampled records of one partition (offset order) and the timestamps of its first and last records."""
    if begin >= end:
        return [], (None, None)
    span = end - begin
    if sampling == "last" or span <= sample:
        runs = [(max(begin, end - sample), end)]
    else:
        count = min(SPREAD_RUNS, sample)
        lengths = [sample // count + (1 if i < sample % count else 0) for i in range(count)]
        # the first run starts at the first record, the last ends at the last, the others evenly between
        starts = [begin + (span - n) * i // max(1, count - 1) for i, n in enumerate(lengths)]
        runs = [(start, start + n) for start, n in zip(starts, lengths, strict=True)]
    found: dict[int, ConsumerRecord] = {}
    for start, stop in runs:
        for rec in read_range(consumer, tp, start, stop):
            found[rec.offset] = rec
    records = [found[o] for o in sorted(found)]
    first = records[0].timestamp if records and runs[0][0] == begin else None
    if first is None:
        head = list(read_range(consumer, tp, begin, end, limit=1))
        first = head[0].timestamp if head else None
    return records, (first, records[-1].timestamp if records else None)


def record_size(rec: ConsumerRecord) -> int:
    """A record's key, value, header names (UTF-8) and header values, in bytes."""
    size = len(rec.key or b"") + len(rec.value or b"")
    return size + sum(len(name.encode()) + len(value or b"") for name, value in rec.headers)


def _estimated_sizes(samples: dict[int, list[ConsumerRecord]], records: dict[int, int]) -> dict[int, int | None]:
    """Each partition's records times its sample's mean record size (the topic's mean for a partition with
    records but no sample; None when nothing was sampled at all)."""
    every = [record_size(r) for recs in samples.values() for r in recs]
    overall = sum(every) / len(every) if every else None
    out: dict[int, int | None] = {}
    for p, n in records.items():
        sizes = [record_size(r) for r in samples[p]]
        mean = sum(sizes) / len(sizes) if sizes else overall
        out[p] = 0 if n == 0 else None if mean is None else round(mean * n)
    return out


def _decode(records: list[ConsumerRecord], keys: AutoSerde, values: AutoSerde) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {c: [] for c in ("partition", "offset", "timestamp", "key", "value")}
    out["key_format"], out["value_format"] = [], []
    for rec in records:
        key_format, key = keys.detect(rec.topic, rec.key)
        value_format, value = values.detect(rec.topic, rec.value)
        for name, item in (
            ("partition", rec.partition),
            ("offset", rec.offset),
            ("timestamp", rec.timestamp),
            ("key", key),
            ("value", value),
            ("key_format", key_format),
            ("value_format", value_format),
        ):
            out[name].append(item)
    return out


def _newest(decoded: dict[str, list[Any]], n: int) -> pd.DataFrame:
    columns = ["partition", "offset", "timestamp", "key", "value", "key_format", "value_format"]
    frame = pd.DataFrame({c: pd.Series(decoded[c], dtype=object) for c in columns}, columns=columns)
    for c in ("partition", "offset", "timestamp"):
        frame[c] = frame[c].astype("int64")
    frame = frame.sort_values(["timestamp", "partition", "offset"]).tail(n).reset_index(drop=True)
    frame["timestamp"] = pd.to_datetime(frame["timestamp"], unit="ms", utc=True)
    return frame


def _counts(items: list[str]) -> dict[str, int]:
    """Occurrences of each item, most frequent first (ties by name)."""
    counts: dict[str, int] = {}
    for item in items:
        counts[item] = counts.get(item, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def _skew(values: list[int]) -> float | None:
    mean = sum(values) / len(values) if values else 0
    return max(values) / mean if mean else None


def _datetimes(ms: list[int | None]) -> pd.Series:
    return pd.to_datetime(pd.Series(ms, dtype="Int64"), unit="ms", utc=True)
