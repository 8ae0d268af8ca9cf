"""The record cache (Kafka's CachingKeyValueStore over a ThreadCache): dirty entries, flush order, merged reads,
eviction, the thread-wide budget."""

from __future__ import annotations

import threading
from typing import Any

import orjson
import pytest

from kstream_nb.state import Stores
from kstream_nb.state.caching import CachingKeyValueStore, ThreadCache, caching_layer, entry_size
from kstream_nb.state.changelogging import ChangeLoggingKeyValueStore
from kstream_nb.state.memory import InMemoryKeyValueStore
from kstream_nb.state.store import KeyValueStore, ValueAndTimestamp
from kstream_nb.state.timestamped import TimestampedKeyValueStoreBuilder

Flushed = tuple[Any, Any, Any, int]


def cached_store(context: Any, cache: ThreadCache | None = None) -> tuple[KeyValueStore, list[Flushed]]:
    """A metered -> caching -> change-logging -> in-memory stack with a listener recording what it flushes;
    its part of the record cache is in ``cache`` (a thread's), else in the context's."""
    if cache is not None:
        context.cache = cache
    store = (
        Stores.key_value_store_builder(Stores.in_memory_key_value_store("s"))
        .with_caching_enabled()
        .build("json", "json", None, True)
    )
    store.init(context)
    flushed: list[Flushed] = []
    layer = caching_layer(store)
    assert layer is not None
    layer.set_flush_listener(lambda key, new, old, ts, headers: flushed.append((key, new, old, ts)))
    return store, flushed


def at(context: Any, timestamp: int) -> Any:
    context.timestamp = timestamp
    return context


def changelog(context: Any) -> list[tuple[Any, Any, int]]:
    return [(orjson.loads(k), None if v is None else orjson.loads(v), ts) for _, _, k, v, ts in context.logged]


def test_no_caching_layer_without_a_budget_or_when_disabled(context: Any) -> None:
    enabled = Stores.key_value_store_builder(Stores.in_memory_key_value_store("s")).with_caching_enabled()
    assert caching_layer(enabled.build("json", "json")) is None
    assert caching_layer(enabled.build("json", "json", None, False)) is None
    disabled = Stores.key_value_store_builder(Stores.in_memory_key_value_store("s"))
    assert caching_layer(disabled.build("json", "json", None, True)) is None
    stack = enabled.build("json", "json", None, True)
    assert isinstance(stack.inner, CachingKeyValueStore)  # type: ignore[attr-defined]
    assert isinstance(stack.inner.inner, ChangeLoggingKeyValueStore)  # type: ignore[attr-defined]


def test_flush_writes_latest_value_per_key_in_last_update_order(context: Any) -> None:
    store, flushed = cached_store(context)
    store.put("a", 1)
    at(context, 2)
    store.put("b", 1)
    at(context, 3)
    store.put("a", 2)
    at(context, 4)
    store.put("c", 1)
    at(context, 5)
    assert store.delete("b") == 1
    assert context.logged == [] and flushed == []

    store.flush()
    # b was put and deleted between flushes: nothing to write or forward
    assert flushed == [("a", 2, None, 3), ("c", 1, None, 4)]
    assert changelog(context) == [("a", 2, 3), ("c", 1, 4)]

    flushed.clear()
    context.logged.clear()
    at(context, 6)
    store.put("a", 3)
    at(context, 7)
    store.delete("c")
    at(context, 8)
    store.put("d", 1)
    at(context, 9)
    store.put("a", 4)
    at(context, 10)
    store.flush()
    assert flushed == [("c", None, 1, 7), ("d", 1, None, 8), ("a", 4, 2, 9)]
    assert changelog(context) == [("c", None, 7), ("d", 1, 8), ("a", 4, 9)]
    store.flush()
    assert len(flushed) == 3  # nothing dirty: a second flush writes nothing
    assert dict(store.all()) == {"a": 4, "d": 1}
    assert caching_layer(store).cache.lru.keys() == {"a", "d"}  # type: ignore[union-attr]


def test_reads_merge_the_cache_over_the_store(context: Any) -> None:
    store, _ = cached_store(context)
    for key, value in [("a", 1), ("b", 2), ("c", 3), ("d", 4)]:
        store.put(key, value)
    store.flush()
    store.put("b", 20)
    store.delete("c")
    store.put("e", 5)
    below = caching_layer(store).inner  # type: ignore[union-attr]
    assert dict(below.all()) == {"a": 1, "b": 2, "c": 3, "d": 4}
    assert store.get("b") == 20 and store.get("c") is None and store.get("e") == 5 and store.get("a") == 1
    assert store.all() == [("a", 1), ("b", 20), ("d", 4), ("e", 5)]
    assert store.range("b", "d") == [("b", 20), ("d", 4)]
    assert store.reverse_range("b", "e") == [("e", 5), ("d", 4), ("b", 20)]
    assert store.reverse_all() == [("e", 5), ("d", 4), ("b", 20), ("a", 1)]
    assert store.approximate_num_entries() == 4
    assert "c" not in store and "e" in store
    assert store.put_if_absent("e", 50) == 5 and store.put_if_absent("c", 30) is None
    assert store.get("c") == 30


def test_reads_from_another_thread_see_the_cache_without_touching_it(context: Any) -> None:
    store, _ = cached_store(context)
    store.put("a", 1)
    store.put("b", 2)
    store.flush()
    store.put("a", 10)
    store.delete("b")
    layer = caching_layer(store)
    assert layer is not None
    order = list(layer.cache.lru)
    seen: dict[str, Any] = {}

    def read() -> None:
        seen["a"], seen["b"], seen["all"] = store.get("a"), store.get("b"), store.all()

    reader = threading.Thread(target=read)
    reader.start()
    reader.join()
    assert seen == {"a": 10, "b": None, "all": [("a", 10)]}
    assert list(layer.cache.lru) == order


def test_timestamped_values_and_changelog_timestamps(context: Any) -> None:
    builder = TimestampedKeyValueStoreBuilder(Stores.in_memory_key_value_store("t")).with_caching_enabled()
    store = builder.build("json", "json", None, True)
    store.init(context)
    at(context, 5)
    store.put("k", ValueAndTimestamp("v1", 5))
    at(context, 9)
    store.put("k", ValueAndTimestamp("v2", 7))
    at(context, 12)
    store.flush()
    assert changelog(context) == [("k", "v2", 7)]
    context.logged.clear()
    at(context, 20)
    store.delete("k")
    at(context, 30)
    store.flush()
    assert changelog(context) == [("k", None, 20)]  # the tombstone carries the delete's timestamp


def test_eviction_flushes_every_dirty_entry_evicted_first(context: Any) -> None:
    size = entry_size("a", 1)
    store, flushed = cached_store(context, ThreadCache(3 * size + size // 2))
    layer = caching_layer(store)
    assert layer is not None
    for i, key in enumerate("abc"):
        at(context, i)
        store.put(key, 1)
    assert flushed == [] and layer.cache.size_bytes == 3 * size
    at(context, 3)
    store.put("b", 2)  # b becomes the most recently used and the last dirty key
    at(context, 4)
    store.put("d", 1)  # over budget: evicts a (least recently used, dirty) and so flushes everything
    assert flushed == [("a", 1, None, 0), ("c", 1, None, 2), ("b", 2, None, 3), ("d", 1, None, 4)]
    assert list(layer.cache.lru) == ["c", "b", "d"] and not layer.cache.dirty
    assert changelog(context) == []  # the change-logging layer below holds them until the store flushes

    flushed.clear()
    assert store.get("c") == 1  # a read makes c the most recently used
    store.put("e", 1)  # evicts b: clean, so nothing is flushed
    assert flushed == [] and list(layer.cache.lru) == ["d", "c", "e"]
    assert store.get("a") == 1 and store.get("b") == 2  # evicted entries are read from the store below
    store.flush()
    assert [f[0] for f in flushed] == ["e"]
    assert changelog(context) == [("a", 1, 0), ("c", 1, 2), ("b", 2, 3), ("d", 1, 4), ("e", 1, 4)]
    store.close()


def two_stores(make_context: Any, budget: int) -> tuple[Any, ...]:
    """Two tasks' cached stores on one thread cache: each store, what it flushed, and its cache."""
    thread = ThreadCache(budget)
    first, flushed_first = cached_store(make_context(partition=0), thread)
    second, flushed_second = cached_store(make_context(partition=1), thread)
    cache_first = caching_layer(first).cache  # type: ignore[union-attr]
    cache_second = caching_layer(second).cache  # type: ignore[union-attr]
    return first, flushed_first, cache_first, second, flushed_second, cache_second


def test_the_thread_budget_is_shared_and_eviction_hits_the_store_written(make_context: Any) -> None:
    size = entry_size("a", 1)
    budget = 3 * size + size // 2 + 1
    first, flushed_first, cache_first, second, flushed_second, cache_second = two_stores(make_context, budget)
    assert cache_first.thread is cache_second.thread
    for key in "abc":
        first.put(key, 1)
    second.put("x", 1)  # over the shared budget: the store written evicts its own (only) entry
    assert flushed_second == [("x", 1, None, 0)] and flushed_first == []
    assert len(cache_first) == 3 and len(cache_second) == 0
    assert cache_first.thread.size_bytes == 3 * size
    first.close()
    assert cache_second.thread.size_bytes == 0
    assert flushed_first == [("a", 1, None, 0), ("b", 1, None, 0), ("c", 1, None, 0)]  # close flushes
    second.close()


def test_clean_entries_of_other_stores_go_before_a_flush_of_the_store_written(make_context: Any) -> None:
    """A store whose next entry to evict is dirty frees clean (already stored) entries of the thread's other
    stores first instead of flushing: the pattern of tasks whose caches hold old, closed windows."""
    size = entry_size("a", 1)
    budget = 3 * size + size // 2 + 2
    first, flushed_first, cache_first, second, flushed_second, cache_second = two_stores(make_context, budget)
    for key in "abc":
        first.put(key, 1)
    first.flush()  # a commit: a, b and c are in the store below, clean in the cache
    flushed_first.clear()
    second.put("x", 1)
    second.put("y", 1)  # over budget twice: a and b leave the first cache, x and y stay dirty
    assert flushed_second == [] and flushed_first == []
    assert list(cache_first.lru) == ["c"] and list(cache_second.dirty) == ["x", "y"]
    assert first.get("a") == 1  # read from the store below
    first.put("d", 1)
    second.put("z", 1)  # the first cache's head (d) is dirty: the store written flushes, as Kafka does
    assert flushed_second == [("x", 1, None, 0), ("y", 1, None, 0), ("z", 1, None, 0)] and flushed_first == []
    first.close()
    second.close()


def test_a_cached_store_takes_its_part_of_the_context_cache_at_init(make_context: Any) -> None:
    """The record cache comes with the context (a stream thread's); a store initialized again on the same
    thread's cache (a warm standby's store going active) keeps its part and its entries."""
    thread = ThreadCache(100_000)
    store, _ = cached_store(make_context(), thread)
    part = caching_layer(store).cache  # type: ignore[union-attr]
    assert part.thread is thread and thread.caches == [part]
    store.put("a", 1)
    store.init(make_context(partition=1, cache=thread))
    assert caching_layer(store).cache is part and store.get("a") == 1  # type: ignore[union-attr]
    store.close()
    assert thread.caches == [] and thread.size_bytes == 0


def test_an_uninitialized_cached_store_refuses_writes() -> None:
    from kstream_nb.errors import IllegalStateError

    layer = CachingKeyValueStore(InMemoryKeyValueStore("s"))
    with pytest.raises(IllegalStateError):
        layer.put("a", 1)


def test_a_persistent_backend_merges_in_serialized_key_order(make_context: Any, tmp_path: Any) -> None:
    context = make_context(state_dir=str(tmp_path))
    store = (
        Stores.key_value_store_builder(Stores.persistent_key_value_store("p"))
        .with_caching_enabled()
        .build("json", "json", None, True)
    )
    store.init(context)
    store.put(9, "nine")
    store.flush()
    store.put(10, "ten")
    store.put(100, "hundred")
    assert [k for k, _ in store.all()] == [10, 100, 9]  # RocksDB's byte order: b"10" < b"100" < b"9"
    assert store.range(10, 9) == [(10, "ten"), (100, "hundred"), (9, "nine")]
    store.flush()
    assert [k for k, _ in store.all()] == [10, 100, 9]
    store.close()
