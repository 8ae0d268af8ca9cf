"""What ``backtest`` returns: output topics and final stores as Spark DataFrames, each with ``to_pandas()``."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from kstream_nb.cluster.serdes import Serde
from kstream_nb.state.store import KeyValue, sort_entries


class BacktestOutput:
    """The records the topology wrote to one output topic, per partition in offset order.

    ``.df`` is a Spark DataFrame: partition, offset, timestamp, key, value (decoded with the sink's serde,
    as JSON text), headers, task (the task that wrote it), key_bytes/value_bytes (the bytes written).
    Spark DataFrame methods work on the output directly (``out.groupBy(...)``). ``to_pandas()`` gives
    the frame ``ks.read_topic`` gives for a topic: partition, offset, timestamp (ms), key, value
    (Python objects, decoded with the sink's serdes), headers.
    """

    def __init__(self, topic: str, df: Any, serdes: tuple[Serde, Serde], partitions: int) -> None:
        self.topic = topic
        self.df = df
        self.key_serde, self.value_serde = serdes
        self.partitions = partitions

    def to_pandas(self) -> pd.DataFrame:
        raw = self.df.select("partition", "offset", "timestamp", "key_bytes", "value_bytes", "headers").toPandas()
        raw = raw.sort_values(["partition", "offset"], kind="stable").reset_index(drop=True)
        topic = self.topic
        ts = raw["timestamp"]
        if len(raw):
            ms = (pd.to_datetime(ts, utc=True) - pd.Timestamp(0, tz="UTC")) // pd.Timedelta(milliseconds=1)
        else:
            ms = pd.Series([], dtype=np.int64)
        return pd.DataFrame(
            {
                "partition": raw["partition"].to_numpy(dtype=np.int64),
                "offset": raw["offset"].to_numpy(dtype=np.int64),
                "timestamp": np.asarray(ms, dtype=np.int64),
                "key": pd.Series(
                    [None if k is None else self.key_serde.deserialize(topic, bytes(k)) for k in raw["key_bytes"]],
                    dtype=object,
                ),
                "value": pd.Series(
                    [
                        None if v is None else self.value_serde.deserialize(topic, bytes(v))
                        for v in raw["value_bytes"]
                    ],
                    dtype=object,
                ),
                "headers": pd.Series(
                    [tuple((h["key"], h["value"]) for h in hs) if hs is not None else () for hs in raw["headers"]],
                    dtype=object,
                ),
            },
            columns=["partition", "offset", "timestamp", "key", "value", "headers"],
        )

    def count(self) -> int:
        return int(self.df.count())

    def __getattr__(self, name: str) -> Any:
        if name == "df":
            raise AttributeError(name)
        return getattr(self.df, name)

    def __repr__(self) -> str:
        return f"<backtest output {self.topic!r} ({self.partitions} partitions)>"


class BacktestStore:
    """A store's final contents over all tasks: ``.df`` (Spark: task, key, value as JSON text, and
    start/end for window stores) and ``to_pandas()`` with the objects, as ``app.store(name).to_pandas()``."""

    def __init__(self, name: str, spark: Any, df: Any, windowed: bool) -> None:
        self.name = name
        self.windowed = windowed
        columns = ["task", "key_text", "value_text", *(["start", "end"] if windowed else []), "key", "value"]
        if df is None:
            ddl = "task int, key string, value string" + (", start long, end long" if windowed else "")
            ddl += ", key_pickle binary, value_pickle binary"
            self.df = spark.createDataFrame([], ddl)
        else:
            self.df = (
                df.select(*columns)
                .withColumnRenamed("key", "key_pickle")
                .withColumnRenamed("value", "value_pickle")
                .withColumnRenamed("key_text", "key")
                .withColumnRenamed("value_text", "value")
            )

    def to_pandas(self) -> pd.DataFrame:
        from pyspark import cloudpickle

        cols = ["key_pickle", "value_pickle", *(["start", "end"] if self.windowed else [])]
        rows = self.df.select(*cols).toPandas()
        keys = [cloudpickle.loads(bytes(k)) for k in rows["key_pickle"]]
        values = [cloudpickle.loads(bytes(v)) for v in rows["value_pickle"]]
        if self.windowed:
            entries = sort_entries(
                [KeyValue(k, (int(s), int(e), v)) for k, s, e, v in zip(keys, rows["start"], rows["end"], values)]
            )
            return pd.DataFrame([(e.key, *e.value) for e in entries], columns=["key", "start", "end", "value"])
        entries = sort_entries([KeyValue(k, v) for k, v in zip(keys, values)])
        return pd.DataFrame(entries, columns=["key", "value"])

    def __getattr__(self, name: str) -> Any:
        if name == "df":
            raise AttributeError(name)
        return getattr(self.df, name)

    def __repr__(self) -> str:
        return f"<backtest store {self.name!r}>"


@dataclass
class BacktestResult:
    """``outputs[topic]`` and ``stores[name]`` of a backtest, with the tasks' counters and timings."""

    outputs: dict[str, BacktestOutput]
    stores: dict[str, BacktestStore]
    task_stats: list[str]
    partition_counts: Mapping[str, int]
    seconds: float
    stage_seconds: dict[int, float] = field(default_factory=dict)
    _snapshot_dir: str | None = None
    #: per sub-topology: the engine that ran it ("compiled"/"replay") and why (``kstream_nb.spark.compiled``)
    paths: list[Any] = field(default_factory=list)

    def explain(self) -> str:
        """Which path each sub-topology took and why: its compiled steps, or what made it replay."""
        return "\n".join(f"sub-topology {p.subtopology}: {p.engine} ({p.reason})" for p in self.paths)

    @property
    def tasks(self) -> pd.DataFrame:
        """One row per task that ran: task id, records processed and dropped (late), final stream time."""
        rows = [json.loads(s) for s in self.task_stats]
        frame = pd.DataFrame(
            rows, columns=["task", "processed", "dropped", "stream_time", "skipped_deserialization"]
        )
        return frame.sort_values("task").reset_index(drop=True)

    @property
    def processed(self) -> int:
        return int(self.tasks["processed"].sum()) if self.task_stats else 0

    @property
    def dropped(self) -> int:
        return int(self.tasks["dropped"].sum()) if self.task_stats else 0

    def metrics(self) -> dict[str, Any]:
        return {"process-total": self.processed, "dropped-records-total": self.dropped, "seconds": self.seconds}

    def _repr_html_(self) -> str:
        from html import escape

        rows = "".join(
            f"<tr><td>{p.subtopology}</td><td>{escape(p.engine)}</td><td>{escape(p.reason)}</td></tr>"
            for p in self.paths
        )
        return (
            f"<p>{escape(repr(self))}</p><table><tr><th>sub-topology</th><th>engine</th><th>why</th></tr>"
            f"{rows}</table>"
        )

    def __repr__(self) -> str:
        return (
            f"BacktestResult(outputs={sorted(self.outputs)}, stores={sorted(self.stores)}, "
            f"processed={self.processed}, dropped={self.dropped}, seconds={self.seconds:.1f})"
        )
