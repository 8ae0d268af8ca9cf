"""``export_topic``: a topic's records, as stored (raw key/value bytes), to a Parquet archive.

An archive is a directory: ``_topic.json`` (topic name, partition count, the exported offset range of each
partition) and one ``partition-NNNNN.parquet`` file per partition with the columns topic, partition,
offset, timestamp (UTC, microseconds), key, value (binary, exactly the bytes in the log) and headers.
Spark's ``kstream`` data source reads archives; so does ``read_archive``. Needs ``pyarrow``
(``pip install 'kstream_nb[spark]'``).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from kstream_nb.cluster.base import Cluster
from kstream_nb.cluster.connection import connect
from kstream_nb.cluster.records import TopicPartition
from kstream_nb.errors import StreamsError, UnknownTopicError

ARCHIVE_FORMAT = "kstream_nb.topic-archive"
META_FILE = "_topic.json"
COLUMNS = ("topic", "partition", "offset", "timestamp", "key", "value", "headers")
_STALL_S = 10.0
_CHUNK = 50_000


def _pa() -> Any:
    try:
        import pyarrow as pa
    except ImportError as e:  # pragma: no cover - depends on the install
        raise StreamsError("topic archives need pyarrow: pip install 'kstream_nb[spark]'") from e
    return pa


def arrow_schema() -> Any:
    """The Arrow schema of topic records (the same as Spark's ``kstream`` source yields)."""
    pa = _pa()
    header = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
    return pa.schema(
        [
            pa.field("topic", pa.string()),
            pa.field("partition", pa.int32()),
            pa.field("offset", pa.int64()),
            pa.field("timestamp", pa.timestamp("us", tz="UTC")),
            pa.field("key", pa.binary()),
            pa.field("value", pa.binary()),
            pa.field("headers", pa.list_(header)),
        ]
    )


def records_to_arrow(
    topic: str,
    partition: int,
    offsets: list[int],
    timestamps: list[int],
    keys: list[bytes | None],
    values: list[bytes | None],
    headers: list[Any],
    schema: Any = None,
) -> Any:
    """One ``pyarrow.RecordBatch`` of raw records (timestamps in ms are stored as µs UTC)."""
    pa = _pa()
    import numpy as np

    schema = schema if schema is not None else arrow_schema()
    n = len(offsets)
    us = np.asarray(timestamps, dtype=np.int64) * 1000
    return pa.RecordBatch.from_arrays(
        [
            pa.array([topic] * n, schema.field("topic").type),
            pa.array(np.full(n, partition, dtype=np.int32), schema.field("partition").type),
            pa.array(np.asarray(offsets, dtype=np.int64), schema.field("offset").type),
            pa.array(us, pa.int64()).cast(schema.field("timestamp").type),
            pa.array(keys, schema.field("key").type),
            pa.array(values, schema.field("value").type),
            pa.array(
                [[{"key": k, "value": v} for k, v in h] if h else [] for h in headers],
                schema.field("headers").type,
            ),
        ],
        schema=schema,
    )


def read_partition_raw(
    cluster: Cluster, tp: TopicPartition, start: int, end: int, chunk: int = _CHUNK
) -> Iterator[tuple[list[int], list[int], list[bytes | None], list[bytes | None], list[Any]]]:
    """Raw records of ``tp`` in [start, end) as column lists (offsets, timestamps, keys, values, headers)."""
    if start >= end:
        return
    consumer = cluster.consumer(None, {"auto.offset.reset": "earliest"})
    try:
        consumer.assign([tp])
        consumer.seek(tp, start)
        cols: tuple[list[Any], ...] = ([], [], [], [], [])
        progress_at = time.monotonic()
        while consumer.position(tp) < end:
            before = consumer.position(tp)
            batches = consumer.poll(0.2, 10_000)
            if not batches and consumer.position(tp) == before:
                if time.monotonic() - progress_at > _STALL_S:
                    raise StreamsError(
                        f"reading {tp} stalled at offset {before} before its end offset {end} "
                        f"(nothing for {_STALL_S:.0f}s)"
                    )
                continue
            progress_at = time.monotonic()
            for batch in batches:
                for r in batch.records:
                    if r.offset >= end:
                        break
                    cols[0].append(r.offset)
                    cols[1].append(r.timestamp)
                    cols[2].append(r.key)
                    cols[3].append(r.value)
                    cols[4].append(r.headers)
            if len(cols[0]) >= chunk:
                yield cols  # type: ignore[misc]
                cols = ([], [], [], [], [])
        if cols[0]:
            yield cols  # type: ignore[misc]
    finally:
        consumer.close()


def export_topic(
    topic: str,
    path: str | os.PathLike[str],
    bootstrap_servers: str = "memory://",
    start_offsets: Mapping[int, int] | None = None,
    end_offsets: Mapping[int, int] | None = None,
    client_config: Mapping[str, Any] | None = None,
    overwrite: bool = True,
) -> Path:
    """Writes ``topic``'s records (raw bytes, offsets, timestamps, headers) to a Parquet archive at ``path``.

    ``start_offsets``/``end_offsets`` (partition -> offset) bound each partition (default: all of it, up
    to its end offset now). Returns the archive directory; read it with Spark's ``kstream`` source
    (``option("path", ...)``) or ``read_archive``.
    """
    _pa()
    import pyarrow.parquet as pq

    cluster = connect(bootstrap_servers, client_config)
    admin = cluster.admin()
    count = admin.partition_count(topic)
    if count is None:
        raise UnknownTopicError(topic, f"topic {topic!r} does not exist on {bootstrap_servers}")
    out = Path(path)
    if out.exists() and any(out.iterdir()):
        if not (out / META_FILE).exists():
            raise StreamsError(f"cannot export {topic!r} to {out}: the directory is not empty and not an archive")
        if not overwrite:
            raise StreamsError(f"cannot export {topic!r} to {out}: an archive is already there")
        for old in out.glob("partition-*.parquet"):
            old.unlink()
    out.mkdir(parents=True, exist_ok=True)
    tps = [TopicPartition(topic, p) for p in range(count)]
    begins, ends = admin.beginning_offsets(tps), admin.end_offsets(tps)
    schema = arrow_schema()
    ranges: dict[str, list[int]] = {}
    total = 0
    for tp in tps:
        start = max(begins[tp], (start_offsets or {}).get(tp.partition, begins[tp]))
        end = min(ends[tp], (end_offsets or {}).get(tp.partition, ends[tp]))
        ranges[str(tp.partition)] = [start, max(start, end)]
        with pq.ParquetWriter(out / f"partition-{tp.partition:05d}.parquet", schema) as writer:
            for offsets, timestamps, keys, values, headers in read_partition_raw(cluster, tp, start, end):
                batch = records_to_arrow(topic, tp.partition, offsets, timestamps, keys, values, headers, schema)
                writer.write_batch(batch)
                total += len(offsets)
    meta = {
        "format": ARCHIVE_FORMAT,
        "version": 1,
        "topic": topic,
        "partitions": count,
        "offsets": ranges,
        "records": total,
        "source": bootstrap_servers,
        "exported_at_ms": int(time.time() * 1000),
    }
    (out / META_FILE).write_text(json.dumps(meta, indent=1))
    return out


def archive_info(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The metadata of an archive (topic, partitions, offsets); raises naming the path if it is not one."""
    meta_path = Path(path) / META_FILE
    try:
        meta = json.loads(meta_path.read_text())
    except FileNotFoundError:
        raise StreamsError(
            f"{path} is not a topic archive (no {META_FILE}); write one with export_topic"
        ) from None
    if meta.get("format") != ARCHIVE_FORMAT:
        raise StreamsError(f"{meta_path} is not a kstream_nb topic archive")
    return dict(meta)


def archive_partition_file(path: str | os.PathLike[str], partition: int) -> Path:
    return Path(path) / f"partition-{partition:05d}.parquet"


def read_archive(path: str | os.PathLike[str]) -> Any:
    """An archive as a pandas DataFrame (raw bytes; timestamps as UTC datetimes), partition by partition."""
    pa = _pa()
    import pyarrow.parquet as pq

    meta = archive_info(path)
    tables = [pq.read_table(archive_partition_file(path, p)) for p in range(int(meta["partitions"]))]
    return pa.concat_tables(tables).to_pandas() if tables else arrow_schema().empty_table().to_pandas()
