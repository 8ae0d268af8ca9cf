"""``count``/``agg`` per key, emitting on every update, as running window aggregates over a task's order.

As ``KStreamAggregate`` without a record cache: a record with a null key or value is dropped (and counted);
every other record updates its key's aggregate and sends it on with the timestamp max(previous result's,
record's), i.e. the running max of the key's timestamps. Named aggregations skip null fields, as
``named_aggregation``: ``sum``/``count`` start at 0, ``min``/``max``/``first``/``last`` at None, ``mean``
keeps ``[sum, n]`` in the store and shows ``sum / n``. Sums and means are added up in processing order, as
live (floating-point sums depend on it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kstream_nb.spark.compiled.planner import Aggregate, NotCompilable
from kstream_nb.spark.compiled.stateless import ValueFields

_NUMERIC = ("bigint", "double")


def running_aggregates(frame: Any, step: Aggregate, fields: ValueFields, by: list[str]) -> Any:
    """``frame`` (kept records, with ``gk``: the key's store bytes, ``pos``, ``ts``, the value's ``fields``)
    with ``agg`` (a struct of the running aggregate's parts), ``agg_ts`` (the result's timestamp) and ``final``
    (the group's last update), each aggregate over the rows of one ``by`` group (task and key; and window
    start) in task order."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    running = Window.partitionBy(*by).orderBy("pos").rowsBetween(Window.unboundedPreceding, Window.currentRow)
    parts = []
    if step.specs is None:
        parts.append(F.count(F.lit(1)).over(running).alias("count"))
    else:
        for i, (field, fn) in enumerate(step.specs.values()):
            x = fields.column(field)
            if fn in ("sum", "mean") and fields.dtype(field) not in _NUMERIC:
                raise NotCompilable(f"agg {fn} of field {field!r} holding {fields.dtype(field)} values")
            if fn in ("sum", "mean"):
                parts.append(F.sum(x).over(running).alias(f"s{i}"))
            if fn in ("count", "mean"):
                parts.append(F.count(x).over(running).alias(f"n{i}"))
            if fn in ("min", "max"):
                parts.append((F.min if fn == "min" else F.max)(x).over(running).alias(f"s{i}"))
            if fn in ("first", "last"):
                parts.append(
                    (F.first if fn == "first" else F.last)(x, ignorenulls=True).over(running).alias(f"s{i}")
                )
    # the group's last update (what the store keeps): same partitioning and sort as the running window
    final = F.col("pos") == F.max("pos").over(Window.partitionBy(*by))
    return frame.select("*", F.struct(*parts).alias("agg"), F.max("ts").over(running).alias("agg_ts"),
                        final.alias("final"))  # fmt: skip


def state_builder(step: Aggregate) -> Callable[[dict[str, Any]], Any]:
    """The running state (what the aggregation's store holds) from a row of ``agg``."""
    if step.specs is None:
        return lambda row: row["count"]
    specs = list(step.specs.items())

    def state(row: dict[str, Any]) -> Any:
        out: dict[str, Any] = {}
        for i, (name, (_, fn)) in enumerate(specs):
            if fn == "sum":
                out[name] = 0 if row[f"s{i}"] is None else row[f"s{i}"]
            elif fn == "count":
                out[name] = row[f"n{i}"]
            elif fn == "mean":
                out[name] = [0 if row[f"s{i}"] is None else row[f"s{i}"], row[f"n{i}"]]
            else:
                out[name] = row[f"s{i}"]
        return out

    return state


def result_builder(step: Aggregate, finished: bool) -> Callable[[dict[str, Any]], Any]:
    """The value sent downstream: the state, or with ``finished`` (``agg``'s map_values) means as sum / n."""
    state = state_builder(step)
    if not finished or step.specs is None:
        return state
    means = [name for name, (_, fn) in step.specs.items() if fn == "mean"]

    def result(row: dict[str, Any]) -> Any:
        out = state(row)
        for name in means:
            total, n = out[name]
            out[name] = total / n if n else None
        return out

    return result


def json_in_spark(step: Aggregate, fields: ValueFields) -> Any:
    """The JSON bytes of each result, written by Spark, when they equal orjson's: a count, or named
    aggregations whose results are all integers or booleans (Spark writes doubles as Java does, ``1.0E7``,
    and escapes strings its own way); else None (the sink's serde writes them, ``codec.encode_objects``)."""
    from pyspark.sql import functions as F

    if step.specs is None:
        return F.col("agg.count").cast("string").cast("binary")
    parts = []
    for i, (name, (field, fn)) in enumerate(step.specs.items()):
        if fn == "count":
            parts.append(F.col(f"agg.n{i}").alias(name))
        elif fn == "sum" and fields.dtype(field) == "bigint":
            parts.append(F.coalesce(F.col(f"agg.s{i}"), F.lit(0).cast("long")).alias(name))
        elif fn in ("min", "max", "first", "last") and fields.dtype(field) in ("bigint", "boolean"):
            parts.append(F.col(f"agg.s{i}").alias(name))
        else:
            return None
    return F.to_json(F.struct(*parts), {"ignoreNullFields": "false"}).cast("binary")
