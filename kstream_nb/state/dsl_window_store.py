"""The in-memory window and session stores of windowed aggregations, read as Kafka's default DSL stores.

Kafka Streams' default DSL store (RocksDB) keeps windows in time segments of ``max(retention / 2, 60 s)``
(window start, or session end) and drops a segment once it is older than the one holding stream time minus
the retention: a window is *kept* until then (at most ``kept_ms`` behind stream time), and
every read (``fetch``, ``fetch_session``, ``fetch_range``, ``fetch_all``, ``find_sessions``, ``all``: what
aggregations and interactive queries see) returns only the windows within the retention behind the store's
stream time (its latest window start, or session end): start (end) > stream time - retention. These are the
answers of Kafka Streams 4.4 to the same inputs (checked with the reference runner of ``tests/reference``).

The store of an emit-on-close time or sliding window aggregation (``emit_final``) is Kafka's time-ordered
store: its reads see start >= stream time - retention, so a window closed by a jump of stream time past the
retention is never emitted. Emit-on-close sessions emit every session the store keeps (``all_kept``), as
Kafka's time-ordered session store does.
"""

from __future__ import annotations

from typing import Any

from kstream_nb.state.window_store import InMemorySessionStore, InMemoryWindowStore

#: the shortest segment of Kafka's segmented window and session stores
MIN_SEGMENT_MS = 60_000


def segment_ms(retention_ms: int) -> int:
    """The segment interval of Kafka's segmented stores for a retention."""
    return max(retention_ms // 2, MIN_SEGMENT_MS)


def kept_ms(retention_ms: int) -> int:
    """The longest a segmented store keeps windows for a retention: plus one segment."""
    return retention_ms + segment_ms(retention_ms)


class _Segmented:
    """Drops windows a segment at a time, as Kafka's segmented stores: the in-memory stores drop what is
    ``retention_ms`` behind their stream time, so ``retention_ms`` follows stream time to the first live
    segment's start (a fresh store's is ``kept_ms``: what the changelog topic is configured with)."""

    observed_stream_time: int
    retention_ms: int
    read_retention_ms: int

    def _observe(self, timestamp: int) -> None:
        super()._observe(timestamp)  # type: ignore[misc]
        interval = segment_ms(self.read_retention_ms)
        min_live = max(self.observed_stream_time - self.read_retention_ms, 0) // interval
        self.retention_ms = self.observed_stream_time - min_live * interval + 1


class DslWindowStore(_Segmented, InMemoryWindowStore):
    """Windows kept segment-wise for ``retention_ms``; reads see those within ``retention_ms`` (``emit_final``:
    the time-ordered store of an emit-on-close aggregation, which also sees start = stream time - retention)."""

    def __init__(self, name: str, retention_ms: int, window_size_ms: int, emit_final: bool = False) -> None:
        super().__init__(name, kept_ms(retention_ms), window_size_ms)
        #: the retention range reads honour (``retention_ms`` is what the store keeps)
        self.read_retention_ms = retention_ms
        self.emit_final = emit_final

    def _visible_from(self) -> int:
        """The oldest window start reads return (Kafka: > stream time - retention; time-ordered: >=)."""
        low = self.observed_stream_time - self.read_retention_ms
        return low if self.emit_final else low + 1

    def fetch(self, key: Any, window_start: int) -> Any:
        if window_start < self._visible_from():
            return None
        return super().fetch(key, window_start)

    def fetch_range(self, key: Any, time_from: int, time_to: int) -> list[tuple[int, Any]]:
        return super().fetch_range(key, max(time_from, self._visible_from()), time_to)

    def fetch_all(self, time_from: int | None = None, time_to: int | None = None) -> list[tuple[Any, int, Any]]:
        low = self._visible_from()
        return super().fetch_all(low if time_from is None else max(time_from, low), time_to)


class DslSessionStore(_Segmented, InMemorySessionStore):
    """Sessions kept for ``kept_ms(retention_ms)``; reads see those ending within ``retention_ms``."""

    def __init__(self, name: str, retention_ms: int) -> None:
        super().__init__(name, kept_ms(retention_ms))
        self.read_retention_ms = retention_ms

    def _live_from(self) -> int:
        return self.observed_stream_time - self.read_retention_ms + 1

    def find_sessions(self, key: Any, earliest_end: int, latest_start: int) -> list[tuple[int, int, Any]]:
        return super().find_sessions(key, max(earliest_end, self._live_from()), latest_start)

    def fetch_session(self, key: Any, start: int, end: int) -> Any:
        return None if end < self._live_from() else super().fetch_session(key, start, end)

    def all(self) -> list[tuple[Any, int, int, Any]]:
        live_from = self._live_from()
        return [row for row in super().all() if row[2] >= live_from]

    def all_kept(self) -> list[tuple[Any, int, int, Any]]:
        """Every kept session, also those past the retention."""
        return super().all()
