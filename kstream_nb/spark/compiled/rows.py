"""The rows a compiled stage hands the runner, in the replay's shape (``replay.OUT_DDL``): "out" (a record
written to a topic partition by a task, ``seq`` ordering that task's writes), "store" (a final store entry,
pickled as the replay writes it) and "stat" (a task's counters as JSON)."""

from __future__ import annotations

from typing import Any

HEADERS = "array<struct<key:string,value:binary>>"


def out_rows(out: Any, topic: str, partitions: int, seq: Any, ts: str, null_keys: bool = True) -> Any:
    """Sink rows from ``k`` (key bytes, partition, text) and ``val`` (value bytes, text): a null key's
    partition goes round robin per task, in the task's order (the producer's sticky choice, per task).
    ``null_keys`` False: the rows have keys (an aggregation's), and no round robin is computed."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    partition = F.col("k.partition")
    if null_keys:
        in_order = Window.partitionBy("partition", F.col("k.bytes").isNull()).orderBy(seq)
        partition = F.coalesce(partition, ((F.row_number().over(in_order) - 1) % partitions).cast("int"))
    return out.select(*out_columns(topic, partition, seq, ts))


def out_columns(topic: str, partition: Any, seq: Any, ts: str) -> list[Any]:
    """The columns of a sink row (see ``out_rows``), its topic partition given."""
    from pyspark.sql import functions as F

    return [
        F.lit("out").alias("kind"), F.lit(topic).alias("topic"), partition.alias("partition"),
        F.col("partition").cast("int").alias("task"), seq.cast("long").alias("seq"),
        F.col(ts).cast("long").alias("ts"), F.col("k.bytes").alias("key"), F.col("val.bytes").alias("value"),
        F.coalesce(F.col("headers"), F.array().cast(HEADERS)).alias("headers"),
        F.col("k.text").alias("key_text"), F.col("val.text").alias("value_text"),
        F.lit(None).cast("long").alias("start"), F.lit(None).cast("long").alias("end"),
    ]  # fmt: skip


def store_rows(entries: Any, name: str, windowed: bool) -> Any:
    """Store rows from ``pk`` (pickled key, text) and ``pv`` (pickled value, text); ``windowed``: a window
    store's, with the window's ``start``/``end``."""
    return entries.select(*store_columns(name, windowed, "pk", "pv"))


def store_columns(name: str, windowed: bool, key: str, value: str) -> list[Any]:
    """The columns of a store row (see ``store_rows``) from the ``key`` and ``value`` struct columns."""
    from pyspark.sql import functions as F

    start = F.col("start") if windowed else F.lit(None)
    end = F.col("end") if windowed else F.lit(None)
    return [
        F.lit("store").alias("kind"), F.lit(name).alias("topic"),
        F.col("partition").cast("int").alias("partition"), F.col("partition").cast("int").alias("task"),
        F.lit(None).cast("long").alias("seq"),
        F.lit(None).cast("long").alias("ts"), F.col(f"{key}.bytes").alias("key"),
        F.col(f"{value}.bytes").alias("value"), F.lit(None).cast(HEADERS).alias("headers"),
        F.col(f"{key}.text").alias("key_text"), F.col(f"{value}.text").alias("value_text"),
        start.cast("long").alias("start"), end.cast("long").alias("end"),
    ]  # fmt: skip


def rows_of(frame: Any, kinds: list[tuple[Any, list[Any]]]) -> Any:
    """Several rows of ``frame``'s each row in one pass: per (condition or None, columns), a row when the
    condition holds (``out_columns``/``store_columns``, all of one shape)."""
    from pyspark.sql import functions as F

    structs = [F.struct(*cols) if cond is None else F.when(cond, F.struct(*cols)) for cond, cols in kinds]
    exploded = frame.select(F.explode(F.array(*structs)).alias("_row"))
    return exploded.where(F.col("_row").isNotNull()).select("_row.*")


def stat_rows(subtopology: int, stats: Any, drops: list[Any]) -> Any:
    """Per task: records processed, dropped (one per row of ``drops``: null keys or values at an aggregation,
    a late record once per closed window), the final stream time."""
    from pyspark.sql import functions as F

    if drops:
        dropped = drops[0]
        for more in drops[1:]:
            dropped = dropped.unionByName(more)
        per_task = dropped.groupBy("partition").agg(F.count(F.lit(1)).alias("dropped"))
        stats = stats.join(per_task, "partition", "left")
    else:
        stats = stats.withColumn("dropped", F.lit(0))
    counters = F.struct(
        F.concat(F.lit(f"{subtopology}_"), F.col("partition").cast("string")).alias("task"),
        F.col("processed"), F.coalesce(F.col("dropped"), F.lit(0)).alias("dropped"), F.col("stream_time"),
        F.lit(0).alias("skipped_deserialization"),
    )  # fmt: skip
    return stats.select(
        F.lit("stat").alias("kind"), F.lit(None).cast("string").alias("topic"), F.col("partition").cast("int"),
        F.col("partition").cast("int").alias("task"), F.lit(None).cast("long").alias("seq"),
        F.lit(None).cast("long").alias("ts"), F.lit(None).cast("binary").alias("key"),
        F.lit(None).cast("binary").alias("value"), F.lit(None).cast(HEADERS).alias("headers"),
        F.lit(None).cast("string").alias("key_text"), F.to_json(counters).alias("value_text"),
        F.lit(None).cast("long").alias("start"), F.lit(None).cast("long").alias("end"),
    )  # fmt: skip
