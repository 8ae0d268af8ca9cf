"""ChangeLoggingKeyValueStore and MeteredKeyValueStore."""

from __future__ import annotations

import json

import pytest

from kstream_nb.errors import IllegalStateError
from kstream_nb.processor.api import Change
from kstream_nb.state import ChangeLoggingKeyValueStore, InMemoryKeyValueStore, MeteredKeyValueStore, changelogging
from kstream_nb.state.rocksdb import RocksDBKeyValueStore
from kstream_nb.state.suppression_buffer import BufferedUpdate, SuppressionBuffer


def test_logs_each_keys_latest_change_serialized_at_the_flush(context, json_serde) -> None:
    store = ChangeLoggingKeyValueStore(InMemoryKeyValueStore("counts"), json_serde, json_serde)
    store.init(context)
    topic = "app-counts-changelog"
    assert store.changelog_topic == topic

    context.timestamp = 100
    store.put("jack", 4)
    context.timestamp = 200
    store.put("lily", {"n": 7})
    store.delete("jack")
    store.put("mike", None)
    assert store.put_if_absent("lily", 1) == {"n": 7}
    assert store.put_if_absent("zoe", 1) is None
    store.put_all([("a", 1), ("b", None)])
    assert context.logged == []  # held until the flush; the store has every change at once
    assert dict(store) == {"a": 1, "lily": {"n": 7}, "zoe": 1}

    store.flush()
    assert context.logged == [
        (topic, 2, b'"jack"', None, 200),
        (topic, 2, b'"lily"', b'{"n":7}', 200),
        (topic, 2, b'"mike"', None, 200),
        (topic, 2, b'"zoe"', b"1", 200),
        (topic, 2, b'"a"', b"1", 200),
        (topic, 2, b'"b"', None, 200),
    ]
    context.logged.clear()
    store.flush()
    assert context.logged == []  # nothing changed since
    context.timestamp = 300
    store.put("lily", 8)
    store.close()  # closing writes what is held (as a record cache flushes on close)
    assert context.logged == [(topic, 2, b'"lily"', b"8", 300)]


def test_a_rocksdb_stores_changes_are_held_apart_by_key_bytes(tmp_path, make_context, json_serde) -> None:
    """1 and True, or [1, "x"] and [True, "x"], are one dict key but two RocksDB (and changelog) keys; a dict
    key, which a RocksDB store takes, is held by its bytes too."""
    inner = RocksDBKeyValueStore("counts")
    inner.use_serdes(json_serde, json_serde, timestamped=False)
    store = ChangeLoggingKeyValueStore(inner, json_serde, json_serde)
    context = make_context(state_dir=str(tmp_path))
    store.init(context)
    for key, value in [(1, "a"), (True, "b"), ((1, "x"), "c"), ((True, "x"), "d"), ({"id": 7}, "e")]:
        store.put(key, value)
    store.put({"id": 7}, "f")
    assert context.logged == []
    store.flush()
    assert [(k, v) for _, _, k, v, _ in context.logged] == [
        (b"1", b'"a"'), (b"true", b'"b"'), (b'[1,"x"]', b'"c"'), (b'[true,"x"]', b'"d"'), (b'{"id":7}', b'"f"')
    ]  # fmt: skip
    store.close()


def test_an_unhashable_key_of_a_store_of_ones_own_is_logged_at_once(context, json_serde) -> None:
    """A store from a supplier of the user's may take keys a dict cannot hold: their changes are not held."""

    class JsonKeyed(InMemoryKeyValueStore):
        def put(self, key: object, value: object) -> None:
            super().put(json.dumps(key, sort_keys=True), value)

    store = ChangeLoggingKeyValueStore(JsonKeyed("own"), json_serde, json_serde)
    store.init(context)
    store.put({"id": 7}, "a")
    assert [(k, v) for _, _, k, v, _ in context.logged] == [(b'{"id":7}', b'"a"')]


def test_too_many_held_keys_are_written_before_the_flush(
    context, json_serde, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(changelogging, "MAX_HELD_CHANGES", 3)
    store = ChangeLoggingKeyValueStore(InMemoryKeyValueStore("counts"), json_serde, json_serde)
    store.init(context)
    for key in "abab":
        store.put(key, 1)
    assert context.logged == []
    store.put("c", 1)  # the third key held: all three go
    store.put("d", 1)
    assert [k for _, _, k, _, _ in context.logged] == [b'"a"', b'"b"', b'"c"']


def test_the_suppression_buffer_logs_each_changed_key_once_per_flush(context, json_serde) -> None:
    """No record per write; at the flush, each key changed since the last one with its latest update (a
    tombstone if it is gone) and the timestamp of its last change; a new buffer restores from those."""
    store = SuppressionBuffer("buffer", json_serde, json_serde)
    store.init(context)
    topic = "app-buffer-changelog"
    assert context.registered == [(store, store._restore, topic)]

    def update(ts: int, value: int) -> BufferedUpdate:
        return BufferedUpdate(1_000, ts, (), Change(value, None))

    for ts, (key, value) in enumerate([("a", 1), ("b", 1), ("a", 2), ("c", 1)], start=100):
        store.put(key, update(ts, value))
    context.timestamp = 104
    store.delete("c")  # put and deleted between two flushes: still a tombstone (the key may be logged before)
    assert context.logged == []
    assert store.get("a") == update(102, 2)  # reads see every write at once
    store.flush()
    decode = store.value_serde.deserialize
    assert [
        (t, p, store.key_serde.deserialize(t, k), v and decode(t, v), ts) for t, p, k, v, ts in context.logged
    ] == [
        (topic, 2, "a", update(102, 2), 102),
        (topic, 2, "b", update(101, 1), 101),
        (topic, 2, "c", None, 104),
    ]
    restored = SuppressionBuffer("buffer", json_serde, json_serde)
    restored.init(context)
    restored._restore([(k, v) for _, _, k, v, _ in context.logged])
    assert dict(restored.all()) == {"a": update(102, 2), "b": update(101, 1)}
    context.logged.clear()
    store.flush()
    assert context.logged == []  # nothing changed since
    context.timestamp = 200
    store.delete("a")
    store.flush()
    assert [(k, v, ts) for _, _, k, v, ts in context.logged] == [
        (store.key_serde.serialize(topic, "a"), None, 200)
    ]


def test_registers_once_with_restore_and_topic(context, json_serde) -> None:
    inner = InMemoryKeyValueStore("counts")
    store = ChangeLoggingKeyValueStore(inner, json_serde, json_serde)
    store.init(context)
    assert len(context.registered) == 1
    registered, _restore, topic = context.registered[0]
    assert registered is store
    assert topic == "app-counts-changelog"
    assert inner.is_open and store.is_open


def test_restore_rebuilds_store_without_logging(context, json_serde) -> None:
    store = ChangeLoggingKeyValueStore(InMemoryKeyValueStore("counts"), json_serde, json_serde)
    store.init(context)
    _, restore, _ = context.registered[0]
    restore([(b'"jack"', b"1"), (b'"lily"', b"5"), (b'"jack"', b"3"), (b'"mike"', b"4")])
    restore([(b'"lily"', None), (b'"nobody"', None)])
    assert dict(store) == {"jack": 3, "mike": 4}
    assert context.logged == []


def test_write_before_init_is_a_clear_error(json_serde) -> None:
    store = ChangeLoggingKeyValueStore(InMemoryKeyValueStore("counts"), json_serde, json_serde)
    with pytest.raises(IllegalStateError, match="counts"):
        store.put("k", 1)


def test_metered_counts(context) -> None:
    store = MeteredKeyValueStore(InMemoryKeyValueStore("counts"))
    store.init(context)
    assert context.registered[0][0] is store
    store.put("a", 1)
    store.put_all([("b", 2), ("c", 3)])
    store.put_if_absent("a", 9)
    store.get("a")
    store.get("zz")
    store.delete("b")
    store.all()
    store.range("a", "b")
    store.flush()
    metrics = store.metrics()
    assert metrics["store"] == "counts" and metrics["scope"] == "in-memory"
    assert metrics["put_total"] == 4
    assert metrics["get_total"] == 2
    assert metrics["delete_total"] == 1
    assert metrics["scan_total"] == 2
    assert metrics["flush_total"] == 1
    assert metrics["entries"] == 2
    assert metrics["scan_time_ms"] >= 0
