"""Key ordering helpers and the read-only mixin (to_pandas, len, in, iter)."""

from __future__ import annotations

from kstream_nb.state import InMemoryKeyValueStore, KeyValue
from kstream_nb.state.store import json_order, sort_entries, sort_keys


def test_sort_keys_natural_order() -> None:
    keys, order = sort_keys([3, 1, 2])
    assert keys == [1, 2, 3]
    assert order is None


def test_sort_keys_falls_back_to_json_bytes() -> None:
    keys, order = sort_keys(["b", 2, "a", 1])
    assert order is json_order
    assert keys == sorted(["b", 2, "a", 1], key=json_order)
    assert keys.index(1) < keys.index(2)
    assert keys.index("a") < keys.index("b")


def test_sort_entries_uncomparable_dict_keys() -> None:
    entries = [KeyValue({"b": 1}, 1), KeyValue({"a": 1}, 2)]
    assert [kv.value for kv in sort_entries(entries)] == [2, 1]


def test_read_only_conveniences() -> None:
    store = InMemoryKeyValueStore("s")
    store.put_all([("b", {"n": 2, "m": {"x": 1}}), ("a", {"n": 1, "key": "dup"}), ("c", 5)])
    assert len(store) == 3
    assert "a" in store and "z" not in store
    assert dict(store) == {"a": {"n": 1, "key": "dup"}, "b": {"n": 2, "m": {"x": 1}}, "c": 5}

    frame = store.to_pandas()
    assert list(frame.columns) == ["key", "value"]
    assert list(frame["key"]) == ["a", "b", "c"]

    wide = store.to_pandas(expand=True)
    assert list(wide["key"]) == ["a", "b", "c"]
    assert wide.loc[1, "m.x"] == 1
    assert wide.loc[0, "value.key"] == "dup"
    assert wide.loc[2, "value"] == 5


def test_to_pandas_empty() -> None:
    store = InMemoryKeyValueStore("s")
    assert list(store.to_pandas().columns) == ["key", "value"]
    assert list(store.to_pandas(expand=True).columns) == ["key"]
