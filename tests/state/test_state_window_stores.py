"""Window and session stores, each test run on both backends (in memory and RocksDB) with the same results."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from rocksdict import Options, Rdict

from kstream_nb.cluster.serde_specs import serde_from
from kstream_nb.errors import StreamsError
from kstream_nb.state.builders import SessionStoreBuilder, Stores, WindowStoreBuilder
from kstream_nb.state.caching import caching_layer
from kstream_nb.state.rocksdb_window import RocksDBSessionStore, RocksDBWindowStore
from kstream_nb.state.store import ValueAndTimestamp
from kstream_nb.state.window_store import (
    ChangeLoggingSessionStore,
    ChangeLoggingWindowStore,
    InMemorySessionStore,
    InMemoryWindowStore,
)
from tests.helpers import backend

BACKENDS = ["in_memory", "rocksdb"]


@pytest.fixture(params=BACKENDS)
def persistent(request: pytest.FixtureRequest) -> bool:
    return bool(request.param == "rocksdb")


@pytest.fixture
def open_stores(tmp_path: Path, make_context: Any) -> Any:
    """Builds and inits store stacks under one state_dir; closes them after the test."""
    opened: list[Any] = []

    def build(builder: Any, context: Any = None) -> Any:
        store = builder.build("json", "json")
        store.init(context or make_context(state_dir=str(tmp_path)))
        opened.append(store)
        return store

    yield build
    for store in opened:
        store.close()


def window_store(persistent: bool, open_stores: Any, retention: int = 20, size: int = 10,
                 duplicates: bool = False, timestamped: bool = False, logging: bool = False) -> Any:  # fmt: skip
    factory = Stores.persistent_window_store if persistent else Stores.in_memory_window_store
    supplier = factory("w", retention, size, duplicates)
    make = Stores.timestamped_window_store_builder if timestamped else Stores.window_store_builder
    builder = make(supplier, "json", "json")
    return open_stores(builder if logging else builder.with_logging_disabled())


def session_store(persistent: bool, open_stores: Any, retention: int = 20, logging: bool = False) -> Any:
    factory = Stores.persistent_session_store if persistent else Stores.in_memory_session_store
    builder = Stores.session_store_builder(factory("s", retention), "json", "json")
    return open_stores(builder if logging else builder.with_logging_disabled())


# ---- window stores ------------------------------------------------------------------------------


def test_a_cached_window_store_reads_through_its_cache_and_writes_below_on_flush(
    persistent: bool, tmp_path: Path, make_context: Any
) -> None:
    """Kafka's CachingWindowStore over either backend: reads merge the cache over the store (a cached
    delete hides a window), a flush writes the dirty windows below in last-update order, each logged once
    with the timestamp of its last update, and tells the flush listener (window, new, old)."""
    supplier = (Stores.persistent_window_store if persistent else Stores.in_memory_window_store)("w", 1_000, 10)
    builder = Stores.window_store_builder(supplier, "json", "json").with_caching_enabled()
    store = builder.build("json", "json", None, True)
    context = make_context(state_dir=str(tmp_path))
    store.init(context)
    flushed: list[tuple[Any, ...]] = []
    store.set_flush_listener(lambda window, new, old, ts, headers: flushed.append((window, new, old, ts)))
    try:
        for key, value, start, ts in [("b", 1, 0, 5), ("a", 1, 10, 6), ("b", 2, 0, 7)]:
            context.timestamp = ts
            store.put(key, value, start)
        store.flush()
        assert flushed == [(("a", 10), 1, None, 6), (("b", 0), 2, None, 7)]
        assert [(json.loads(v), ts) for _, _, _, v, ts in context.logged] == [(1, 6), (2, 7)]

        context.timestamp = 8
        store.put("b", 3, 0)
        store.put("b", 1, 20)
        store.put("a", None, 10)
        assert store.fetch("b", 0) == 3 and store.fetch("a", 10) is None
        assert store.fetch_range("b", 0, 100) == [(0, 3), (20, 1)]
        assert store.all() == [("b", 0, 3), ("b", 20, 1)]
        assert store.fetch_all(10, 20) == [("b", 20, 1)]
        assert store.approximate_num_entries() == 2
        below = caching_layer(store).inner  # type: ignore[union-attr]
        assert below.fetch("b", 0) == 2 and below.fetch("a", 10) == 1  # not yet written below the cache
        store.flush()
        assert flushed[2:] == [(("b", 0), 3, 2, 8), (("b", 20), 1, None, 8), (("a", 10), None, 1, 8)]
        assert below.all() == [("b", 0, 3), ("b", 20, 1)]
        assert store.metrics()["put_total"] == 6 and store.metrics()["scope"].endswith("-window")
    finally:
        store.close()


def test_window_put_fetch_and_scans_in_natural_key_order(persistent: bool, open_stores: Any) -> None:
    store = window_store(persistent, open_stores, retention=1_000, size=10)
    for key, value, start in [(10, "a", 0), (9, "b", 10), (1, "c", 0), (10, "d", 20)]:
        store.put(key, value, start)
    assert type(backend(store)) is (RocksDBWindowStore if persistent else InMemoryWindowStore)
    assert store.fetch(10, 0) == "a" and store.fetch(10, 10) is None and store.fetch(2, 0) is None
    # 1's JSON bytes are a prefix of 10's: the scan of 1 must not see 10's windows
    assert store.fetch_range(1, 0, 100) == [(0, "c")]
    assert store.fetch_range(10, 0, 100) == [(0, "a"), (20, "d")]
    assert store.fetch_range(10, 1, 20) == [(20, "d")]
    # keys in natural order (9 < 10, unlike their bytes) as in memory, then by window start
    assert store.all() == [(1, 0, "c"), (9, 10, "b"), (10, 0, "a"), (10, 20, "d")]
    assert store.fetch_all(10, 20) == [(9, 10, "b"), (10, 20, "d")]
    assert store.approximate_num_entries() == 4
    store.put(10, None, 0)  # None deletes
    assert store.fetch(10, 0) is None
    assert store.fetch_range(10, 0, 100) == [(20, "d")]
    assert store.approximate_num_entries() == 3
    frame = store.to_pandas()
    assert list(frame.columns) == ["key", "start", "end", "value"]
    assert frame.values.tolist() == [[1, 0, 10, "c"], [9, 10, 20, "b"], [10, 20, 30, "d"]]


def test_window_retention_drops_old_windows(persistent: bool, open_stores: Any) -> None:
    store = window_store(persistent, open_stores, retention=20, size=10)
    store.put("k", 1, 0)
    store.put("k", 2, 10)
    assert store.fetch("k", 0) == 1
    store.put("k", 3, 20)  # stream time 20: start 0 <= 20 - 20 expires
    assert store.fetch("k", 0) is None
    assert store.fetch("k", 10) == 2
    store.put("k", 4, 0)  # too old to be stored at all
    assert store.fetch("k", 0) is None
    assert store.fetch_range("k", 0, 100) == [(10, 2), (20, 3)]
    assert store.all() == [("k", 10, 2), ("k", 20, 3)]
    assert store.approximate_num_entries() == 2
    assert store.observed_stream_time == 20


def test_window_duplicates_are_all_kept_in_put_order(persistent: bool, open_stores: Any) -> None:
    store = window_store(persistent, open_stores, retention=100, size=0, duplicates=True)
    store.put("k", "a", 5)
    store.put("k", "b", 5)
    store.put("k", "c", 3)
    store.put("j", "d", 5)
    store.put("k", None, 5)  # a None value is not stored and deletes nothing with duplicates
    assert store.seq == 4
    assert store.fetch("k", 5) == ["a", "b"]
    assert store.fetch("k", 4) is None
    assert store.fetch_range("k", 0, 10) == [(3, "c"), (5, "a"), (5, "b")]
    assert store.fetch_all() == [("j", 5, "d"), ("k", 3, "c"), ("k", 5, "a"), ("k", 5, "b")]
    assert store.approximate_num_entries() == 4


def test_timestamped_window_values(persistent: bool, open_stores: Any) -> None:
    store = window_store(persistent, open_stores, retention=100, timestamped=True)
    store.put("k", ValueAndTimestamp({"n": 1}, 7), 0)
    assert store.fetch("k", 0) == ValueAndTimestamp({"n": 1}, 7)
    assert store.fetch_range("k", 0, 0) == [(0, ValueAndTimestamp({"n": 1}, 7))]


def test_window_changelog_bytes_and_restore_across_backends(
    persistent: bool, open_stores: Any, make_context: Any, tmp_path: Path
) -> None:
    """Both backends log the same records, and each restores what either logged."""
    store = window_store(persistent, open_stores, retention=100, timestamped=True, logging=True)
    assert isinstance(store.inner, ChangeLoggingWindowStore)  # below the metering layer
    context = store._context
    store.put("k", ValueAndTimestamp(5, 3), 0)
    store.put("k", ValueAndTimestamp(1, 7), 0)
    store.put("k", ValueAndTimestamp(2, 9), 10)
    assert context.logged == []  # held until the flush: the latest per key and window
    store.flush()
    assert context.logged == [
        ("app-w-changelog", 0, b'"k"' + bytes(8), b"1", 7),
        ("app-w-changelog", 0, b'"k"' + (10).to_bytes(8, "big"), b"2", 9),
    ]
    assert context.registered == [(store, store._restore, "app-w-changelog")]
    for target_persistent in (False, True):
        other = make_context(state_dir=str(tmp_path / f"restore-{target_persistent}"))
        copy = window_store(target_persistent, lambda b, c=other: open_stores(b, c), retention=100,
                            timestamped=True, logging=True)  # fmt: skip
        restore = other.registered[0][1]
        restore([(k, v, ts) for _, _, k, v, ts in context.logged] + [(b'"k"' + bytes(8), None, 11)])
        assert copy.all() == [("k", 10, ValueAndTimestamp(2, 9))]
        assert other.logged == []  # restoring does not log again


def test_duplicate_changelog_keys_carry_the_sequence_number(
    persistent: bool, open_stores: Any, make_context: Any, tmp_path: Path
) -> None:
    store = window_store(persistent, open_stores, retention=100, size=0, duplicates=True, logging=True)
    store.put("k", "a", 5)
    store.put("k", "b", 5)
    logged = store._context.logged
    assert [k for _, _, k, _, _ in logged] == [
        b'"k"' + (5).to_bytes(8, "big") + (1).to_bytes(4, "big"),
        b'"k"' + (5).to_bytes(8, "big") + (2).to_bytes(4, "big"),
    ]
    other = make_context(state_dir=str(tmp_path / "copy"))
    copy = window_store(persistent, lambda b: open_stores(b, other), retention=100, size=0, duplicates=True,
                        logging=True)  # fmt: skip
    other.registered[0][1]([(k, v, ts) for _, _, k, v, ts in logged])
    assert copy.fetch("k", 5) == ["a", "b"]
    copy.put("k", "c", 5)  # the restored sequence numbers are not reused
    assert copy.fetch("k", 5) == ["a", "b", "c"]


# ---- session stores -----------------------------------------------------------------------------


def test_session_put_find_fetch_remove(persistent: bool, open_stores: Any) -> None:
    store = session_store(persistent, open_stores, retention=1_000)
    assert type(backend(store)) is (RocksDBSessionStore if persistent else InMemorySessionStore)
    store.put("k", 10, 20, 2)
    store.put("k", 0, 5, 1)
    store.put("k", 30, 30, 3)
    store.put("j", 3, 3, 4)
    store.put(1, 0, 0, 5)
    store.put(10, 0, 0, 6)
    assert store.find_sessions("k", 4, 25) == [(0, 5, 1), (10, 20, 2)]
    assert store.find_sessions("k", 6, 40) == [(10, 20, 2), (30, 30, 3)]
    assert store.find_sessions("k", 31, 100) == []
    assert store.find_sessions(1, 0, 100) == [(0, 0, 5)]
    assert store.fetch_session("k", 10, 20) == 2 and store.fetch_session("k", 10, 21) is None
    assert store.all() == [
        ("j", 3, 3, 4), ("k", 0, 5, 1), ("k", 10, 20, 2), ("k", 30, 30, 3), (1, 0, 0, 5), (10, 0, 0, 6),
    ]  # fmt: skip
    store.remove("k", 10, 20)
    assert store.fetch_session("k", 10, 20) is None
    assert store.find_sessions("k", 0, 100) == [(0, 5, 1), (30, 30, 3)]
    assert store.approximate_num_entries() == 5
    assert store.to_pandas().values.tolist()[0] == ["j", 3, 3, 4]


def test_session_retention(persistent: bool, open_stores: Any) -> None:
    store = session_store(persistent, open_stores, retention=20)
    store.put("k", 0, 5, 1)
    store.put("k", 10, 15, 2)
    store.put("k", 25, 25, 3)  # stream time 25: ends <= 5 expire
    assert store.find_sessions("k", 0, 100) == [(10, 15, 2), (25, 25, 3)]
    store.put("k", 1, 4, 9)  # too old to be stored
    assert store.fetch_session("k", 1, 4) is None
    assert store.all() == [("k", 10, 15, 2), ("k", 25, 25, 3)]
    assert store.approximate_num_entries() == 2


def test_session_changelog_restores_across_backends(
    persistent: bool, open_stores: Any, make_context: Any, tmp_path: Path
) -> None:
    store = session_store(persistent, open_stores, retention=100, logging=True)
    assert isinstance(store.inner, ChangeLoggingSessionStore)
    store.put("k", 0, 5, 1)
    store.put("k", 0, 9, 2)
    store.remove("k", 0, 5)
    logged = store._context.logged
    assert logged == []  # held until the flush: the latest per key and session
    store.flush()
    assert [(k, v) for _, _, k, v, _ in logged] == [
        (b'"k"' + (5).to_bytes(8, "big") + bytes(8), None),
        (b'"k"' + (9).to_bytes(8, "big") + bytes(8), b"2"),
    ]
    for target_persistent in (False, True):
        other = make_context(state_dir=str(tmp_path / f"restore-{target_persistent}"))
        copy = session_store(target_persistent, lambda b, c=other: open_stores(b, c), retention=100, logging=True)
        other.registered[0][1]([(k, v, ts) for _, _, k, v, ts in logged])
        assert copy.all() == [("k", 0, 9, 2)]


# ---- RocksDB only: what survives a restart, segments -------------------------------------------


def test_rocksdb_window_store_survives_reopen(tmp_path: Path, make_context: Any) -> None:
    context = make_context(state_dir=str(tmp_path))
    builder = Stores.window_store_builder(Stores.persistent_window_store("w", 200_000, 10, True), "json", "json")
    store = builder.build()
    store.init(context)
    store.put("k", "a", 0)
    store.put("k", "b", 0)
    store.put("k", "c", 150_000)  # stream time 150000: nothing expired yet (retention 200000)
    store.close()

    again = builder.build()
    again.init(context)
    assert again.observed_stream_time == 150_000
    assert again.fetch("k", 0) == ["a", "b"]
    again.put("k", "d", 0)  # the sequence number continues: no duplicate is overwritten
    assert again.fetch("k", 0) == ["a", "b", "d"]
    path = again.path
    assert path == tmp_path / "app" / "0_0" / "rocksdb" / "w"
    again.close()


def test_rocksdb_expiry_drops_whole_segments(tmp_path: Path, make_context: Any) -> None:
    """Segments are max(retention / 2, 60 s) of window start; a segment goes once all of it expired."""
    context = make_context(state_dir=str(tmp_path))
    store = RocksDBWindowStore("w", retention_ms=240_000, window_size_ms=10)
    store.use_serdes(serde_from("json"), serde_from("json"), timestamped=False)
    store.init(context)
    assert store.segment_interval_ms == 120_000
    for start in (0, 119_999, 120_000, 240_000):
        store.put("k", start, start)
    assert sorted(i for i, _ in store.segments.all()) == [0, 1, 2]  # type: ignore[union-attr]
    store.put("k", 360_000, 360_000)  # expired: starts <= 120000; segment 0 [0, 120000) goes entirely
    assert sorted(i for i, _ in store.segments.all()) == [1, 2, 3]  # type: ignore[union-attr]
    assert store.fetch_range("k", 0, 10**6) == [(240_000, 240_000), (360_000, 360_000)]  # 120000 skipped
    store.close()
    families = Rdict.list_cf(str(tmp_path / "app" / "0_0" / "rocksdb" / "w"), Options(raw_mode=True))
    assert sorted(families) == ["default", "segment-120000", "segment-240000", "segment-360000"]


def test_rocksdb_session_store_survives_reopen(tmp_path: Path, make_context: Any) -> None:
    context = make_context(state_dir=str(tmp_path))
    builder = Stores.session_store_builder(Stores.persistent_session_store("s", 100), "json", "json")
    store = builder.build()
    store.init(context)
    store.put("k", 0, 5, 1)
    store.put("k", 100, 110, 2)  # stream time 110: the session ending at 5 expires
    store.close()
    again = builder.build()
    again.init(context)
    assert again.all() == [("k", 100, 110, 2)]
    assert again.find_sessions("k", 0, 200) == [(100, 110, 2)]
    again.close()


# ---- suppliers and builders ---------------------------------------------------------------------


def test_window_and_session_suppliers() -> None:
    window = Stores.persistent_window_store("w", "1h", "5m", retain_duplicates=True)
    assert (window.name, window.retention_ms, window.window_size_ms) == ("w", 3_600_000, 300_000)
    assert window.metrics_scope == "rocksdb-window" and window.retain_duplicates
    assert isinstance(window.get(), RocksDBWindowStore)
    assert isinstance(Stores.in_memory_window_store("w", 10, 10).get(), InMemoryWindowStore)
    assert isinstance(Stores.persistent_session_store("s", "1m").get(), RocksDBSessionStore)
    assert Stores.in_memory_session_store("s", 10).metrics_scope == "in-memory-session"
    with pytest.raises(StreamsError, match="at least the window size"):
        Stores.in_memory_window_store("w", 5, 10)
    with pytest.raises(StreamsError):
        Stores.persistent_session_store("", 10)


def test_dsl_store_choice_swaps_only_dsl_builders() -> None:
    """``default_dsl_store="rocksdb"`` makes DSL window stores persistent; a ``Stores`` supplier is kept."""
    dsl = WindowStoreBuilder("w", lambda: InMemoryWindowStore("w", 50, 10, retain_duplicates=True))
    swapped = dsl.build(None, None, "rocksdb")
    assert isinstance(backend(swapped), RocksDBWindowStore)
    assert (swapped.retention_ms, swapped.window_size_ms, swapped.retain_duplicates) == (50, 10, True)
    assert swapped.persistent
    assert isinstance(backend(dsl.build(None, None, "in_memory")), InMemoryWindowStore)
    sessions = SessionStoreBuilder("s", lambda: InMemorySessionStore("s", 50)).with_logging_disabled()
    assert isinstance(backend(sessions.build(None, None, "rocksdb")), RocksDBSessionStore)
    kept = Stores.window_store_builder(Stores.in_memory_window_store("w", 10, 10))
    assert isinstance(backend(kept.build(None, None, "rocksdb")), InMemoryWindowStore)
