"""User helpers to feed a topic (``produce``) and look at one as a DataFrame (``read_topic``)."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from kstream_nb.cluster.base import Cluster, Producer, TopicSpec
from kstream_nb.cluster.connection import connect
from kstream_nb.cluster.partitioner import default_partition
from kstream_nb.cluster.records import ColumnarBatch, ConsumerRecord, Headers, TopicPartition, normalize_headers
from kstream_nb.cluster.schema_registry import configure_serde, registry_configs
from kstream_nb.cluster.serde_specs import SerdeSpec, serde_from
from kstream_nb.cluster.serdes import Serde
from kstream_nb.errors import DeserializationError, SerializationError, StreamsError, UnknownTopicError
from kstream_nb.time_bounds import TimeBound, now_ms, to_epoch_ms

RESERVED_COLUMNS = ("key", "timestamp", "partition", "headers")
#: ``timestamp`` is epoch ms (int64); ``time`` is the same instant as a timezone-aware datetime (UTC)
READ_COLUMNS = ["partition", "offset", "timestamp", "time", "key", "value", "headers"]

Timestamps = int | Sequence[int] | np.ndarray | None
#: how long ``read_topic`` waits for the next record of a partition it has not read to its end
_STALL_S = 30.0


def produce(
    topic: str,
    records: Iterable[Any] | pd.DataFrame,
    bootstrap_servers: str = "memory://",
    partitions: int = 1,
    timestamps: Timestamps = None,
    key_serde: SerdeSpec = "string_or_json",
    value_serde: SerdeSpec = "json",
    headers: Mapping[str, Any] | Iterable[tuple[str, Any]] | None = None,
    client_config: Mapping[str, Any] | None = None,
    schema_registry_url: str | None = None,
    schema_registry_config: Mapping[str, Any] | None = None,
) -> int:
    """Writes records to ``topic`` (created with ``partitions`` if missing); returns how many were written.

    ``records``: values, (key, value) tuples, objects with ``key``/``value`` (and optional ``timestamp``,
    ``headers``) attributes, or a DataFrame: with a ``value`` column one record per row; without one, the
    non-reserved columns are the fields of dict values, stored as columnar batches.
    ``timestamps``: one int ms per record, or a start ms (record i gets start + i).
    ``client_config``: Kafka client settings (``security.protocol``, ``sasl.*``...) for a Kafka cluster.
    ``schema_registry_url`` / ``schema_registry_config``: the Schema Registry of ``"avro"``, ``"protobuf"`` and
    ``"jsonschema"`` serdes and its client settings (confluent-kafka's names: ``basic.auth.user.info``...);
    on ``memory://`` the embedded registry by default.
    """
    cluster = connect(bootstrap_servers, client_config)
    kser, vser = _serdes(bootstrap_servers, key_serde, value_serde, schema_registry_url, schema_registry_config)
    admin = cluster.admin()
    admin.create_topics([TopicSpec(topic, partitions)], exist_ok=True)
    count = admin.partition_count(topic)
    if count is None:
        raise UnknownTopicError(topic)
    producer = cluster.producer()
    try:
        if isinstance(records, pd.DataFrame):
            if "value" in records.columns:
                return _produce_rows_frame(producer, topic, records, timestamps, kser, vser, headers)
            return _produce_columnar(producer, topic, records, count, timestamps, kser, vser, headers)
        return _produce_items(producer, topic, list(records), timestamps, kser, vser, headers)
    finally:
        producer.flush()
        producer.close()


def _serdes(
    bootstrap_servers: str,
    key_serde: SerdeSpec,
    value_serde: SerdeSpec,
    schema_registry_url: str | None,
    schema_registry_config: Mapping[str, Any] | None,
) -> tuple[Serde, Serde]:
    """A call's key and value serdes, configured with its cluster and Schema Registry."""
    configs = registry_configs(bootstrap_servers, schema_registry_url, schema_registry_config)
    key = configure_serde(serde_from(key_serde), configs, True)
    return key, configure_serde(serde_from(value_serde), configs, False)


def _timestamp_list(timestamps: Timestamps, n: int) -> Sequence[int | None]:
    if timestamps is None:
        return [None] * n
    if isinstance(timestamps, int | np.integer):
        return list(range(int(timestamps), int(timestamps) + n))
    ts = [int(t) for t in timestamps]
    if len(ts) != n:
        raise ValueError(f"got {len(ts)} timestamps for {n} records; give one per record or a start int")
    return ts


def _produce_items(
    producer: Producer,
    topic: str,
    items: list[Any],
    timestamps: Timestamps,
    kser: Serde,
    vser: Serde,
    headers: Any,
) -> int:
    ts_list = _timestamp_list(timestamps, len(items))
    default_headers = normalize_headers(headers)
    for item, ts in zip(items, ts_list, strict=True):
        rec_headers: Headers = default_headers
        if not isinstance(item, Mapping) and hasattr(item, "key") and hasattr(item, "value"):
            key, value = item.key, item.value
            own_ts = getattr(item, "timestamp", None)
            ts = ts if own_ts is None else int(own_ts)
            own_headers = getattr(item, "headers", None)
            if own_headers:
                rec_headers = normalize_headers(own_headers)
        elif isinstance(item, tuple) and len(item) == 2:
            key, value = item
        else:
            key, value = None, item
        producer.send(topic, kser.serialize(topic, key), vser.serialize(topic, value), ts, rec_headers)
    return len(items)


def _frame_timestamps(frame: pd.DataFrame, timestamps: Timestamps) -> np.ndarray:
    n = len(frame)
    if "timestamp" in frame.columns:
        col = frame["timestamp"]
        if pd.api.types.is_datetime64_any_dtype(col):
            if col.isna().any():
                raise ValueError("the timestamp column has missing values")
            epoch = pd.Timestamp(0, tz=getattr(col.dt, "tz", None))
            return ((col - epoch) // pd.Timedelta(milliseconds=1)).to_numpy(dtype=np.int64)
        return col.to_numpy(dtype=np.int64)
    if timestamps is None:
        return np.full(n, now_ms(), dtype=np.int64)
    if isinstance(timestamps, int | np.integer):
        return np.arange(int(timestamps), int(timestamps) + n, dtype=np.int64)
    ts = np.asarray(timestamps, dtype=np.int64)
    if len(ts) != n:
        raise ValueError(f"got {len(ts)} timestamps for {n} records; give one per record or a start int")
    return ts


def _frame_keys(frame: pd.DataFrame) -> list[Any]:
    if "key" not in frame.columns:
        return [None] * len(frame)
    return [None if isinstance(k, float) and k != k else k for k in frame["key"].tolist()]


def _frame_headers(frame: pd.DataFrame, headers: Any) -> list[Headers] | None:
    if "headers" in frame.columns:
        return [normalize_headers(h) for h in frame["headers"].tolist()]
    default = normalize_headers(headers)
    return [default] * len(frame) if default else None


def _produce_rows_frame(
    producer: Producer,
    topic: str,
    frame: pd.DataFrame,
    timestamps: Timestamps,
    kser: Serde,
    vser: Serde,
    headers: Any,
) -> int:
    keys = _frame_keys(frame)
    ts = _frame_timestamps(frame, timestamps).tolist()
    hdrs = _frame_headers(frame, headers)
    parts = frame["partition"].astype(int).tolist() if "partition" in frame.columns else None
    for i, value in enumerate(frame["value"].tolist()):
        producer.send(
            topic,
            kser.serialize(topic, keys[i]),
            vser.serialize(topic, value),
            ts[i],
            hdrs[i] if hdrs else (),
            parts[i] if parts is not None else None,
        )
    return len(frame)


def _produce_columnar(
    producer: Producer,
    topic: str,
    frame: pd.DataFrame,
    count: int,
    timestamps: Timestamps,
    kser: Serde,
    vser: Serde,
    headers: Any,
) -> int:
    fields = [c for c in frame.columns if c not in RESERVED_COLUMNS]
    if not fields:
        raise ValueError(
            f"cannot produce to {topic!r}: the DataFrame needs a 'value' column or field columns "
            f"besides {', '.join(RESERVED_COLUMNS)}"
        )
    n = len(frame)
    if n == 0:
        return 0
    values = frame[fields].reset_index(drop=True)
    vser.serialize(topic, values.iloc[0].to_dict())
    keys = _frame_keys(frame)
    ts = _frame_timestamps(frame, timestamps)
    hdrs = _frame_headers(frame, headers)
    targets = _target_partitions(topic, frame, keys, count, kser)
    for p in sorted(set(targets.tolist())) if count > 1 or "partition" in frame.columns else [0]:
        if len(targets) and np.all(targets == p):
            batch = ColumnarBatch(keys, values, ts, kser, vser, hdrs)
        else:
            idx = np.flatnonzero(targets == p)
            batch = ColumnarBatch(
                [keys[i] for i in idx],
                values.iloc[idx].reset_index(drop=True),
                ts[idx],
                kser,
                vser,
                [hdrs[i] for i in idx] if hdrs else None,
            )
        producer.send_columnar(topic, batch, int(p))
    return n


def _target_partitions(topic: str, frame: pd.DataFrame, keys: list[Any], count: int, kser: Serde) -> np.ndarray:
    if "partition" in frame.columns:
        parts = frame["partition"].to_numpy(dtype=np.int64)
        bad = parts[(parts < 0) | (parts >= count)]
        if len(bad):
            raise StreamsError(f"topic {topic!r} has no partition {int(bad[0])} (it has {count} partitions)")
        return parts
    if count == 1:
        return np.zeros(len(keys), dtype=np.int64)
    round_robin = itertools.count()
    out = np.empty(len(keys), dtype=np.int64)
    for i, key in enumerate(keys):
        key_bytes = kser.serialize(topic, key)
        out[i] = next(round_robin) % count if key_bytes is None else default_partition(key_bytes, count)
    return out


def read_topic(
    topic: str,
    bootstrap_servers: str = "memory://",
    key_serde: SerdeSpec = "auto",
    value_serde: SerdeSpec = "auto",
    from_beginning: bool = True,
    max_records: int | None = None,
    client_config: Mapping[str, Any] | None = None,
    isolation_level: str = "read_committed",
    schema_registry_url: str | None = None,
    schema_registry_config: Mapping[str, Any] | None = None,
    start: TimeBound | None = None,
    end: TimeBound | None = None,
) -> pd.DataFrame:
    """The records of ``topic`` now, as a DataFrame (partition, offset, timestamp, time, key, value, headers):
    ``timestamp`` in epoch ms, ``time`` the same as a timezone-aware (UTC) datetime; each partition in offset
    order.

    ``start`` / ``end``: a time range (a ``datetime``, naive meaning UTC; epoch ms; an ISO-8601 string; or now
    minus a duration, ``"-1h"``), found per partition with the broker's time index (Kafka's ListOffsets by
    timestamp; the embedded cluster's own index): a partition is read from its earliest record stamped
    >= ``start`` up to, not including, its earliest record stamped >= ``end``, as ``kcat -o s@START -o e@END``
    does. With out-of-order timestamps the range is one of offsets: an older record after the start is
    returned (a consumer started at ``start`` reads it, so does an app reset to it), and nothing after the first
    record at or past ``end`` is.

    Keys and values are decoded record by record by default (``"auto"``: Schema Registry wire format, JSON,
    text, Kafka's 4/8-byte numbers, else the bytes); give a serde spec to read them one way.
    ``max_records`` caps the rows (partition by partition); with ``from_beginning=False`` it gives the
    last ``max_records`` records of each partition (and nothing without it).
    ``client_config``: Kafka client settings (``security.protocol``, ``sasl.*``...) for a Kafka cluster.
    ``isolation_level``: ``"read_committed"`` (default) shows only committed transactions (what exactly-once
    apps wrote and committed); ``"read_uncommitted"`` also shows open ones. The embedded cluster has no
    transactions: both read everything.
    ``schema_registry_url`` / ``schema_registry_config``: where ``"avro"``, ``"protobuf"`` and ``"jsonschema"``
    serdes look up the records' schema ids (on ``memory://`` the embedded registry by default).
    """
    if isolation_level not in ("read_committed", "read_uncommitted"):
        raise ValueError(
            f"isolation_level must be 'read_committed' or 'read_uncommitted', got {isolation_level!r}"
        )
    cluster = connect(bootstrap_servers, client_config)
    kser, vser = _serdes(bootstrap_servers, key_serde, value_serde, schema_registry_url, schema_registry_config)
    admin = cluster.admin()
    count = admin.partition_count(topic)
    if count is None:
        raise UnknownTopicError(topic, f"topic {topic!r} does not exist on {bootstrap_servers}")
    tps = [TopicPartition(topic, p) for p in range(count)]
    now = now_ms()  # one "now" for both relative bounds
    start_ms = None if start is None else to_epoch_ms(start, "start", now)
    end_ms = None if end is None else to_epoch_ms(end, "end", now)
    begins = admin.beginning_offsets(tps)
    ends = _stable_ends(admin, tps) if isolation_level == "read_committed" else admin.end_offsets(tps)
    if start_ms is not None:
        firsts = admin.offsets_for_time(tps, start_ms)
        begins = {tp: max(begins[tp], firsts[tp]) for tp in tps}
    if end_ms is not None:
        lasts = admin.offsets_for_time(tps, end_ms)
        ends = {tp: min(ends[tp], lasts[tp]) for tp in tps}
    rows: dict[str, list[Any]] = {c: [] for c in READ_COLUMNS if c != "time"}
    consumer = cluster.consumer(None, {"auto.offset.reset": "earliest", "isolation.level": isolation_level})
    try:
        for tp in tps:
            if from_beginning:  # max_records caps the whole read
                first, limit = begins[tp], None if max_records is None else max_records - len(rows["offset"])
                if limit is not None and limit <= 0:
                    break
            elif max_records is not None:  # the last max_records of each partition
                first, limit = max(begins[tp], ends[tp] - max_records), max_records
            else:
                continue
            _read_partition(cluster, consumer, tp, first, ends[tp], limit, kser, vser, rows)
    finally:
        consumer.close()
    columns: dict[str, Any] = {
        col: np.asarray(rows[col], dtype=np.int64)
        if col in ("partition", "offset", "timestamp")
        else pd.Series(rows[col], dtype=object)
        for col in READ_COLUMNS
        if col != "time"
    }
    # millisecond resolution: any Kafka timestamp fits (nanoseconds end in 2262)
    columns["time"] = pd.Series(columns["timestamp"].astype("datetime64[ms]")).dt.tz_localize("UTC")
    return pd.DataFrame(columns, columns=READ_COLUMNS)


#: how long ``read_topic`` waits for transactions still open to end (a commit's markers come just after it)
_OPEN_TRANSACTION_WAIT_S = 2.0


def _stable_ends(admin: Any, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
    """Where read_committed stops in each partition (before any transaction still open), once the
    transactions open when asked ended or after ``_OPEN_TRANSACTION_WAIT_S``: a read right after a commit
    includes it, and a transaction left open does not hold the read up."""
    deadline = time.monotonic() + _OPEN_TRANSACTION_WAIT_S
    while True:
        stable = admin.committed_end_offsets(tps)
        if stable == admin.end_offsets(tps) or time.monotonic() > deadline:
            return dict(stable)
        time.sleep(0.05)


def _read_partition(
    cluster: Cluster,
    consumer: Any,
    tp: TopicPartition,
    start: int,
    end: int,
    limit: int | None,
    kser: Serde,
    vser: Serde,
    rows: dict[str, list[Any]],
) -> None:
    for rec in read_range(consumer, tp, start, end, limit):
        key = _deserialize(kser, rec, "key", rec.key)
        value = _deserialize(vser, rec, "value", rec.value)
        rows["partition"].append(rec.partition)
        rows["offset"].append(rec.offset)
        rows["timestamp"].append(rec.timestamp)
        rows["key"].append(key)
        rows["value"].append(value)
        rows["headers"].append(rec.headers)


def read_range(
    consumer: Any, tp: TopicPartition, start: int, end: int, limit: int | None = None
) -> Iterator[ConsumerRecord]:
    """The records of ``tp`` from offset ``start`` to before ``end`` (at most ``limit``), serialized, as they are
    fetched; raises naming the partition and offset when none comes for ``_STALL_S`` seconds before ``end``:
    a partial partition is never returned as the whole (a remote broker may take a moment to answer)."""
    if start >= end:
        return
    consumer.assign([tp])
    consumer.seek(tp, start)
    taken = 0
    progress_at = time.monotonic()
    while consumer.position(tp) < end and (limit is None or taken < limit):
        before = consumer.position(tp)
        batches = consumer.poll(0.2, min(10_000, end - before, 10_000 if limit is None else limit - taken))
        if not batches and consumer.position(tp) == before:
            if time.monotonic() - progress_at > _STALL_S:
                raise StreamsError(
                    f"reading topic {tp.topic!r} partition {tp.partition}: no record for {_STALL_S:g}s at "
                    f"offset {before}, before its end offset {end}"
                )
            continue
        progress_at = time.monotonic()
        for batch in batches:
            for rec in batch.records:
                if rec.partition != tp.partition or not start <= rec.offset < end:
                    continue
                if limit is not None and taken >= limit:
                    return
                yield rec
                taken += 1


def _deserialize(serde: Serde, rec: ConsumerRecord, what: str, data: bytes | None) -> Any:
    """``data`` (the record's key or value) through ``serde``; a failure names the record's place."""
    try:
        return serde.deserialize(rec.topic, data)
    except SerializationError as exc:
        raise DeserializationError(
            f"cannot deserialize the {what}: {exc}", topic=rec.topic, partition=rec.partition, offset=rec.offset
        ) from exc
