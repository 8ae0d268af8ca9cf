"""``suppress(until_window_closes())`` after a windowed ``count``/``agg`` (``KTableSuppress``), as Spark columns.

The suppress processor buffers every window update the aggregation sends (its late records send none) and
keeps its own stream time, the running max of those updates' timestamps. That equals the aggregation's
observed stream time after each record: the record that raises it is late for none of its windows and its
first update carries its timestamp. So a window goes out at the record emit-on-close picks
(``windows.closed_windows``: the first whose stream time minus grace reaches the window's end), right after
that record's first update, but unlike emit-on-close: with the headers of the window's last update (the
buffered record's, not the closing record's), whatever the window store's retention (the buffer is not the
store), and the windows one record releases ordered by end, then key (Python's order), then start. Windows
still buffered at the end of the input are not emitted; the buffer store holds them: ``Windowed`` key ->
``BufferedUpdate(end, timestamp, headers, Change(new, old))``, old being the window's previous value (the
initial aggregate for a window's first update).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pyarrow as pa

from kstream_nb.cluster.serdes import Serde
from kstream_nb.spark.compiled.aggregate import result_builder
from kstream_nb.spark.compiled.codec import encode_objects, recode_windowed_keys, scalar_udf
from kstream_nb.spark.compiled.planner import Aggregate, Finish, NotCompilable, Suppress
from kstream_nb.spark.compiled.rows import store_rows
from kstream_nb.spark.compiled.windows import closed_windows

_NEVER = 2**62  # a retention no window start falls behind
_KEY_ORDER = "kind string, text string, number bigint"


def suppressed_windows(updates: Any, records: Any, step: Aggregate, key_serde: Serde, topic: str) -> Any:
    """Each window's final update with ``emit_pos`` and ``seq`` (the task's emission order), its own
    ``headers``; windows never released have a null ``emit_pos`` and ``seq``."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    own = updates.withColumnRenamed("headers", "_own_headers")
    closed = closed_windows(own, records, dataclasses.replace(step, retention_ms=_NEVER))
    released = closed.select("partition", "gk", "start", "emit_pos")
    last = Window.partitionBy("partition", "gk", "start").orderBy(F.col("pos").desc())
    final = updates.withColumn("_last", F.row_number().over(last)).where(F.col("_last") == 1).drop("_last")
    final = final.join(released, ["partition", "gk", "start"], "left")
    order = key_order(final, key_serde, topic)
    emitted = Window.partitionBy("partition").orderBy("emit_pos", "end", order, "start")
    seq = F.when(F.col("emit_pos").isNotNull(), F.row_number().over(emitted))
    return final.withColumn("seq", seq)


def key_order(frame: Any, key_serde: Serde, topic: str) -> Any:
    """A column ordering ``frame``'s keys as Python sorts them: str keys by code point (their UTF-8 bytes),
    int keys by value; keys of other or mixed types raise ``NotCompilable`` (live: sorted by their JSON)."""
    from pyspark.sql import functions as F

    def kinds(raw: pa.Array) -> pa.Array:
        kind, text, number = [], [], []
        for data in raw.to_pylist():
            key = key_serde.deserialize(topic, data)
            small = type(key) is int and -(2**63) <= key < 2**63
            kind.append("str" if type(key) is str else "int" if small else type(key).__name__)
            text.append(key if type(key) is str else None)
            number.append(key if small else None)
        return pa.StructArray.from_arrays(
            [pa.array(kind, pa.string()), pa.array(text, pa.string()), pa.array(number, pa.int64())],
            names=["kind", "text", "number"],
        )

    kind = scalar_udf(kinds, _KEY_ORDER)(F.col("key"))
    found = sorted(r["kind"] for r in frame.select(kind["kind"].alias("kind")).distinct().collect())
    if len(found) > 1 or (found and found[0] not in ("str", "int")):
        raise NotCompilable(f"suppress releases windows in key order; keys of types {found} (not compiled)")
    return kind["number"] if found == ["int"] else kind["text"]


def buffer_rows(ctx: Any, step: Aggregate, suppress: Suppress, final: Any, finish: Finish | None) -> Any:
    """The buffer store's rows at the end of the input: the windows never released, with their last update.
    The update's old value: a materialized finish's own previous value (None at first, as Kafka's
    ``KTableMapValues`` reads its store), else the previous aggregate (at first the initial one)."""
    from pyspark.sql import functions as F

    plan = ctx.plan
    keys = recode_windowed_keys(plan.key_serde, None, (ctx.source_topic, ""), 1, None, True)
    value = result_builder(step, finish is not None)
    from_store = finish is not None and finish.store is not None
    # the initial aggregate as a row of ``agg``: a count's 0, named aggregations' empty state
    initial: dict[str, Any] = {"count": 0}
    for i in range(len(step.specs or ())):
        initial.update({f"s{i}": None, f"n{i}": 0})

    def buffered(row: dict[str, Any]) -> Any:
        from kstream_nb.processor.api import Change
        from kstream_nb.state.suppression_buffer import BufferedUpdate

        headers = tuple((h["key"], h["value"]) for h in row["headers"] or ())
        if row["old"] is None:
            old = None if from_store else value(initial)
        else:
            old = value(row["old"])
        return BufferedUpdate(row["end"], row["agg_ts"], headers, Change(value(row["new"]), old))

    entry = F.struct("end", "agg_ts", "headers", F.col("agg").alias("new"), F.col("_prev").alias("old"))
    held = final.where(F.col("emit_pos").isNull())
    held = held.withColumn("pk", keys(F.col("key"), F.col("start"), F.col("end")))
    held = held.withColumn("pv", encode_objects(buffered, None, suppress.store, True)(entry))
    return store_rows(held, suppress.store, False)


def with_previous(updates: Any) -> Any:
    """``updates`` with ``_prev``: the window's aggregate before each update (null for its first)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    window = Window.partitionBy("partition", "gk", "start").orderBy("pos")
    return updates.withColumn("_prev", F.lag("agg").over(window))
