"""The in-memory window and session stores of windowed aggregations, read as Kafka's default DSL stores.

Kafka Streams' default DSL store (RocksDB) keeps windows in time segments of ``max(retention / 2, 60 s)``
(window start, or session end) and drops a segment once it is older than the one holding stream time minus
the retention: a window is *kept* until then (at most ``kept_ms`` behind stream time), and
a single window (``fetch(key, start)``, ``fetch_session``: what a windowed join looks up) is read while
kept; range reads (``fetch_range``, ``fetch_all``, ``find_sessions``, ``all``: what aggregations and
interactive queries see) return only the windows within the retention behind the store's stream time (its
latest window start, or session end): start (end) > stream time - retention. These are the answers of
Kafka Streams 4.4 to the same inputs (checked with the reference runner of ``tests/reference``).

An emit-on-close aggregation emits every closed window the store keeps (``emit_final`` stores do not hide
old windows; sessions: ``all_kept``), as Kafka does for sessions. (Kafka's emit-on-close time and sliding
window stores read only windows with start >= stream time - retention, so there a window closed by a jump of
stream time past the retention is never emitted; kstream_nb emits it.)
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
    """Windows kept segment-wise for ``retention_ms``; range reads see those within ``retention_ms`` (all kept
    windows with ``emit_final``: the store of an emit-on-close aggregation)."""

    def __init__(self, name: str, retention_ms: int, window_size_ms: int, emit_final: bool = False) -> None:
        super().__init__(name, kept_ms(retention_ms), window_size_ms)
        #: the retention range reads honour (``retention_ms`` is what the store keeps)
        self.read_retention_ms = retention_ms
        self.emit_final = emit_final

    def _live_from(self, time_from: int | None) -> int | None:
        if self.emit_final:
            return time_from
        low = self.observed_stream_time - self.read_retention_ms + 1
        return low if time_from is None else max(time_from, low)

    def fetch_range(self, key: Any, time_from: int, time_to: int) -> list[tuple[int, Any]]:
        live_from = self._live_from(time_from)
        return super().fetch_range(key, time_from if live_from is None else live_from, time_to)

    def fetch_all(self, time_from: int | None = None, time_to: int | None = None) -> list[tuple[Any, int, Any]]:
        return super().fetch_all(self._live_from(time_from), time_to)


class DslSessionStore(_Segmented, InMemorySessionStore):
    """Sessions kept for ``kept_ms(retention_ms)``; range reads see those ending within ``retention_ms``."""

    def __init__(self, name: str, retention_ms: int) -> None:
        super().__init__(name, kept_ms(retention_ms))
        self.read_retention_ms = retention_ms

    def _live_from(self) -> int:
        return self.observed_stream_time - self.read_retention_ms + 1

    def find_sessions(self, key: Any, earliest_end: int, latest_start: int) -> list[tuple[int, int, Any]]:
        return super().find_sessions(key, max(earliest_end, self._live_from()), latest_start)

    def all(self) -> list[tuple[Any, int, int, Any]]:
        live_from = self._live_from()
        return [row for row in super().all() if row[2] >= live_from]

    def all_kept(self) -> list[tuple[Any, int, int, Any]]:
        """Every kept session, also those past the retention."""
        return super().all()
