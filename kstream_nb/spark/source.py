"""Spark's ``kstream`` data source: topic history as a DataFrame, one Spark partition per topic partition.

    spark.read.format("kstream").option("topic", "orders").option("bootstrap_servers", "host:9092").load()
    spark.read.format("kstream").option("topic", "orders").option("path", "/data/orders-archive").load()
    ks.spark.read_topic(spark, "orders", bootstrap_servers="memory://")      # any of the three

Columns: topic, partition, offset, timestamp (UTC), key, value (binary, the bytes in the log), headers
(array of key/value structs). Options:

``topic``
    the topic (several: comma-separated).
``bootstrap_servers``
    a Kafka cluster (``host:port[,...]``): each Spark task reads its partition with confluent-kafka.
``path``
    a Parquet archive written by ``export_topic`` (for several topics: a directory with one archive per
    topic, named after it).
``starting_offsets`` / ``ending_offsets``
    ``earliest``/``latest`` (the defaults) or JSON ``{"0": 10, "1": 12}`` (partition -> offset; the end
    is exclusive). Offsets are fixed when the query is planned, so a read is bounded and repeatable.
``start_timestamp`` / ``end_timestamp``
    keep records with ``start <= timestamp < end`` (epoch ms, or an ISO date-time; UTC if no zone).
    On Kafka a partition is read from the first offset whose timestamp is >= start (the broker's time
    index: every record before it is older); each record's timestamp is checked while reading, since
    timestamps need not grow with offsets (a record past the end time may be followed by older ones).
``client_config``
    JSON of extra Kafka client settings (``security.protocol``, ``sasl.*``, ...).

The embedded cluster (``memory://``) lives inside the notebook's Python process; Spark plans and reads in
separate Python worker processes, which cannot see it. ``read_topic``/``backtest`` therefore snapshot a
``memory://`` topic into a temporary Parquet archive in the driver (``export_topic``) and hand Spark the
archive; ``format("kstream")`` with a ``memory://`` server raises an error that says so.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from kstream_nb import time_bounds
from kstream_nb.errors import StreamsError

SHORT_NAME = "kstream"

TOPIC_SCHEMA = StructType(
    [
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField(
            "headers",
            ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())])),
        ),
    ]
)


@dataclass(frozen=True)
class TopicInputPartition(InputPartition):
    """One topic partition and its offset range [start, end) to read."""

    topic: str
    partition: int
    start: int
    end: int
    archive: str | None
    bootstrap_servers: str | None
    start_ms: int | None
    end_ms: int | None
    client_config: tuple[tuple[str, Any], ...] = ()


def to_epoch_ms(value: Any, what: str) -> int | None:
    """Epoch ms of a time bound as ``kstream_nb.time_bounds`` reads it (None and "" stay None)."""
    if value is None or value == "":
        return None
    try:
        return time_bounds.to_epoch_ms(value, what)
    except ValueError as e:
        raise StreamsError(str(e)) from e


def _offsets_option(options: Mapping[str, str], name: str) -> dict[int, int] | str:
    raw = options.get(name)
    if raw is None or raw in ("earliest", "latest"):
        return raw or ("earliest" if name == "starting_offsets" else "latest")
    try:
        parsed = json.loads(raw)
        return {int(p): int(o) for p, o in parsed.items()}
    except (ValueError, AttributeError) as e:
        raise StreamsError(
            f"option {name} must be 'earliest', 'latest' or JSON like {{\"0\": 10}}, got {raw!r}"
        ) from e


def plan_partitions(options: Mapping[str, str]) -> list[TopicInputPartition]:
    """The input partitions a read of ``options`` covers (offset ranges fixed now)."""
    topics = [t.strip() for t in (options.get("topic") or "").split(",") if t.strip()]
    if not topics:
        raise StreamsError("the kstream data source needs option('topic', NAME)")
    servers = options.get("bootstrap_servers")
    path = options.get("path")
    start_ms = to_epoch_ms(options.get("start_timestamp"), "start_timestamp")
    end_ms = to_epoch_ms(options.get("end_timestamp"), "end_timestamp")
    starting = _offsets_option(options, "starting_offsets")
    ending = _offsets_option(options, "ending_offsets")
    client_config = tuple(sorted(json.loads(options.get("client_config") or "{}").items()))
    result: list[TopicInputPartition] = []
    for topic in topics:
        if path:
            from kstream_nb.cluster.export import archive_info

            archive = path if len(topics) == 1 else os.path.join(path, topic)
            meta = archive_info(archive)
            if meta["topic"] != topic:
                raise StreamsError(f"the archive at {archive} holds topic {meta['topic']!r}, not {topic!r}")
            ranges = {int(p): (int(b), int(e)) for p, (b, e) in meta["offsets"].items()}
            count = int(meta["partitions"])
            source_archive: str | None = archive
        elif servers:
            if servers.startswith("memory://"):
                raise StreamsError(
                    f"cannot read {topic!r} from {servers} in Spark: the embedded cluster lives in the "
                    "notebook's process and Spark's Python workers cannot see it. Use "
                    "kstream_nb.spark.read_topic(spark, ...) (it snapshots the topic to Parquet first), "
                    "or ks.export_topic(topic, path) and option('path', path)"
                )
            from kstream_nb.cluster.connection import connect
            from kstream_nb.cluster.records import TopicPartition

            admin = connect(servers, dict(client_config)).admin()
            n = admin.partition_count(topic)
            if n is None:
                raise StreamsError(f"topic {topic!r} does not exist on {servers}")
            tps = [TopicPartition(topic, p) for p in range(n)]
            begins, ends = admin.beginning_offsets(tps), admin.end_offsets(tps)
            if start_ms is not None:
                newer = admin.offsets_for_time(tps, start_ms)
                begins = {tp: max(begins[tp], newer[tp]) for tp in tps}
            ranges = {tp.partition: (begins[tp], ends[tp]) for tp in tps}
            count = n
            source_archive = None
        else:
            raise StreamsError(f"reading {topic!r}: give option('bootstrap_servers', ...) or option('path', ...)")
        for p in range(count):
            begin, end = ranges.get(p, (0, 0))
            start = begin if not isinstance(starting, dict) else max(begin, starting.get(p, begin))
            if starting == "latest":
                start = end
            stop = end if not isinstance(ending, dict) else min(end, ending.get(p, end))
            result.append(
                TopicInputPartition(
                    topic, p, start, max(start, stop), source_archive, servers if not path else None,
                    start_ms, end_ms, client_config,
                )
            )  # fmt: skip
    return result


def read_partition(part: TopicInputPartition, batch_size: int = 50_000) -> Iterator[Any]:
    """``pyarrow.RecordBatch``es of one input partition (offset order, bounded by offsets and timestamps)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from kstream_nb.cluster.export import arrow_schema, records_to_arrow

    schema = arrow_schema()
    if part.start >= part.end:
        return

    def bounded(batch: Any) -> Any:
        # timestamp bounds filter every record of the offset range (timestamps need not grow with offsets)
        mask = pc.and_(pc.greater_equal(batch["offset"], part.start), pc.less(batch["offset"], part.end))
        ts_ms = pc.divide(batch["timestamp"].cast(pa.int64()), 1000)
        if part.start_ms is not None:
            mask = pc.and_(mask, pc.greater_equal(ts_ms, part.start_ms))
        if part.end_ms is not None:
            mask = pc.and_(mask, pc.less(ts_ms, part.end_ms))
        return batch.filter(mask)

    if part.archive is not None:
        import pyarrow.parquet as pq

        from kstream_nb.cluster.export import archive_partition_file

        with pq.ParquetFile(archive_partition_file(part.archive, part.partition)) as file:
            for batch in file.iter_batches(batch_size=batch_size):
                out = bounded(pa.RecordBatch.from_arrays(batch.columns, schema=schema))
                if out.num_rows:
                    yield out
        return
    from kstream_nb.cluster.connection import connect
    from kstream_nb.cluster.export import read_partition_raw
    from kstream_nb.cluster.records import TopicPartition

    assert part.bootstrap_servers is not None
    cluster = connect(part.bootstrap_servers, dict(part.client_config))
    tp = TopicPartition(part.topic, part.partition)
    for offsets, timestamps, keys, values, headers in read_partition_raw(cluster, tp, part.start, part.end):
        out = bounded(
            records_to_arrow(part.topic, part.partition, offsets, timestamps, keys, values, headers, schema)
        )
        if out.num_rows:
            yield out


class KStreamReader(DataSourceReader):
    def __init__(self, options: Mapping[str, str]) -> None:
        self.options = dict(options)

    def partitions(self) -> list[TopicInputPartition]:
        return plan_partitions(self.options)

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, TopicInputPartition)
        yield from read_partition(partition)


class KStreamDataSource(DataSource):
    """``spark.read.format("kstream")``: topic history from Kafka or a Parquet archive (see the module doc)."""

    @classmethod
    def name(cls) -> str:
        return SHORT_NAME

    def schema(self) -> StructType:
        return TOPIC_SCHEMA

    def reader(self, schema: StructType) -> KStreamReader:
        return KStreamReader(self.options)


def _snapshot(topic: str, bootstrap_servers: str, snapshot_dir: str | None) -> str:
    """A Parquet archive of a ``memory://`` topic (Spark's workers cannot see the embedded cluster)."""
    from kstream_nb.cluster.export import export_topic

    base = snapshot_dir or tempfile.mkdtemp(prefix="kstream-nb-snapshot-")
    return str(export_topic(topic, os.path.join(base, topic), bootstrap_servers=bootstrap_servers))


def read_topic(
    spark: Any,
    topic: str,
    bootstrap_servers: str = "memory://",
    starting_offsets: Mapping[int, int] | str | None = None,
    ending_offsets: Mapping[int, int] | str | None = None,
    start: Any = None,
    end: Any = None,
    path: str | None = None,
    client_config: Mapping[str, Any] | None = None,
    snapshot_dir: str | None = None,
) -> Any:
    """A Spark DataFrame of ``topic``'s records (see the module doc); ``memory://`` topics are snapshotted.

    ``start``/``end``: timestamp bounds (epoch ms or ISO date-time), ``start <= timestamp < end``.
    ``path``: read this Parquet archive instead of a cluster.
    """
    from kstream_nb.spark.session import register_data_source

    register_data_source(spark)
    reader = spark.read.format(SHORT_NAME).option("topic", topic)
    if path is None and bootstrap_servers.startswith("memory://"):
        path = _snapshot(topic, bootstrap_servers, snapshot_dir)
    if path is not None:
        reader = reader.option("path", path)
    else:
        reader = reader.option("bootstrap_servers", bootstrap_servers)
        if client_config:
            reader = reader.option("client_config", json.dumps(dict(client_config)))
    for name, offsets in (("starting_offsets", starting_offsets), ("ending_offsets", ending_offsets)):
        if offsets is not None:
            reader = reader.option(name, offsets if isinstance(offsets, str) else json.dumps(dict(offsets)))
    for name, bound in (("start_timestamp", start), ("end_timestamp", end)):
        ms = to_epoch_ms(bound, name)
        if ms is not None:
            reader = reader.option(name, str(ms))
    return reader.load()


def read_history(
    spark: Any,
    topic: str,
    bootstrap_servers: str = "memory://",
    start: Any = None,
    end: Any = None,
    path: str | None = None,
    client_config: Mapping[str, Any] | None = None,
    snapshot_dir: str | None = None,
) -> Any:
    """A backtest's input: ``read_topic``'s rows (``start <= timestamp < end``), with a Parquet archive (or the
    snapshot of a ``memory://`` topic) read by Spark's own Parquet reader rather than the Python data source.

    The rows are the same; Spark's partitioning is its own (a backtest groups by topic partition anyway), and
    no Python worker handles the record batches on their way in. Kafka topics go through the data source.
    """
    if path is None and not bootstrap_servers.startswith("memory://"):
        return read_topic(spark, topic, bootstrap_servers=bootstrap_servers, start=start, end=end,
                          client_config=client_config)  # fmt: skip
    from pyspark.sql import functions as F

    from kstream_nb.cluster.export import archive_info, archive_partition_file

    if path is None:
        path = _snapshot(topic, bootstrap_servers, snapshot_dir)
    meta = archive_info(path)
    if meta["topic"] != topic:
        raise StreamsError(f"the archive at {path} holds topic {meta['topic']!r}, not {topic!r}")
    files = [str(archive_partition_file(path, p)) for p in range(int(meta["partitions"]))]
    df = spark.read.schema(TOPIC_SCHEMA).parquet(*files)
    ts_ms = F.expr("unix_micros(timestamp) div 1000")
    start_ms, end_ms = to_epoch_ms(start, "start"), to_epoch_ms(end, "end")
    if start_ms is not None:
        df = df.where(ts_ms >= F.lit(start_ms))
    if end_ms is not None:
        df = df.where(ts_ms < F.lit(end_ms))
    return df
