"""A task's processing order and stream time as Spark columns, as the runtime's ``PartitionGroup`` makes them.

The task takes, record by record, the queue (one per input topic-partition) whose head has the lowest
timestamp; on a tie the queue added first (``next_queue``'s strict ``<``), and the backtest adds a task's
queues user topics first, then the topics it wrote itself, each group by name (``replay.run_task``). That
merge equals a stable sort by (running max of timestamps within the queue, queue rank, position in the
queue). A queue written by several upstream tasks is itself their merge by timestamp, ties to the lower task
(``replay.merge_order``): the same rule one level down. (Stream time, the running max of timestamps over the
task's order, is kept per processor where it matters: ``windows``.)
"""

from __future__ import annotations

from typing import Any


def in_offset_order(topics: list[str], written: set[str]) -> bool:
    """Whether a task's order is its one user topic's offsets (nothing to sort)."""
    return len(topics) == 1 and not written & set(topics)


def processing_order(frame: Any, topics: list[str], written: set[str]) -> Any:
    """``frame`` (rows of ``replay.IN_COLUMNS``, one task per ``partition``) with ``pos``: 0, 1, ... in the
    order the task processes its records (a task reading one user topic: its offsets)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    if in_offset_order(topics, written):
        return frame.withColumn("pos", F.col("offset"))
    ranked = sorted(topics, key=lambda t: (t in written, t))
    rank = F.lit(len(ranked))
    for i, topic in reversed(list(enumerate(ranked))):
        rank = F.when(F.col("topic") == topic, F.lit(i)).otherwise(rank)
    frame = frame.withColumn("_rank", rank)
    if written & set(topics):
        # a written queue's own order: its writers merged lowest timestamp first (each writer's order kept)
        by_writer = (
            Window.partitionBy("partition", "topic", "writer")
            .orderBy("seq")
            .rowsBetween(Window.unboundedPreceding, Window.currentRow)
        )
        merged = Window.partitionBy("partition", "topic").orderBy("_wmax", "writer", "seq")
        frame = frame.withColumn("_wmax", F.max("ts").over(by_writer))
        frame = frame.withColumn(
            "_qpos", F.when(F.col("writer") < 0, F.col("offset")).otherwise(F.row_number().over(merged))
        ).drop("_wmax")
    else:
        frame = frame.withColumn("_qpos", F.col("offset"))
    queue = (
        Window.partitionBy("partition", "topic")
        .orderBy("_qpos")
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    frame = frame.withColumn("_qmax", F.max("ts").over(queue))
    task = Window.partitionBy("partition").orderBy("_qmax", "_rank", "_qpos")
    return frame.withColumn("pos", F.row_number().over(task) - 1).drop("_rank", "_qpos", "_qmax")
