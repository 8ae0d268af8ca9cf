"""Punctuation schedules of a task, by stream time (aligned to 0) or by wall-clock time."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from kstream_nb.processor.api import PunctuationType


@dataclass(eq=False)
class PunctuationSchedule:
    """One ``schedule()`` call: when it fires next and what it calls; ``cancel()`` stops it."""

    node: object
    interval_ms: int
    type: PunctuationType
    punctuator: Callable[[int], None]
    next_time: int
    cancelled: bool = field(default=False)

    def cancel(self) -> None:
        self.cancelled = True

    def advance(self, now: int) -> None:
        """Next firing time after ``now``, skipping missed intervals (Kafka fires once, not once per miss)."""
        nxt = self.next_time + self.interval_ms
        if now >= nxt:
            nxt = self.next_time + ((now - self.next_time) // self.interval_ms + 1) * self.interval_ms
        self.next_time = nxt


class PunctuationQueue:
    """The schedules of one type; ``due(now)`` yields those to fire, advancing each."""

    def __init__(self) -> None:
        self.schedules: list[PunctuationSchedule] = []

    def add(self, schedule: PunctuationSchedule) -> None:
        self.schedules.append(schedule)

    def due(self, now: int) -> list[PunctuationSchedule]:
        self.schedules = [s for s in self.schedules if not s.cancelled]
        fired = []
        for s in self.schedules:
            if s.next_time <= now:
                fired.append(s)
                s.advance(now)
        return fired

    def __len__(self) -> int:
        return len(self.schedules)
