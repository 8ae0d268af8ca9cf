"""What windowed processors report about time: a record they dropped as late, and their oldest open window.

Both exist so that "why is my output missing" has an answer: the runtime keeps the last late records of each
task (``kstream_nb.runtime.dropped_records``) and asks each windowed processor, only when metrics are read,
which window is the oldest one still open at its observed stream time. Nothing here runs per record.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol, runtime_checkable


class LateRecord(NamedTuple):
    """A record a windowed processor dropped because the window it belongs to had closed.

    ``lateness_ms`` = the processor's stream time - the time the window closed: ``end + grace`` for time and
    sliding windows, ``end + gap + grace`` for sessions (Kafka's close time); 0 means exactly at the close.
    """

    key: Any
    timestamp: int
    window_start: int
    window_end: int
    stream_time: int
    lateness_ms: int


class OpenWindow(NamedTuple):
    """The oldest window a processor still updates: ``[start, end]`` at its observed ``stream_time``."""

    store: str
    stream_time: int
    start: int
    end: int


@runtime_checkable
class WindowTimeSource(Protocol):
    """A processor that keeps windows open until stream time passes them (windowed aggregations, joins)."""

    def oldest_open_window(self) -> OpenWindow | None:
        """The open window with the smallest start (None before the first record); read on demand, from
        another thread than the one processing."""
        ...
