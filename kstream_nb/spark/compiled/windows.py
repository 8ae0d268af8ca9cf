"""Tumbling and hopping windows as ``KStreamWindowAggregate`` runs them, as Spark columns.

The processor keeps its own observed stream time: the running max of the timestamps of the records that reach
it with a key (a null key is dropped and counted first). A record belongs to every window ``[start, start +
size)`` on the ``advance`` grid that contains it; a window with ``end <= observed - grace`` is closed: the
record is dropped for that window and counted once per such window (a hopping window's record may be late
for some windows and not others). Each open window's aggregate runs over its records in task order, its
timestamp the max of theirs. The window store's own stream time is the latest window start put; reads and the
final contents see the windows with ``start > that - retention``.

Emit on close (``emit_final``): a window goes out once, at the first record whose observed stream time minus
grace reaches its end, with its final aggregate and timestamp and that record's headers, the windows a record
closes ordered by start then key (as the key's store bytes: the natural order of string keys, not of
numbers); a window whose start is then behind the store's stream time minus the
retention was dropped unseen (Kafka's time-ordered store), and windows still open at the end of the input
never go out.
"""

from __future__ import annotations

from typing import Any

from kstream_nb.spark.compiled.planner import Aggregate


def windows_per_record(step: Aggregate) -> int:
    """The most windows one record belongs to (for the sequence numbers of its writes)."""
    assert step.windows is not None
    return -(-step.windows.size_ms // step.windows.advance_ms)


def assign_windows(frame: Any, step: Aggregate) -> Any:
    """``frame`` (records with a key, in task order ``pos``) with one row per window a record belongs to:
    ``start``, ``end``, ``widx`` (its index among the record's windows), ``observed`` and ``late``."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    windows = step.windows
    assert windows is not None
    size, advance, grace = windows.size_ms, windows.advance_ms, windows.grace_ms
    running = Window.partitionBy("partition").orderBy("pos").rowsBetween(Window.unboundedPreceding, 0)
    first = F.greatest(F.lit(0), F.col("ts") - size + advance)
    first = first - first % advance
    frame = frame.withColumn("observed", F.max("ts").over(running))
    frame = frame.select("*", F.posexplode(F.sequence(first, F.col("ts"), F.lit(advance))).alias("widx", "start"))
    frame = frame.withColumn("end", F.col("start") + size)
    return frame.withColumn("late", F.col("end") <= F.col("observed") - grace)


def store_visible(updates: Any, step: Aggregate) -> Any:
    """The last update of every window the store still shows at the end: ``start >`` its stream time (the
    task's latest window start put) minus the retention (``>=`` for the time-ordered store of emit on close)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    task = Window.partitionBy("partition")
    final = updates.withColumn("_store_time", F.max("start").over(task)).where(F.col("final"))
    low = F.col("_store_time") - step.retention_ms  # emitting on close, the time-ordered store reads >= low
    visible = F.col("start") >= low if step.emit_final else F.col("start") > low
    return final.where(visible).drop("_store_time")


def closed_windows(updates: Any, records: Any, step: Aggregate) -> Any:
    """Emit on close: each window's final update with ``emit_pos`` (the record that closes it) and that
    record's ``headers``; ``seq`` orders the task's emissions (by record, then start, then key)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    windows = step.windows
    assert windows is not None
    final = updates.where(F.col("final"))
    # per record: its close time and the store's stream time after its puts (the latest open window start)
    running = Window.partitionBy("partition").orderBy("pos").rowsBetween(Window.unboundedPreceding, 0)
    puts = updates.groupBy("partition", "pos").agg(F.max("start").alias("_put"))
    closers = (
        records.select("partition", "pos", "headers", (F.col("observed") - windows.grace_ms).alias("_close"))
        .dropDuplicates(["partition", "pos"])
        .join(puts, ["partition", "pos"], "left")
        .withColumn("_store_time", F.max("_put").over(running))
        .drop("_put")
    )
    # the first record whose close time reaches a window's end: windows and records in one order per task,
    # by (end or close time, windows first), then the next record after each window
    events = final.select(
        "partition", F.col("end").alias("_at"), F.lit(0).alias("_kind"), F.lit(None).cast("long").alias("_pos"),
        F.col("gk"), F.col("start"),
    ).unionByName(
        closers.select(
            "partition", F.col("_close").alias("_at"), F.lit(1).alias("_kind"), F.col("pos").alias("_pos"),
            F.lit(None).cast("binary").alias("gk"), F.lit(None).cast("long").alias("start"),
        )
    )  # fmt: skip
    # the nearest record at or after each event: the last one before it in the reverse order (a running
    # frame; Spark recomputes a frame reaching to the partition's end for every row)
    after = (
        Window.partitionBy("partition")
        .orderBy(F.col("_at").desc(), F.col("_kind").desc(), F.col("_pos").desc_nulls_last())
        .rowsBetween(Window.unboundedPreceding, 0)
    )
    events = events.withColumn("emit_pos", F.last("_pos", ignorenulls=True).over(after)).where(F.col("_kind") == 0)
    emitted = final.join(events.select("partition", "gk", "start", "emit_pos"), ["partition", "gk", "start"])
    emitted = emitted.where(F.col("emit_pos").isNotNull()).drop("headers")
    emitted = emitted.join(closers.withColumnRenamed("pos", "emit_pos"), ["partition", "emit_pos"]).where(
        F.col("start") >= F.col("_store_time") - step.retention_ms
    )
    order = Window.partitionBy("partition").orderBy("emit_pos", "start", "gk")
    return emitted.withColumn("seq", F.row_number().over(order))
