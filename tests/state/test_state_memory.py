"""InMemoryKeyValueStore: point operations, ordered scans, concurrent reads."""

from __future__ import annotations

import threading

import pytest

from kstream_nb.errors import IllegalStateError
from kstream_nb.state import InMemoryKeyValueStore


@pytest.fixture
def store() -> InMemoryKeyValueStore:
    s = InMemoryKeyValueStore("counts")
    s.put_all([(k, k * 10) for k in (5, 1, 4, 2, 3)])
    return s


def test_put_get_delete(store: InMemoryKeyValueStore) -> None:
    assert store.get(3) == 30
    assert store.get(99) is None
    store.put(3, 31)
    assert store.get(3) == 31
    assert store.delete(3) == 31
    assert store.delete(3) is None
    assert store.get(3) is None
    assert store.approximate_num_entries() == 4


def test_none_value_deletes(store: InMemoryKeyValueStore) -> None:
    store.put(2, None)
    assert 2 not in store
    store.put_all([(1, None), (9, 90)])
    assert [k for k, _ in store.all()] == [3, 4, 5, 9]


def test_none_key_rejected(store: InMemoryKeyValueStore) -> None:
    with pytest.raises(ValueError, match="counts"):
        store.put(None, 1)


def test_put_if_absent(store: InMemoryKeyValueStore) -> None:
    assert store.put_if_absent(1, 999) == 10
    assert store.get(1) == 10
    assert store.put_if_absent(7, 70) is None
    assert store.get(7) == 70
    assert [k for k, _ in store.all()] == [1, 2, 3, 4, 5, 7]


def test_range_bounds_inclusive(store: InMemoryKeyValueStore) -> None:
    assert store.range(2, 4) == [(2, 20), (3, 30), (4, 40)]
    assert [k for k, _ in store.range(None, 2)] == [1, 2]
    assert [k for k, _ in store.range(4)] == [4, 5]
    assert [k for k, _ in store.range(2.5, 3.5)] == [3]
    assert store.range(4, 2) == []
    assert [k for k, _ in store.reverse_range(2, 4)] == [4, 3, 2]
    assert [k for k, _ in store.reverse_all()] == [5, 4, 3, 2, 1]
    assert store.all()[0].key == 1 and store.all()[0].value == 10


def test_scan_cache_follows_new_and_deleted_keys(store: InMemoryKeyValueStore) -> None:
    assert [k for k, _ in store.all()] == [1, 2, 3, 4, 5]
    store.put(0, 0)
    store.put(3, 33)
    store.delete(5)
    assert store.all() == [(0, 0), (1, 10), (2, 20), (3, 33), (4, 40)]


def test_mixed_type_keys_order_by_json() -> None:
    store = InMemoryKeyValueStore("mixed")
    store.put_all([("b", 1), (2, 2), ("a", 3), (1, 4), ((1, "x"), 5)])
    keys = [k for k, _ in store.all()]
    assert sorted(keys, key=repr) == sorted([1, 2, "a", "b", (1, "x")], key=repr)
    assert keys.index(1) < keys.index(2) and keys.index("a") < keys.index("b")
    assert [k for k, _ in store.range("a", "b")] == ["a", "b"]


def test_uncomparable_bound_is_a_clear_error(store: InMemoryKeyValueStore) -> None:
    with pytest.raises(TypeError, match="counts"):
        store.range("a", "z")


def test_init_registers_without_changelog_and_close_clears(context) -> None:
    store = InMemoryKeyValueStore("s")
    assert not store.is_open
    store.init(context)
    assert store.is_open
    registered, restore, topic = context.registered[0]
    assert registered is store and topic is None
    with pytest.raises(IllegalStateError):
        restore([(b"1", b"2")])
    store.put("k", 1)
    store.close()
    assert not store.is_open
    assert store.approximate_num_entries() == 0


def test_concurrent_scans_while_writing() -> None:
    store = InMemoryKeyValueStore("s")
    errors: list[BaseException] = []
    done = threading.Event()
    started = threading.Event()
    scans = 0

    def read() -> None:
        nonlocal scans
        try:
            while not done.is_set():
                keys = [k for k, _ in store.all()]
                assert keys == sorted(keys)
                store.range(100, 200)
                scans += 1
                started.set()
        except BaseException as exc:
            errors.append(exc)
            started.set()

    reader = threading.Thread(target=read)
    reader.start()
    started.wait(5)
    try:
        for i in range(5000):
            store.put(i % 1500, i)
            if i % 3 == 0:
                store.delete((i * 7) % 1500)
    finally:
        done.set()
        reader.join(5)
    assert not errors
    assert scans > 0
    keys = [k for k, _ in store.all()]
    assert keys == sorted(store._data)
