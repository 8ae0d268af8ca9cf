"""Restoring a task's stores from their changelog topics before the task processes anything."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from kstream_nb.cluster.base import Admin, Consumer
from kstream_nb.cluster.records import TopicPartition
from kstream_nb.errors import StreamsError
from kstream_nb.runtime.task import StreamTask

log = logging.getLogger("kstream_nb.restore")


def restore_task(
    task: StreamTask,
    consumer: Consumer,
    admin: Admin,
    progress: Callable[[str, int, int], None] | None = None,
    timeout_s: float = 300.0,
    start_offsets: dict[TopicPartition, int] | None = None,
) -> int:
    """Replays each store's changelog partition from its beginning (or checkpoint / warm standby position)
    to its end; returns the number of records restored."""
    changelogs = task.changelog_partitions()
    if not changelogs:
        return 0
    existing = {tp for tp in changelogs if admin.partition_count(tp.topic) is not None}
    if not existing:
        return 0
    ends = admin.end_offsets(existing)
    begins = admin.beginning_offsets(existing)
    checkpoint = task.read_checkpoint()
    for tp in task.persistent_changelogs():
        if tp in begins and begins[tp] <= checkpoint.get(tp, -1) <= ends[tp]:
            begins[tp] = checkpoint[tp]  # the store on disk already holds everything before this offset
    for tp, offset in (start_offsets or {}).items():
        if tp in begins and begins[tp] <= offset <= ends[tp]:
            begins[tp] = offset  # a warm standby copy already holds everything before this offset
    todo = {tp for tp in existing if ends[tp] > begins[tp]}
    if not todo:
        return 0
    restoring = frozenset(todo)
    consumer.assign(restoring)
    for tp in restoring:
        consumer.seek(tp, begins[tp])
    restored = 0
    total = sum(ends[tp] - begins[tp] for tp in todo)
    if progress is not None:
        progress(task.task_id, 0, total)
    began = time.monotonic()
    deadline = began + timeout_s
    while todo:
        if time.monotonic() > deadline:
            raise StreamsError(f"task {task.task_id}: restoring {sorted(map(str, todo))} timed out")
        for batch in consumer.poll(0.1):
            tp = TopicPartition(batch.topic, batch.partition)
            records = [(r.key, r.value, r.timestamp) for r in batch.records if r.offset < ends[tp]]
            changelogs[tp].restore(records)
            restored += len(records)
        positions = {tp: min(consumer.position(tp), ends[tp]) for tp in restoring}
        if progress is not None:  # in offsets: compaction and transaction markers leave gaps in the records
            progress(task.task_id, sum(positions[tp] - begins[tp] for tp in positions), total)
        todo = {tp for tp in todo if positions[tp] < ends[tp]}
    consumer.assign([])
    log.info(
        "task %s: restored %d records from %s in %.1fs",
        task.task_id,
        restored,
        ", ".join(f"{tp} {begins[tp]}..{ends[tp]}" for tp in sorted(restoring, key=str)),
        time.monotonic() - began,
    )
    return restored
