"""The record cache of a session store stack: Kafka Streams' CachingSessionStore.

Session puts and removes land in the stream thread's record cache under ``(key, start, end)``; they reach the
change-logging layer and the backend only at a flush (every commit) or an eviction, so a session removed and
put again before the next commit (a record merged into it) is one update downstream. A session aggregation
over a cached store forwards each session's latest result once per flush through the flush listener, at the
session's end (Kafka's SessionCacheFlushListener); a removed session the store below does not hold (created
and merged away within one commit, or past its retention there) is forwarded nothing.

As for window stores (``kstream_nb.state.window_caching``), flushed sessions stay in the cache until evicted
and reads see the cache over the store below: a session past the store's retention is still found (and
merged into) while the cache holds it.
"""

from __future__ import annotations

import threading
from typing import Any

import pandas as pd

from kstream_nb.state.caching import LRUCacheEntry, entry_size
from kstream_nb.state.store import sort_keys
from kstream_nb.state.window_caching import CachingWindowedLayer
from kstream_nb.state.window_store import SessionStore


class CachingSessionStore(CachingWindowedLayer):
    """Buffers session writes in the thread's record cache; reads see the cache over the store below."""

    _time_at = 1  # by session end

    def put(self, key: Any, start: int, end: int, value: Any) -> None:
        context = self._initialized_context()
        headers = getattr(context, "headers", ())
        self._cache.put(
            (key, start, end), LRUCacheEntry(value, True, context.timestamp, headers, entry_size(key, value))
        )

    def remove(self, key: Any, start: int, end: int) -> None:
        self.put(key, start, end, None)

    def _write_flushed(self, entries: list[tuple[Any, LRUCacheEntry]]) -> None:
        """Writes flushed sessions below; the flush listener gets ``((key, start, end), new, old, ...)``."""
        inner = self.inner
        listener = self._flush_listener
        try:
            for (key, start, end), entry in entries:
                new = entry.value
                old = inner.fetch_session(key, start, end) if listener is not None or new is None else None
                if new is None and old is None:
                    continue
                self._flush_timestamp = entry.timestamp
                inner.put(key, start, end, new)
                self._flush_timestamp = None
                if listener is not None:
                    listener((key, start, end), new, old, entry.timestamp, entry.headers)
        finally:
            self._flush_timestamp = None

    # ---- reads ----------------------------------------------------------------------------------

    def fetch_session(self, key: Any, start: int, end: int) -> Any:
        cache = self._cache
        entry = (
            cache.get((key, start, end))
            if threading.get_ident() == self._owner
            else cache.entry((key, start, end))
        )
        return self.inner.fetch_session(key, start, end) if entry is None else entry.value

    def find_sessions(self, key: Any, earliest_end: int, latest_start: int) -> list[tuple[int, int, Any]]:
        below = self.inner.find_sessions(key, earliest_end, latest_start)
        cached = [(w, e) for w, e in self._cache.windows_of(key) if w[1] >= earliest_end and w[0] <= latest_start]
        if not cached:
            return below
        merged = {(s, e): v for s, e, v in below}
        for (start, end), entry in cached:
            if entry.value is None:
                merged.pop((start, end), None)
            else:
                merged[(start, end)] = entry.value
        return [(s, e, v) for (s, e), v in sorted(merged.items(), key=lambda kv: kv[0])]

    def all(self) -> list[tuple[Any, int, int, Any]]:
        below = self.inner.all()
        cached = self._cache.entries_between(None, None)
        if not cached:
            return below
        merged: dict[Any, dict[tuple[int, int], Any]] = {}
        for key, start, end, value in below:
            merged.setdefault(key, {})[(start, end)] = value
        for (key, start, end), entry in cached:
            if entry.value is None:
                merged.get(key, {}).pop((start, end), None)
            else:
                merged.setdefault(key, {})[(start, end)] = entry.value
        keys, _ = sort_keys(k for k, sessions in merged.items() if sessions)
        return [(key, s, e, merged[key][(s, e)]) for key in keys for s, e in sorted(merged[key])]

    def approximate_num_entries(self) -> int:
        count = int(self.inner.approximate_num_entries())
        fetch = self.inner.fetch_session
        for (key, start, end), entry in self._cache.pending().items():
            present = fetch(key, start, end) is not None
            if entry.value is None:
                count -= present
            elif not present:
                count += 1
        return count

    def to_pandas(self) -> pd.DataFrame:
        return SessionStore.to_pandas(self)  # type: ignore[arg-type]

    def __repr__(self) -> str:
        return f"CachingSessionStore({self.inner!r}, {self._cache!r})"
