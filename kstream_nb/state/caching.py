"""The record cache of a key-value store stack: Kafka Streams' ThreadCache, NamedCache and CachingKeyValueStore.

Writes land in the cache as dirty entries; they reach the layers below (change-logging, backend) only when
the store is flushed (at every commit) or when the thread's cache goes over its byte budget and evicts.
So the changelog, and through the flush listener the processors downstream of an aggregation or a table,
see the latest value per key per commit instead of every update.
"""

from __future__ import annotations

import sys
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from kstream_nb.cluster.records import Headers
from kstream_nb.errors import IllegalStateError
from kstream_nb.state.store import (
    DelegatingStoreContext,
    KeyOrder,
    KeyValue,
    KeyValueStore,
    StateStore,
    StateStoreContext,
    ValueAndTimestamp,
    WrappedKeyValueStore,
    json_order,
    sort_entries,
)

#: Called for each flushed entry: key, new value, old value (the store's below the cache before this
#: write), and the timestamp and headers of the key's last update (Kafka's CacheFlushListener).
CacheFlushListener = Callable[[Any, Any, Any, int, Headers], None]

#: Bytes counted per entry beyond its key and value: the LRU node, dict slots and the entry object.
ENTRY_OVERHEAD = 120
_TIMESTAMP_SIZE = 32
_getsizeof = sys.getsizeof


def entry_size(key: Any, value: Any) -> int:
    """A cheap estimate of an entry's size: ``sys.getsizeof`` of key and value (not deep) plus overhead."""
    if type(value) is ValueAndTimestamp:
        return _getsizeof(key) + _getsizeof(value.value) + _TIMESTAMP_SIZE + ENTRY_OVERHEAD
    return _getsizeof(key) + _getsizeof(value) + ENTRY_OVERHEAD


class LRUCacheEntry:
    """A cached value with the timestamp and headers of its last update; dirty until flushed below."""

    __slots__ = ("dirty", "headers", "size", "timestamp", "value")

    def __init__(self, value: Any, dirty: bool, timestamp: int, headers: Headers, size: int) -> None:
        self.value = value
        self.dirty = dirty
        self.timestamp = timestamp
        self.headers = headers
        self.size = size

    def __repr__(self) -> str:
        return f"LRUCacheEntry({self.value!r}, dirty={self.dirty}, timestamp={self.timestamp})"


class ThreadCache:
    """One stream thread's record cache: a byte budget shared by the cached stores of its tasks.

    Each store has its own ``NamedCache``; a put that takes the thread over budget evicts least-recently
    used entries of the store being written (as Kafka's ``ThreadCache.maybeEvict``). One difference: when
    that store's next entry to go is dirty, clean entries at the head of the thread's other caches go
    first, as they are already in their stores. Otherwise a task whose cache has shrunk to the entries it
    is writing flushes at every put while other tasks' caches hold old windows nobody reads.
    """

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.size_bytes = 0
        self.caches: list[NamedCache] = []

    def named_cache(self, name: str) -> NamedCache:
        """A new store's part of this cache."""
        cache = NamedCache(name, self)
        self.caches.append(cache)
        return cache

    def maybe_evict(self, cache: NamedCache) -> None:
        """Evicts until the thread is within budget or ``cache`` is empty (see the class docstring)."""
        while self.size_bytes > self.max_bytes and cache.lru:
            if cache.next_eviction_dirty() and self._evict_clean_elsewhere(cache):
                continue
            cache.evict()

    def _evict_clean_elsewhere(self, writing: NamedCache) -> bool:
        """Evicts the clean least-recently-used entries of the other caches while over budget; True if any."""
        evicted = False
        for other in self.caches:
            if other is writing:
                continue
            while self.size_bytes > self.max_bytes and other.lru and not other.next_eviction_dirty():
                other.evict()
                evicted = True
            if self.size_bytes <= self.max_bytes:
                break
        return evicted

    def __repr__(self) -> str:
        return f"ThreadCache(size_bytes={self.size_bytes}, max_bytes={self.max_bytes})"


class NamedCache:
    """One store's entries: in least-recently-used order, and dirty keys in the order of their last update.

    A dirty key is removed and added again on each update (Kafka's NamedCache), so a flush writes the keys
    in the order their last records arrived. ``flushing`` holds the entries being written below during a
    flush, so that readers on other threads never see the store below before it has them.
    """

    def __init__(self, name: str, thread: ThreadCache) -> None:
        self.name = name
        self.thread = thread
        self.lru: OrderedDict[Any, LRUCacheEntry] = OrderedDict()
        self.dirty: dict[Any, None] = {}
        self.flushing: dict[Any, LRUCacheEntry] = {}
        self.size_bytes = 0
        #: receives the flushed (key, entry) pairs in order; set by the caching store
        self.listener: Callable[[list[tuple[Any, LRUCacheEntry]]], None] | None = None

    def __len__(self) -> int:
        return len(self.lru)

    def get(self, key: Any) -> LRUCacheEntry | None:
        """The entry of ``key``, made the most recently used."""
        lru = self.lru
        entry = lru.get(key)
        if entry is not None:
            lru.move_to_end(key)
        return entry

    def put(self, key: Any, entry: LRUCacheEntry) -> None:
        """Adds or replaces the entry of ``key`` (most recently used), then evicts if over budget."""
        lru = self.lru
        old = lru.get(key)
        lru[key] = entry
        if old is not None:
            lru.move_to_end(key)
            delta = entry.size - old.size
        else:
            delta = entry.size
        if entry.dirty:
            dirty = self.dirty
            dirty.pop(key, None)
            dirty[key] = None
        self.size_bytes += delta
        thread = self.thread
        thread.size_bytes += delta
        if thread.size_bytes > thread.max_bytes:
            thread.maybe_evict(self)

    def next_eviction_dirty(self) -> bool:
        """Whether the least recently used entry (the next to evict; the cache is not empty) is dirty."""
        return next(iter(self.lru.values())).dirty

    def evict(self) -> None:
        """Drops the least recently used entry; a dirty one is flushed with every other dirty entry first."""
        lru = self.lru
        key = next(iter(lru))
        entry = lru[key]
        if entry.dirty:
            self.flushing = {key: entry}  # visible to readers on other threads until it is written below
        del lru[key]
        self._resize(-entry.size)
        if entry.dirty:
            self.flush((key, entry))

    def flush(self, evicted: tuple[Any, LRUCacheEntry] | None = None) -> None:
        """Hands the dirty entries (an evicted one first) to the listener in order and marks them clean.

        Flushed tombstones leave the cache afterwards. The dirty set is emptied before the listener runs,
        as the listener may write to this cache again.
        """
        entries: list[tuple[Any, LRUCacheEntry]] = []
        if evicted is not None:
            entries.append(evicted)
            self.dirty.pop(evicted[0], None)
        if not entries and not self.dirty:
            return
        lru = self.lru
        deleted = []
        for key in self.dirty:
            entry = lru[key]
            entries.append((key, entry))
            if entry.value is None:
                deleted.append(key)
        self.flushing = dict(entries)
        self.dirty = {}
        for _, entry in entries:
            entry.dirty = False
        try:
            if self.listener is None:
                raise IllegalStateError(f"cache {self.name!r} has dirty entries but no flush listener")
            self.listener(entries)
        finally:
            self.flushing = {}
        for key in deleted:
            tombstone = lru.get(key)
            if tombstone is not None and tombstone.value is None and not tombstone.dirty:
                del lru[key]
                self._resize(-tombstone.size)

    def pending(self) -> dict[Any, LRUCacheEntry]:
        """The entries not (yet) in the store below: dirty ones and those being flushed (any thread)."""
        while True:  # dirty keys first: a flush publishes ``flushing`` before it empties ``dirty``
            try:
                keys = list(self.dirty)
                break
            except RuntimeError:  # resized by the stream thread meanwhile
                continue
        flushing = self.flushing
        if not keys and not flushing:
            return {}
        out = dict(flushing)
        get = self.lru.get
        for key in keys:
            entry = get(key)
            if entry is not None:
                out[key] = entry
        return out

    def close(self) -> None:
        """Drops every entry and gives the bytes back to the thread; later writes pass straight through."""
        self.lru.clear()
        self.dirty = {}
        self.flushing = {}
        self.thread.size_bytes -= self.size_bytes
        if self in self.thread.caches:
            self.thread.caches.remove(self)
        self.size_bytes = 0
        self.thread = ThreadCache(0)

    def _resize(self, delta: int) -> None:
        self.size_bytes += delta
        self.thread.size_bytes += delta

    def __repr__(self) -> str:
        return f"NamedCache({self.name!r}, entries={len(self.lru)}, dirty={len(self.dirty)})"


class CachingLayer:
    """What the key-value and window caching layers share: their part of the thread cache, the flush
    listener, and the timestamp of the entry being flushed (what the layers below see as current)."""

    inner: Any
    _cache: NamedCache
    _flush_listener: CacheFlushListener | None = None
    _flush_timestamp: int | None = None
    #: the context of ``init`` (None before), and the thread that ran it: the one that changes the cache
    _context: StateStoreContext | None
    _owner: int

    def _start_cache(self) -> None:
        """What a layer holds before ``init``: a part of an empty cache, no context, no owner thread."""
        self._cache = self._named_cache(ThreadCache(0))  # until init takes the context's
        self._context = None
        self._owner = -1

    def init(self, context: StateStoreContext, root: StateStore | None = None) -> None:
        """Takes the context's record cache, then opens the store below under a ``CacheFlushContext``."""
        self._take_cache(context)
        self._context = context
        self._owner = threading.get_ident()
        self.inner.init(CacheFlushContext(context, self), root if root is not None else self)

    def _initialized_context(self) -> StateStoreContext:
        """The context of ``init``, which a write needs (its timestamp and headers)."""
        context = self._context
        if context is None:
            raise IllegalStateError(f"store {self.inner.name!r} is not initialized: call init(context) first")
        return context

    @property
    def cache(self) -> NamedCache:
        """This store's part of the thread cache."""
        return self._cache

    def _named_cache(self, thread: ThreadCache) -> NamedCache:
        """A new part of ``thread`` for this store (the window and session layers index theirs)."""
        return thread.named_cache(self.inner.name)

    def _write_flushed(self, entries: list[tuple[Any, LRUCacheEntry]]) -> None:
        """Writes flushed entries below and tells the flush listener (each layer's own)."""
        raise NotImplementedError

    def _take_cache(self, context: StateStoreContext) -> None:
        """Takes this store's part of the record cache the context carries (its stream thread's, as Kafka's
        caching stores take ``context.cache()``); a store initialized again on that thread keeps its part."""
        thread = getattr(context, "cache", None)
        if not isinstance(thread, ThreadCache):
            raise IllegalStateError(f"store {self.inner.name!r} is cached but its context has no record cache")
        if self._cache.thread is thread:
            return
        self._cache.flush()
        self._cache.close()
        self._cache = self._named_cache(thread)
        self._cache.listener = self._write_flushed

    def set_flush_listener(self, listener: CacheFlushListener | None) -> None:
        """Calls ``listener(key, new, old, timestamp, headers)`` for each entry a flush writes below."""
        self._flush_listener = listener

    def flush(self) -> None:
        """Writes the dirty entries below (last-update order, calling the flush listener), then flushes below."""
        self._cache.flush()
        self.inner.flush()

    def close(self) -> None:
        """Flushes the cache (as Kafka does), then frees it and closes the store below, even if the flush fails."""
        try:
            if self.inner.is_open:
                self._cache.flush()
        finally:
            self._cache.close()
            self.inner.close()


class CacheFlushContext(DelegatingStoreContext):
    """The context the layers below the cache see: while an entry is flushed, its timestamp is the current one.

    So the changelog record of a flushed write carries the timestamp of the update that made it (Kafka sets
    the entry's record context during the write).
    """

    def __init__(self, context: StateStoreContext, store: CachingLayer) -> None:
        super().__init__(context)
        self._store = store

    @property
    def timestamp(self) -> int:
        flushed = self._store._flush_timestamp
        return self._context.timestamp if flushed is None else flushed


class CachingKeyValueStore(WrappedKeyValueStore, CachingLayer):
    """Kafka's CachingKeyValueStore: buffers writes in the thread's record cache until a flush or eviction.

    Reads see the cache over the store below (a cached tombstone hides the key). A flush writes the dirty
    entries below in last-update order and calls the flush listener for each one that is not a delete of
    an absent key. Only the thread that initialized the store changes the cache; reads from other threads
    (interactive queries) only look. ``key_order`` is the backend's scan order when it is not Python's
    (RocksDB's: the serialized key bytes).
    """

    def __init__(self, inner: KeyValueStore, key_order: KeyOrder | None = None) -> None:
        super().__init__(inner)
        self._start_cache()
        self._key_order = key_order
        #: a persistent backend is read through the cache (a hit saves a read and a decode)
        self._read_through = inner.persistent

    init = CachingLayer.init

    # ---- writes ---------------------------------------------------------------------------------

    def put(self, key: Any, value: Any) -> None:
        if key is None:
            raise ValueError(f"store {self.name!r}: keys cannot be None")
        context = self._initialized_context()
        entry = LRUCacheEntry(
            value, True, context.timestamp, getattr(context, "headers", ()), entry_size(key, value)
        )
        self._cache.put(key, entry)

    # through the cache, not forwarded to the wrapped store
    put_if_absent = KeyValueStore.put_if_absent
    put_all = KeyValueStore.put_all

    def delete(self, key: Any) -> Any:
        old = self.get(key)
        self.put(key, None)
        return old

    def _write_flushed(self, entries: list[tuple[Any, LRUCacheEntry]]) -> None:
        """Writes flushed entries below (with their own timestamps) and tells the flush listener."""
        inner = self.inner
        listener = self._flush_listener
        for key, entry in entries:
            new = entry.value
            old = inner.get(key) if listener is not None or new is None else None
            if new is None and old is None:
                continue  # a delete of a key the store below never had: nothing to write or forward
            self._flush_timestamp = entry.timestamp
            try:
                inner.put(key, new)
            finally:
                self._flush_timestamp = None
            if listener is not None:
                listener(key, new, old, entry.timestamp, entry.headers)

    # ---- reads ----------------------------------------------------------------------------------

    def get(self, key: Any) -> Any:
        if threading.get_ident() != self._owner:
            return self._peek(key)
        cache = self._cache
        entry = cache.get(key)
        if entry is not None:
            return entry.value
        value = self.inner.get(key)
        if value is not None and self._read_through:
            context = self._context
            timestamp = context.timestamp if context is not None else -1
            cache.put(key, LRUCacheEntry(value, False, timestamp, (), entry_size(key, value)))
        return value

    def _peek(self, key: Any) -> Any:
        """A read from another thread: the cache's entry (or the one being flushed), else the store's."""
        cache = self._cache
        entry = cache.lru.get(key)
        if entry is None:
            entry = cache.flushing.get(key)
        return self.inner.get(key) if entry is None else entry.value

    def range(self, from_key: Any = None, to_key: Any = None) -> list[KeyValue]:
        pending = self._cache.pending()
        below = self.inner.range(from_key, to_key)
        if not pending:
            return below
        return self._merge(below, pending, from_key, to_key)

    def reverse_range(self, from_key: Any = None, to_key: Any = None) -> list[KeyValue]:
        if not self._cache.pending():
            return self.inner.reverse_range(from_key, to_key)
        return self.range(from_key, to_key)[::-1]

    def all(self) -> list[KeyValue]:
        return self.range()

    def reverse_all(self) -> list[KeyValue]:
        return self.reverse_range()

    def approximate_num_entries(self) -> int:
        count = self.inner.approximate_num_entries()
        get = self.inner.get
        for key, entry in self._cache.pending().items():
            present = get(key) is not None
            if entry.value is None:
                count -= present
            elif not present:
                count += 1
        return count

    def _merge(
        self, below: list[KeyValue], pending: dict[Any, LRUCacheEntry], from_key: Any, to_key: Any
    ) -> list[KeyValue]:
        """The store's entries in range with the pending cache entries over them, in the store's order."""
        merged = dict(below)
        within = self._within
        for key, entry in pending.items():
            if within(key, from_key, to_key):
                if entry.value is None:
                    merged.pop(key, None)
                else:
                    merged[key] = entry.value
        entries = [KeyValue(k, v) for k, v in merged.items()]
        order = self._key_order
        if order is None:
            return sort_entries(entries)
        entries.sort(key=lambda kv: order(kv.key))
        return entries

    def _within(self, key: Any, from_key: Any, to_key: Any) -> bool:
        order = self._key_order
        if order is not None:
            k = order(key)
            return (from_key is None or order(from_key) <= k) and (to_key is None or k <= order(to_key))
        try:
            return (from_key is None or from_key <= key) and (to_key is None or key <= to_key)
        except TypeError:
            k = json_order(key)
            return (from_key is None or json_order(from_key) <= k) and (to_key is None or k <= json_order(to_key))

    # the cache's, not WrappedKeyValueStore's pass-through
    flush = CachingLayer.flush
    close = CachingLayer.close

    def __repr__(self) -> str:
        return f"CachingKeyValueStore({self.inner!r}, {self._cache!r})"


def caching_layer(store: Any) -> CachingLayer | None:
    """The caching layer of a store stack (walking ``inner`` from the outermost layer), or None."""
    while store is not None:
        if isinstance(store, CachingLayer):
            return store
        store = getattr(store, "inner", None)
    return None
