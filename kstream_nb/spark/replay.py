"""What runs inside Spark's Python workers: one task of one sub-topology over its records, as live.

``run_task`` gets every record of one partition number of the sub-topology's source topics (a pandas
frame, the group of a ``groupBy("partition").applyInPandas``), orders them as the live runtime would see
them, runs a fresh ``StreamTask`` and returns what the task wrote (sink and repartition records with the
partition the sink chose), the final store contents and the task's counters, as rows of ``OUT_COLUMNS``.
It needs pandas, the runtime and pyspark's bundled cloudpickle.
"""

from __future__ import annotations

import heapq
import itertools
import shutil
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import orjson
import pandas as pd

from kstream_nb.cluster.partitioner import default_partition
from kstream_nb.cluster.records import FetchedBatch, Headers
from kstream_nb.cluster.serdes import Serde
from kstream_nb.runtime.config import StreamsConfig
from kstream_nb.runtime.global_state import GlobalStores
from kstream_nb.runtime.record_collector import RecordByRecordCollector
from kstream_nb.runtime.task import StreamTask, stream_thread_cache
from kstream_nb.runtime.task_id import TaskId
from kstream_nb.state.builders import WindowStoreBuilder
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

    def send(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        timestamp: int,
        headers: Headers,
        partition: int | None,
    ) -> None:
        if topic in self.plan.changelogs:
            return
        if partition is None:
            count = self.partition_count(topic)
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
    """
    n = len(writers)
    if n == 0:
        return np.arange(0)
    by_writer = np.lexsort((seqs, writers))
    w, t = writers[by_writer], ts[by_writer]
    if (w == w[0]).all():
        return by_writer
    same = w[1:] == w[:-1]
    if not (t[1:][same] < t[:-1][same]).any():  # each writer's timestamps are non-decreasing
        return np.lexsort((seqs, writers, ts))
    runs: list[list[tuple[int, int, int]]] = []
    start = 0
    for i in range(1, n + 1):
        if i == n or w[i] != w[i - 1]:
            runs.append([(int(t[j]), int(w[j]), int(by_writer[j])) for j in range(start, i)])
            start = i
    return np.fromiter((row for _, _, row in heapq.merge(*runs, key=lambda r: (r[0], r[1]))), np.int64, n)


def _headers(value: Any) -> Headers:
    if value is None or len(value) == 0:
        return ()
    return tuple((h["key"], None if h["value"] is None else bytes(h["value"])) for h in value)


def _bytes_list(values: Iterable[Any]) -> list[bytes | None]:
    return [v if v is None or type(v) is bytes else bytes(v) for v in values]


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


def run_task(plan: StagePlan, frame: pd.DataFrame) -> pd.DataFrame:
    """Runs the task of ``frame``'s partition number over its records; rows of ``OUT_COLUMNS``."""
    partition = int(frame["partition"].iloc[0])
    topology, config = plan.topology, plan.config
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
        # queues in this order break timestamp ties: user topics first, then those this backtest wrote (a
        # record there exists live only once its cause, e.g. the left row of a foreign-key join, ran)
        by_topic = sorted(
            ((str(topic), rows) for topic, rows in frame.groupby("topic", sort=True)),
            key=lambda item: (bool((item[1]["writer"] >= 0).any()), item[0]),
        )
        for topic, rows in by_topic:
            writers = rows["writer"].to_numpy(dtype=np.int64)
            seqs = rows["seq"].to_numpy(dtype=np.int64)
            ts = rows["ts"].to_numpy(dtype=np.int64)
            if (writers < 0).all():  # a user topic: offset order
                order = np.argsort(rows["offset"].to_numpy(dtype=np.int64), kind="stable")
                offsets = rows["offset"].to_numpy(dtype=np.int64)[order].tolist()
            else:  # written by upstream tasks of this backtest: the merged order, offsets from 0
                order = merge_order(writers, seqs, ts)
                offsets = list(range(len(order)))
            if not len(order):
                continue
            keys = _bytes_list(rows["key"].to_numpy(dtype=object)[order])
            values = _bytes_list(rows["value"].to_numpy(dtype=object)[order])
            headers = [_headers(h) for h in rows["headers"].to_numpy(dtype=object)[order]]
            raw = (offsets, keys, values, ts[order].tolist(), headers)
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
        out: list[tuple[Any, ...]] = []
        for topic, part, seq, timestamp, key, value, headers in collector.rows:
            serdes = plan.sink_serdes.get(topic)
            key_text = value_text = None
            if serdes is not None:
                key_text = to_text(None if key is None else serdes[0].deserialize(topic, key))
                value_text = to_text(None if value is None else serdes[1].deserialize(topic, value))
            hdrs = [{"key": k, "value": v} for k, v in headers] if headers else []
            out.append(
                ("out", topic, part, partition, seq, timestamp, key, value, hdrs, key_text, value_text, None, None)
            )
        out.extend(_store_rows(task, topology, partition))
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
    return pd.DataFrame(out, columns=OUT_COLUMNS)


def _config_settings(config: StreamsConfig) -> dict[str, Any]:
    from dataclasses import fields

    return {f.name: getattr(config, f.name) for f in fields(config)}


def order_output_partition(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows of one output partition (kind "out") in offset order, with offsets from 0."""
    order = merge_order(
        frame["task"].to_numpy(dtype=np.int64),
        frame["seq"].to_numpy(dtype=np.int64),
        frame["ts"].to_numpy(dtype=np.int64),
    )
    ordered = frame.iloc[order].reset_index(drop=True)
    return pd.DataFrame(
        {
            "partition": ordered["partition"].astype(np.int32),
            "offset": np.arange(len(ordered), dtype=np.int64),
            "timestamp": pd.to_datetime(ordered["ts"].to_numpy(dtype=np.int64), unit="ms", utc=True),
            "key": ordered["key_text"],
            "value": ordered["value_text"],
            "headers": ordered["headers"],
            "task": ordered["task"].astype(np.int32),
            "key_bytes": ordered["key"],
            "value_bytes": ordered["value"],
        }
    )
