"""Late-data visibility: each task's last records dropped for a closed window, and its windows' times.

A task keeps its last ``LATE_RECORDS_PER_TASK`` late records in a bounded deque, filled only on the drop path;
``late_records_frame`` merges the tasks' deques newest first. ``task_times`` asks the task's windowed processors
for their oldest open window only when metrics are read. Both answer "why is my output missing".
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Iterable
from typing import Any

import pandas as pd

from kstream_nb.processor.record_context import RecordContext
from kstream_nb.processor.window_time import LateRecord, WindowTimeSource

#: how many late records each task keeps (older ones fall out): memory stays bounded however many drop
LATE_RECORDS_PER_TASK = 1000

COLUMNS = [
    "task",
    "processor",
    "topic",
    "partition",
    "offset",
    "key",
    "timestamp",
    "window_start",
    "window_end",
    "stream_time",
    "lateness_ms",
]

#: one order over every task's drops (``next`` on a count is atomic under the GIL)
_sequence = itertools.count()


class LateRecords:
    """A task's last late records with where they came from (topic, partition, offset of the input record)."""

    def __init__(self, task_id: str, max_records: int = LATE_RECORDS_PER_TASK) -> None:
        self.task_id = task_id
        self._rows: deque[tuple[Any, ...]] = deque(maxlen=max_records)

    def add(self, processor: str, late: LateRecord, rc: RecordContext) -> None:
        self._rows.append((next(_sequence), self.task_id, processor, rc.topic, rc.partition, rc.offset, *late))

    def snapshot(self) -> list[tuple[Any, ...]]:
        """The kept rows, oldest first (a C-level copy: safe while the task's thread appends)."""
        return list(self._rows.copy())

    def __len__(self) -> int:
        return len(self._rows)


def late_records_frame(tasks: Iterable[Any], n: int = 20) -> pd.DataFrame:
    """The last ``n`` late records over ``tasks``, newest first, with the columns of ``COLUMNS``."""
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    rows = [row for task in tasks for row in task.late_records.snapshot()]
    rows.sort(key=lambda row: row[0], reverse=True)
    return pd.DataFrame([row[1:] for row in rows[:n]], columns=COLUMNS)


def task_times(tasks: Iterable[Any]) -> dict[str, dict[str, Any]]:
    """Per task: its stream time, its windowed processors' oldest open windows (``windows``: processor,
    store, the processor's stream time, start, end) and the oldest of them (``oldest-open-window``, None
    when the task has no window open)."""
    out: dict[str, dict[str, Any]] = {}
    for task in tasks:
        windows = []
        for node in task.nodes:
            processor = node.processor
            if isinstance(processor, WindowTimeSource):
                window = processor.oldest_open_window()
                if window is not None:
                    windows.append(
                        {
                            "processor": node.name,
                            "store": window.store,
                            "stream-time": window.stream_time,
                            "start": window.start,
                            "end": window.end,
                        }
                    )
        windows.sort(key=lambda w: (w["start"], w["processor"]))
        out[task.task_id] = {
            "stream-time": task.stream_time,
            "oldest-open-window": windows[0] if windows else None,
            "windows": windows,
        }
    return dict(sorted(out.items()))
