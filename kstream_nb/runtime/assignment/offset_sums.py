"""The task offset sums an instance reports with its subscription (Kafka Streams' ``SubscriptionInfo``
``taskOffsetSums``, from ``TaskManager.getTaskOffsetSums``): ``LATEST_OFFSET`` for the tasks it runs, the
changelog positions of its standby copies, and the checkpointed offsets of task state left on disk
(``<state_dir>/<application_id>/<task_id>/.checkpoint``, written by persistent stores)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path

from kstream_nb.cluster.records import TopicPartition
from kstream_nb.runtime.assignment.client_state import LATEST_OFFSET
from kstream_nb.runtime.task_id import TaskId


def checkpointed_offset_sums(state_dir: str | None, application_id: str) -> dict[str, int]:
    """Task id -> sum of the changelog offsets in its checkpoint file, for every task directory on disk with a
    readable checkpoint (a missing or unreadable one says nothing: the task would restore from the start)."""
    if state_dir is None:
        return {}
    root = Path(state_dir) / application_id
    sums: dict[str, int] = {}
    if not root.is_dir():
        return sums
    for path in root.iterdir():
        try:
            TaskId.parse(path.name)
            data = json.loads((path / ".checkpoint").read_text())
            offsets = [int(o) for _t, _p, o in data.get("offsets", [])]
        except (OSError, ValueError, TypeError, AttributeError):
            continue
        if offsets:
            sums[path.name] = sum(o for o in offsets if o >= 0)
    return sums


def task_offset_sums(
    running: Iterable[str],
    standby_positions: Mapping[str, Mapping[TopicPartition, int]],
    state_dir: str | None,
    application_id: str,
) -> dict[str, int]:
    """Task id -> offset sum: ``LATEST_OFFSET`` for ``running`` tasks, the applied changelog positions of the
    standby copies, else the checkpoint on disk."""
    sums = checkpointed_offset_sums(state_dir, application_id)
    for task_id, positions in standby_positions.items():
        if positions:
            sums[task_id] = max(sums.get(task_id, 0), sum(positions.values()))
    for task_id in running:
        sums[task_id] = LATEST_OFFSET
    return sums
