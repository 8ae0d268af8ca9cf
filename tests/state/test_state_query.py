"""CompositeReadOnlyKeyValueStore over the stores of several tasks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from kstream_nb.errors import InvalidStateStoreError
from kstream_nb.state import CompositeReadOnlyKeyValueStore, InMemoryKeyValueStore, ReadOnlyKeyValueStore


def _task_stores(make_context: Callable[..., Any]) -> list[ReadOnlyKeyValueStore]:
    stores = []
    for partition, keys in enumerate([("a", "d"), ("b", "e"), ("c", "f")]):
        store = InMemoryKeyValueStore("counts")
        store.init(make_context(partition=partition))
        store.put_all((k, {"n": ord(k) - 96, "p": partition}) for k in keys)
        stores.append(store)
    return stores


@pytest.fixture
def composite(make_context: Callable[..., Any]) -> CompositeReadOnlyKeyValueStore:
    stores = _task_stores(make_context)
    return CompositeReadOnlyKeyValueStore("counts", lambda: stores)


def test_get_first_hit(composite: CompositeReadOnlyKeyValueStore) -> None:
    assert composite.get("e") == {"n": 5, "p": 1}
    assert composite.get("z") is None
    assert "c" in composite


def test_scans_merge_in_key_order(composite: CompositeReadOnlyKeyValueStore) -> None:
    assert [k for k, _ in composite.all()] == ["a", "b", "c", "d", "e", "f"]
    assert [k for k, _ in composite.range("b", "d")] == ["b", "c", "d"]
    assert [k for k, _ in composite.reverse_range("b", "d")] == ["d", "c", "b"]
    assert composite.approximate_num_entries() == 6 == len(composite)


def test_to_pandas(composite: CompositeReadOnlyKeyValueStore) -> None:
    frame = composite.to_pandas()
    assert list(frame.columns) == ["key", "value"]
    assert list(frame["key"]) == list("abcdef")
    wide = composite.to_pandas(expand=True)
    assert list(wide.columns) == ["key", "n", "p"]
    assert list(wide["n"]) == [1, 2, 3, 4, 5, 6]


def test_repr(composite: CompositeReadOnlyKeyValueStore) -> None:
    assert repr(composite) == "<store 'counts': 6 entries in 3 local task store(s)>"
    html = composite._repr_html_()
    assert html is not None and "counts" in html


def test_not_running_is_a_clear_error() -> None:
    store = CompositeReadOnlyKeyValueStore("counts", lambda: [])
    with pytest.raises(InvalidStateStoreError, match=r"'counts'.*not running"):
        store.get("a")
    with pytest.raises(InvalidStateStoreError):
        store.all()
    assert "not available" in repr(store)
    assert store._repr_html_() is None


def test_closed_store_is_a_clear_error(context) -> None:
    inner = InMemoryKeyValueStore("counts")
    inner.init(context)
    store = CompositeReadOnlyKeyValueStore("counts", lambda: [inner])
    assert store.all() == []
    inner.close()
    with pytest.raises(InvalidStateStoreError, match="closed"):
        store.get("a")
