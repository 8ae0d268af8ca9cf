"""Summarised warnings for records a task skips (``log_and_continue``): a topic with 60% garbage must not
write one line per record. The first few are logged in full, then one line per interval with the count since
the last line; every record still counts in the task's metrics (``skipped-deserialization-total``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

#: records logged one line each before the summary lines start
FIRST_LOGGED = 5
#: at most one summary line per this many milliseconds (of the task's wall clock)
SUMMARY_INTERVAL_MS = 5_000


class SkipLog:
    """One task's warnings for skipped records: ``skipped(...)`` per record, ``close()`` logs what is left.

    ``wall_clock`` gives milliseconds (the task's: the TopologyTestDriver's mocked clock in tests).
    """

    def __init__(self, logger: logging.Logger, task_id: str, wall_clock: Callable[[], int],
                 first: int = FIRST_LOGGED, interval_ms: int = SUMMARY_INTERVAL_MS) -> None:  # fmt: skip
        self._log = logger
        self._task_id = task_id
        self._clock = wall_clock
        self._first = first
        self._interval_ms = interval_ms
        self.total = 0
        self._pending = 0
        self._last_line_ms = 0
        self._last = ""

    def skipped(self, topic: str, partition: int, offset: int, reason: object) -> None:
        """A record the handler skipped: a line of its own while fewer than ``first`` were, else counted."""
        self.total += 1
        where = f"{topic}-{partition}@{offset}: {reason}"
        if self.total <= self._first:
            more = (
                f" (the first {self._first} are logged; then a count every {self._interval_ms / 1000:g} s)"
                if self.total == self._first
                else ""
            )
            self._log.warning("task %s: skipping record %s%s", self._task_id, where, more)
            self._last_line_ms = self._clock()
            return
        self._pending += 1
        self._last = where
        if self._clock() - self._last_line_ms >= self._interval_ms:
            self.flush()

    def flush(self) -> None:
        """Logs the count since the last line, if any."""
        if not self._pending:
            return
        self._log.warning(
            "task %s: skipped %d more record(s) that could not be read (%d in total); the last: %s",
            self._task_id, self._pending, self.total, self._last,
        )  # fmt: skip
        self._pending = 0
        self._last_line_ms = self._clock()

    close = flush
