"""What runs inside Spark's Python workers: one task of one sub-topology over its records, as live.

``run_task`` gets every record of one partition number of the sub-topology's source topics (an Arrow
table, the group of a ``groupBy("partition").applyInArrow``), orders them as the live runtime would see
them, runs a fresh ``StreamTask`` and returns what the task wrote (sink and repartition records with the
partition the sink chose), the final store contents and the task's counters, as rows of ``OUT_COLUMNS``;
``stage_function`` hands them back to Spark as one Arrow table. Columns go in and out as Arrow arrays (the
key/value bytes become Python ``bytes`` once, as the task's fetched batch), with no pandas objects per row.
It needs pyarrow, the runtime and pyspark's bundled cloudpickle.
"""

from __future__ import annotations

import itertools
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from kstream_nb.cluster.partitioner import default_partition
from kstream_nb.cluster.records import FetchedBatch, Headers
from kstream_nb.cluster.serdes import Serde
from kstream_nb.errors import StreamsError
from kstream_nb.runtime.config import StreamsConfig
from kstream_nb.runtime.global_state import GlobalStores
from kstream_nb.runtime.record_collector import RecordByRecordCollector
from kstream_nb.runtime.task import StreamTask, stream_thread_cache
from kstream_nb.runtime.task_id import TaskId
from kstream_nb.state.builders import WindowStoreBuilder
from kstream_nb.state.join_buffer import JoinBuffer
from kstream_nb.state.query import CompositeReadOnlyKeyValueStore, CompositeWindowStore
from kstream_nb.state.timestamped import PlainValueView, TimestampedKeyValueStoreBuilder
from kstream_nb.topology.topology import Topology

#: input rows: a topic record plus who wrote it (``writer`` = upstream task partition, -1 for user topics)
#: and in which order (``seq``); ``ts`` is the record timestamp in ms
IN_COLUMNS = ["topic", "partition", "offset", "ts", "key", "value", "headers", "writer", "seq"]
#: output rows: kind "out" (a record written to ``topic``/``partition``), "store" (an entry of store
#: ``topic``; ``key``/``value`` pickled objects, ``start``/``end`` for windows) or "stat" (task counters
#: as JSON in ``value_text``)
OUT_COLUMNS = [
    "kind", "topic", "partition", "task", "seq", "ts", "key", "value", "headers",
    "key_text", "value_text", "start", "end",
]  # fmt: skip
OUT_DDL = (
    "kind string, topic string, partition int, task int, seq long, ts long, key binary, value binary, "
    "headers array<struct<key:string,value:binary>>, key_text string, value_text string, start long, end long"
)


@dataclass
class StagePlan:
    """Everything a worker needs to run the tasks of one sub-topology (pickled with cloudpickle)."""

    topology: Topology
    config: StreamsConfig
    subtopology: int
    #: partition count of every topic the task may write to (resolved names)
    partition_counts: dict[str, int]
    #: changelog topics: writes to them are dropped (the stores are read directly at the end)
    changelogs: frozenset[str]
    #: resolved topic -> (key serde, value serde) of user sink topics, to decode outputs as text
    sink_serdes: dict[str, tuple[Serde, Serde]]
    #: raw records of global-store topics: topic -> list of (partition, offset, ts, key, value, headers)
    global_records: dict[str, list[tuple[int, int, int, bytes | None, bytes | None, Headers]]] = field(
        default_factory=dict
    )


def to_text(obj: Any) -> str | None:
    """A decoded key/value as JSON text (what the Spark DataFrames show); None stays None."""
    if obj is None:
        return None
    try:
        return orjson.dumps(
            obj, default=_jsonable, option=orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY
        ).decode()
    except TypeError:
        return str(obj)


def _jsonable(obj: Any) -> Any:
    if hasattr(obj, "__dataclass_fields__"):
        return {name: getattr(obj, name) for name in obj.__dataclass_fields__}
    if isinstance(obj, bytes | bytearray):
        return obj.hex()
    if isinstance(obj, set | frozenset | tuple):
        return list(obj)
    return str(obj)


class CaptureCollector(RecordByRecordCollector):
    """A task's record collector that keeps what it sends, choosing partitions as the live producer does."""

    copies_on_send = False

    def __init__(self, plan: StagePlan, task: int) -> None:
        self.plan = plan
        self.task = task
        self.rows: list[tuple[Any, ...]] = []
        self._seq = itertools.count()
        self._round_robin: dict[str, Any] = {}
        self._changelogs = plan.changelogs
        self._counts = plan.partition_counts

    def send(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        timestamp: int,
        headers: Headers,
        partition: int | None,
    ) -> None:
        if topic in self._changelogs:
            return
        if partition is None:
            count = self._counts.get(topic, 1)
            if key is not None:
                partition = default_partition(key, count)
            else:
                counter = self._round_robin.setdefault(topic, itertools.count())
                partition = next(counter) % count
        self.rows.append((topic, partition, next(self._seq), timestamp, key, value, headers))

    def partition_count(self, topic: str) -> int:
        return self.plan.partition_counts.get(topic, 1)


def merge_order(writers: np.ndarray, seqs: np.ndarray, ts: np.ndarray) -> np.ndarray:
    """Row order of records several tasks wrote to one partition: each task's own order kept, the
    tasks' streams merged lowest timestamp first (ties: lower task first).

    This is the order the partition gets live when its writers advance together in event time; live,
    thread scheduling decides the interleaving, so it may differ there (each writer's order never does).
    Merging the writers' streams by head timestamp is sorting by (the running maximum of the writer's
    timestamps up to the record, writer, sequence): a record older than one its writer sent before leaves
    right after it. ``runner._ordered_output`` sorts the outputs by the same key in Spark.
    """
    n = len(writers)
    if n == 0:
        return np.arange(0)
    by_writer = np.lexsort((seqs, writers))
    w, t = writers[by_writer], ts[by_writer]
    if (w == w[0]).all():
        return by_writer
    # the running max per writer: one cumulative max over the writers' runs lifted apart
    run = np.concatenate(([0], np.cumsum(w[1:] != w[:-1])))
    span = int(t.max()) - int(t.min()) + 1
    lifted = (t - t.min()) + run * span
    running = np.maximum.accumulate(lifted) - run * span + t.min()
    return by_writer[np.lexsort((np.arange(n), w, running))]


def _headers(column: pa.ChunkedArray) -> list[Headers]:
    """Each record's headers as (key, value) tuples; one shared empty tuple when no record has any."""
    n = len(column)
    if n == 0 or not pc.sum(pc.list_value_length(column)).as_py():
        return [()] * n
    return [() if not hs else tuple((h["key"], h["value"]) for h in hs) for hs in column.to_pylist()]


def _global_stores(plan: StagePlan) -> GlobalStores:
    stores = GlobalStores(plan.topology, plan.config)
    for topic, records in plan.global_records.items():
        records = sorted(records, key=lambda r: (r[2], r[0], r[1]))
        for part, offset, ts, key, value, headers in records:
            from kstream_nb.cluster.records import ConsumerRecord

            stores.apply(
                FetchedBatch(topic, part, offset, [ConsumerRecord(topic, part, offset, ts, key, value, headers)])
            )
    return stores


def _store_rows(task: StreamTask, topology: Topology, partition: int) -> list[tuple[Any, ...]]:
    from pyspark import cloudpickle

    rows: list[tuple[Any, ...]] = []
    for name, registered in task.stores.items():
        builder = topology.store_builders.get(name)
        store = registered.store
        if isinstance(store, JoinBuffer):
            continue  # a left/outer join's records waiting for their window to close: not a store to read
        if isinstance(builder, WindowStoreBuilder):
            for key, start, end, value in CompositeWindowStore(name, lambda s=store: [s]).all():  # type: ignore[misc]
                rows.append(
                    ("store", name, partition, partition, None, None, cloudpickle.dumps(key),
                     cloudpickle.dumps(value), None, to_text(key), to_text(value), start, end)
                )  # fmt: skip
            continue
        view: Any = PlainValueView(store) if isinstance(builder, TimestampedKeyValueStoreBuilder) else store
        for key, value in CompositeReadOnlyKeyValueStore(name, lambda v=view: [v]).all():  # type: ignore[misc]
            rows.append(
                ("store", name, partition, partition, None, None, cloudpickle.dumps(key),
                 cloudpickle.dumps(value), None, to_text(key), to_text(value), None, None)
            )  # fmt: skip
    return rows


def run_task(plan: StagePlan, table: pa.Table, schema: pa.Schema) -> pa.Table:
    """Runs the task of ``table``'s partition number over its records; a table of ``OUT_COLUMNS`` as
    ``schema`` (``arrow_schema(OUT_DDL, ...)``)."""
    partition = int(table.column("partition")[0].as_py())
    topology, config = plan.topology, plan.config
    for builder in topology.store_builders.values():  # (the worker's own copy of the topology)
        if builder.logging_enabled and hasattr(builder, "with_logging_disabled"):
            builder.with_logging_disabled()  # changelog writes are dropped here: do not even hold them
    sub = next(s for s in topology.subtopologies() if s.id == plan.subtopology)
    state_dir = tempfile.mkdtemp(prefix="kstream-nb-backtest-")
    local_config = StreamsConfig.of(**{**_config_settings(config), "state_dir": state_dir})
    collector = CaptureCollector(plan, partition)
    global_stores = _global_stores(plan) if plan.global_records or topology.global_stores else None
    task = StreamTask(
        str(TaskId(sub.id, partition)), sub, partition, topology, local_config, collector, lambda: -1,
        global_stores=global_stores.stores if global_stores else None, cache=stream_thread_cache(local_config),
    )  # fmt: skip
    try:
        task.initialize()
        for topic, rows in _by_topic(table):
            writers = rows.column("writer").to_numpy()
            ts = rows.column("ts").to_numpy()
            if (writers < 0).all():  # a user topic: offset order
                offsets_in = rows.column("offset").to_numpy()
                order = np.argsort(offsets_in, kind="stable")
                offsets = offsets_in[order].tolist()
            else:  # written by upstream tasks of this backtest: the merged order, offsets from 0
                order = merge_order(writers, rows.column("seq").to_numpy(), ts)
                offsets = list(range(len(order)))
            if not len(order):
                continue
            ordered = rows.select(["key", "value", "headers"]).take(pa.array(order))
            raw = (
                offsets, ordered.column("key").to_pylist(), ordered.column("value").to_pylist(),
                ts[order].tolist(), _headers(ordered.column("headers")),
            )  # fmt: skip
            task.add(FetchedBatch(topic, partition, offsets[0], raw=raw))
        stream_punctuators = len(getattr(task, "_stream_punctuations", ()))
        if stream_punctuators:
            # as the TopologyTestDriver: stream-time punctuators are checked after every record
            while task.process(1):
                task.punctuate()
        else:
            task.process(1 << 62)
        task.punctuate()
        task.flush()
        written = _output_table(plan, collector.rows, partition, schema)
        out = _store_rows(task, topology, partition)
        stats = {
            "task": task.task_id,
            "processed": task.processed_total,
            "dropped": task.dropped_total,
            "stream_time": task.stream_time,
            "skipped_deserialization": task.skipped_deserialization,
        }
        out.append(
            ("stat", None, partition, partition, None, None, None, None, None, None, to_text(stats), None, None)
        )
    finally:
        try:
            task.close()
        finally:
            if global_stores is not None:
                global_stores.close()
            shutil.rmtree(state_dir, ignore_errors=True)
    return pa.concat_tables([written, to_arrow(out, schema)])


def _by_topic(table: pa.Table) -> list[tuple[str, pa.Table]]:
    """The task's records per source topic, in the order its queues break timestamp ties: user topics
    first, then those this backtest wrote (a record there exists live only once its cause, e.g. the left
    row of a foreign-key join, ran)."""
    topics = table.column("topic")
    parts = [(str(t), table.filter(pc.equal(topics, t))) for t in pc.unique(topics).to_pylist()]
    return sorted(parts, key=lambda item: (bool(pc.any(pc.greater_equal(item[1].column("writer"), 0)).as_py()),
                                            item[0]))  # fmt: skip


def _output_table(plan: StagePlan, sent: list[tuple[Any, ...]], partition: int, schema: pa.Schema) -> pa.Table:
    """The records the task wrote as ``OUT_COLUMNS`` (kind "out"), column by column; those of user sink
    topics also decoded and shown as JSON text."""
    n = len(sent)
    topics, parts, seqs, stamps, keys, values, headers = (list(map(itemgetter(i), sent)) for i in range(7))
    key_text: list[str | None] = [None] * n
    value_text: list[str | None] = [None] * n
    for i, topic in enumerate(topics):
        serdes = plan.sink_serdes.get(topic)
        if serdes is not None:
            key, value = keys[i], values[i]
            key_text[i] = to_text(None if key is None else serdes[0].deserialize(topic, key))
            value_text[i] = to_text(None if value is None else serdes[1].deserialize(topic, value))
    empty: list[Any] = []
    hdrs = [[{"key": k, "value": v} for k, v in h] if h else empty for h in headers]
    columns = [["out"] * n, topics, parts, [partition] * n, seqs, stamps, keys, values, hdrs, key_text, value_text]
    arrays = [pa.array(c, type=f.type) for c, f in zip(columns, schema)]
    arrays += [pa.nulls(n, type=f.type) for f in list(schema)[len(columns) :]]
    return pa.Table.from_arrays(arrays, schema=schema)


def to_arrow(rows: list[tuple[Any, ...]], schema: pa.Schema) -> pa.Table:
    """Rows (tuples in ``schema``'s column order) as one Arrow table of exactly ``schema``'s types."""
    columns: list[Any] = [list(c) for c in zip(*rows)] if rows else [[] for _ in schema.names]
    return pa.Table.from_arrays([pa.array(c, type=f.type) for c, f in zip(columns, schema)], schema=schema)


def arrow_schema(ddl: str, large_types: bool) -> pa.Schema:
    """The Arrow schema Spark expects back from an ``applyInArrow`` function returning ``ddl`` (its types
    must match exactly; ``large_types`` is the session's ``spark.sql.execution.arrow.useLargeVarTypes``)."""
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import StructType, _parse_datatype_string

    struct = _parse_datatype_string(ddl)
    assert isinstance(struct, StructType)
    return to_arrow_schema(struct, timezone="UTC", prefers_large_types=large_types)


def _config_settings(config: StreamsConfig) -> dict[str, Any]:
    from dataclasses import fields

    return {f.name: getattr(config, f.name) for f in fields(config)}


def stage_function(plan: StagePlan, schema: pa.Schema) -> Callable[[pa.Table], pa.Table]:
    """The ``applyInArrow`` function of one stage: the plan pickled once (cloudpickle), loaded once per
    Python worker, then ``run_task`` per group; ``schema`` is ``arrow_schema(OUT_DDL, ...)``."""
    from pyspark import cloudpickle

    try:
        payload = cloudpickle.dumps(plan)
    except Exception as e:
        raise StreamsError(
            f"cannot backtest: the topology cannot be pickled for Spark's workers ({type(e).__name__}: {e}); "
            "functions must be picklable with cloudpickle (lambdas and module functions are; open files, "
            "locks and connections captured by a function are not)"
        ) from e
    key = hash(payload)

    def run(table: pa.Table) -> pa.Table:
        from kstream_nb.spark import replay

        cache = replay.__dict__.setdefault("_PLANS", {})
        stage = cache.get(key)
        if stage is None:
            cache.clear()
            stage = cache[key] = cloudpickle.loads(payload)
        return run_task(stage, table, schema)

    return run
