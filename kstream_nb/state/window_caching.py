"""The record cache of a window store stack: Kafka Streams' CachingWindowStore.

Window puts land in the stream thread's record cache (``state/caching.py``) under ``(key, window start)``;
they reach the change-logging layer and the backend only at a flush (every commit) or an eviction. A
windowed aggregation over a cached store forwards each window's latest result once per flush, through
the flush listener, instead of every update (Kafka's TimestampedCacheFlushListener).
"""

from __future__ import annotations

import threading
from typing import Any

from kstream_nb.errors import IllegalStateError
from kstream_nb.state.caching import CacheFlushContext, CachingLayer, LRUCacheEntry, ThreadCache, entry_size
from kstream_nb.state.store import StateStore, StateStoreContext, sort_keys
from kstream_nb.state.window_store import WindowStore, WrappedWindowedStore


class CachingWindowStore(WrappedWindowedStore, CachingLayer):
    """Buffers window writes in the thread's record cache; reads see the cache over the store below.

    Only the thread that initialized the store changes the cache; reads from other threads (interactive
    queries) only look. Not for stores that keep duplicates (join buffers): those are never cached.
    """

    def __init__(self, inner: Any, cache: ThreadCache) -> None:
        super().__init__(inner)
        self._cache = cache.named_cache(inner.name)
        self._cache.listener = self._write_flushed
        self._context: StateStoreContext | None = None
        self._owner = -1

    def init(self, context: StateStoreContext, root: StateStore | None = None) -> None:
        self._context = context
        self._owner = threading.get_ident()
        self.inner.init(CacheFlushContext(context, self), root if root is not None else self)

    def put(self, key: Any, value: Any, window_start: int) -> None:
        context = self._context
        if context is None:
            raise IllegalStateError(f"store {self.inner.name!r} is not initialized: call init(context) first")
        self._cache.put(
            (key, window_start),
            LRUCacheEntry(
                value, True, context.timestamp, getattr(context, "current_headers", ()), entry_size(key, value)
            ),
        )

    def _write_flushed(self, entries: list[tuple[Any, LRUCacheEntry]]) -> None:
        """Writes flushed windows below; the flush listener gets ``((key, window start), new, old, ...)``."""
        fetch, put = self.inner.fetch, self.inner.put
        listener = self._flush_listener
        try:
            for (key, start), entry in entries:
                new = entry.value
                old = fetch(key, start) if listener is not None or new is None else None
                if new is None and old is None:
                    continue
                self._flush_timestamp = entry.timestamp
                put(key, new, start)
                self._flush_timestamp = None
                if listener is not None:
                    listener((key, start), new, old, entry.timestamp, entry.headers)
        finally:
            self._flush_timestamp = None

    # ---- reads ----------------------------------------------------------------------------------

    def fetch(self, key: Any, window_start: int) -> Any:
        cache = self._cache
        if threading.get_ident() == self._owner:
            entry = cache.get((key, window_start))
        else:
            entry = cache.lru.get((key, window_start)) or cache.flushing.get((key, window_start))
        return self.inner.fetch(key, window_start) if entry is None else entry.value

    def fetch_range(self, key: Any, time_from: int, time_to: int) -> list[tuple[int, Any]]:
        below = self.inner.fetch_range(key, time_from, time_to)
        pending = self._cache.pending()
        if not pending:
            return below
        merged = dict(below)
        for (k, start), entry in pending.items():
            if k == key and time_from <= start <= time_to:
                if entry.value is None:
                    merged.pop(start, None)
                else:
                    merged[start] = entry.value
        return sorted(merged.items(), key=lambda sv: sv[0])

    def fetch_all(self, time_from: int | None = None, time_to: int | None = None) -> list[tuple[Any, int, Any]]:
        below = self.inner.fetch_all(time_from, time_to)
        pending = self._cache.pending()
        if not pending:
            return below
        merged: dict[Any, dict[int, Any]] = {}
        for key, start, value in below:
            merged.setdefault(key, {})[start] = value
        for (key, start), entry in pending.items():
            if (time_from is not None and start < time_from) or (time_to is not None and start > time_to):
                continue
            if entry.value is None:
                merged.get(key, {}).pop(start, None)
            else:
                merged.setdefault(key, {})[start] = entry.value
        keys, _ = sort_keys(k for k, windows in merged.items() if windows)
        return [(key, start, merged[key][start]) for key in keys for start in sorted(merged[key])]

    def all(self) -> list[tuple[Any, int, Any]]:
        return self.fetch_all()

    def approximate_num_entries(self) -> int:
        count = int(self.inner.approximate_num_entries())
        fetch = self.inner.fetch
        for (key, start), entry in self._cache.pending().items():
            present = fetch(key, start) is not None
            if entry.value is None:
                count -= present
            elif not present:
                count += 1
        return count

    to_pandas = WindowStore.to_pandas

    def __repr__(self) -> str:
        return f"CachingWindowStore({self.inner!r}, {self._cache!r})"
