"""The record cache of a window store stack: Kafka Streams' CachingWindowStore.

Window puts land in the stream thread's record cache (``state/caching.py``) under ``(key, window start)``;
they reach the change-logging layer and the backend only at a flush (every commit) or an eviction. A
windowed aggregation over a cached store forwards each window's latest result once per flush, through
the flush listener, instead of every update (Kafka's TimestampedCacheFlushListener).

Flushed entries stay in the cache (clean) until evicted, and every read sees the cache over the store below,
as Kafka's merged cache iterators do: a window the store below no longer returns (past its retention) is
still read from the cache while the cache holds it. ``IndexedNamedCache`` finds a store's cached windows by
key and by time for these reads.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Callable, Iterable
from typing import Any

from kstream_nb.state.caching import (
    CachingLayer,
    LRUCacheEntry,
    NamedCache,
    ThreadCache,
    entry_size,
)
from kstream_nb.state.store import sort_keys
from kstream_nb.state.window_store import WindowStore, WrappedWindowedStore


def _copy(items: Callable[[], Iterable[Any]]) -> list[Any]:
    """A list of ``items()``, retried while another thread resizes the collection (interactive queries)."""
    while True:
        try:
            return list(items())
        except RuntimeError:
            continue


class IndexedNamedCache(NamedCache):
    """A store's part of the thread cache whose entries are also found by record key and by time.

    Cache keys are ``(record key, *window)``; ``time_of(window)`` is the time windows are ranged by (window
    start). The indexes follow the entries: added on put, removed when an entry leaves (eviction, a flushed
    tombstone, close).
    """

    def __init__(self, name: str, thread: ThreadCache, time_of: Callable[[tuple[Any, ...]], int]) -> None:
        super().__init__(name, thread)
        thread.caches.append(self)
        self.time_of = time_of
        self.by_key: dict[Any, set[tuple[Any, ...]]] = {}
        self.by_time: dict[int, set[Any]] = {}
        self.times: list[int] = []

    def put(self, key: Any, entry: LRUCacheEntry) -> None:
        if key not in self.lru:
            record_key, window = key[0], key[1:]
            self.by_key.setdefault(record_key, set()).add(window)
            time = self.time_of(window)
            keys = self.by_time.get(time)
            if keys is None:
                keys = self.by_time[time] = set()
                bisect.insort(self.times, time)
            keys.add(key)
        super().put(key, entry)

    def _gone(self, keys: Iterable[Any]) -> None:
        for key in keys:
            if key in self.lru:
                continue
            windows = self.by_key.get(key[0])
            if windows is not None:
                windows.discard(key[1:])
                if not windows:
                    del self.by_key[key[0]]
            time = self.time_of(key[1:])
            at = self.by_time.get(time)
            if at is not None:
                at.discard(key)
                if not at:
                    del self.by_time[time]
                    i = bisect.bisect_left(self.times, time)
                    if i < len(self.times) and self.times[i] == time:
                        del self.times[i]

    def evict(self) -> None:
        key = next(iter(self.lru))
        super().evict()
        self._gone([key])

    def flush(self, evicted: tuple[Any, LRUCacheEntry] | None = None) -> None:
        lru = self.lru
        deleted = [k for k in self.dirty if k in lru and lru[k].value is None]  # (an evicted key is not)
        super().flush(evicted)
        self._gone(deleted)

    def close(self) -> None:
        super().close()
        self.by_key, self.by_time, self.times = {}, {}, []

    def entry(self, key: Any) -> LRUCacheEntry | None:
        """The cached entry of ``key`` (also while it is flushed after an eviction), without touching LRU order."""
        entry = self.lru.get(key)
        return self.flushing.get(key) if entry is None else entry

    def windows_of(self, record_key: Any) -> list[tuple[tuple[Any, ...], LRUCacheEntry]]:
        """(window, entry) of every cached window of ``record_key``."""
        windows = self.by_key.get(record_key)
        if not windows:
            return []
        out = []
        for window in _copy(lambda: windows):
            entry = self.entry((record_key, *window))
            if entry is not None:
                out.append((window, entry))
        return out

    def entries_between(self, low: int | None, high: int | None) -> list[tuple[Any, LRUCacheEntry]]:
        """(cache key, entry) of every cached window whose time is in [low, high] (None: unbounded)."""
        times = self.times
        first = 0 if low is None else bisect.bisect_left(times, low)
        last = len(times) if high is None else bisect.bisect_right(times, high)
        out = []
        for time in _copy(lambda: times[first:last]):
            for key in _copy(lambda t=time: self.by_time.get(t, ())):  # type: ignore[misc]
                entry = self.entry(key)
                if entry is not None:
                    out.append((key, entry))
        return out


def indexed_cache(cache: ThreadCache, name: str, time_of: Callable[[tuple[Any, ...]], int]) -> IndexedNamedCache:
    """A new indexed part of ``cache`` for store ``name``."""
    return IndexedNamedCache(name, cache, time_of)


class CachingWindowedLayer(WrappedWindowedStore, CachingLayer):
    """What the window and session caching layers share: a part of the thread cache indexed by key and by
    one time of the cached window key."""

    _cache: IndexedNamedCache
    #: where the indexed time is in a cache key: the window start, or the session end
    _time_at: int

    def __init__(self, inner: Any) -> None:
        super().__init__(inner)
        self._start_cache()

    def _named_cache(self, thread: ThreadCache) -> IndexedNamedCache:
        at = self._time_at
        return indexed_cache(thread, self.inner.name, lambda window: int(window[at]))

    init = CachingLayer.init


class CachingWindowStore(CachingWindowedLayer):
    """Buffers window writes in the thread's record cache; reads see the cache over the store below.

    Only the thread that initialized the store changes the cache; reads from other threads (interactive
    queries) only look. Not for stores that keep duplicates (join buffers): those are never cached.
    """

    _time_at = 0  # by window start

    def put(self, key: Any, value: Any, window_start: int) -> None:
        context = self._initialized_context()
        self._cache.put(
            (key, window_start),
            LRUCacheEntry(value, True, context.timestamp, getattr(context, "headers", ()), entry_size(key, value)),
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
        cached = [(w[0], e) for w, e in self._cache.windows_of(key) if time_from <= w[0] <= time_to]
        if not cached:
            return below
        merged = dict(below)
        for start, entry in cached:
            if entry.value is None:
                merged.pop(start, None)
            else:
                merged[start] = entry.value
        return sorted(merged.items(), key=lambda sv: sv[0])

    def fetch_all(self, time_from: int | None = None, time_to: int | None = None) -> list[tuple[Any, int, Any]]:
        below = self.inner.fetch_all(time_from, time_to)
        cached = self._cache.entries_between(time_from, time_to)
        if not cached:
            return below
        merged: dict[Any, dict[int, Any]] = {}
        for key, start, value in below:
            merged.setdefault(key, {})[start] = value
        for (key, start), entry in cached:
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
