"""The in-memory key-value store: a dict, with sorted scans that are safe from another thread."""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable
from typing import Any

from kstream_nb.cluster.serdes import Serde
from kstream_nb.state.store import (
    KeyOrder,
    KeyValue,
    KeyValueStore,
    StateStore,
    StateStoreContext,
    StoreBackend,
    sort_keys,
)

_MISSING = object()
_new_tuple = tuple.__new__


class InMemoryKeyValueStore(StoreBackend, KeyValueStore):
    """A dict-backed store; ``get``/``put`` cost a dict operation, scans sort a snapshot of the keys.

    One stream thread writes; interactive queries may scan from other threads. Scans copy the keys
    with ``list(dict)`` (one C call, atomic under the GIL) and cache the sorted key list until a key
    is added or removed, so repeated scans of a stable key set do not sort again. Values are read at
    scan time, so a concurrent scan sees each key's current value and skips keys deleted meanwhile.
    """

    def __init__(self, name: str) -> None:
        self._name = name
        self._data: dict[Any, Any] = {}
        self._version = 0
        self._sorted: tuple[int, list[Any], KeyOrder | None] | None = None
        self._open = False
        #: the key serde's read-back form of a key (None: keys are themselves): a key is found by its bytes
        self._canonical: Callable[[Any], Any] | None = None

    def use_key_serde(self, key_serde: Serde) -> None:
        """Keys are looked up in the form the key serde reads their bytes back as (``"12"`` finds ``12``), so the
        store answers as Kafka's byte-keyed stores do, and as it will after a restore from its changelog."""
        self._canonical = key_serde.canonical_key()

    def init(self, context: StateStoreContext, root: StateStore | None = None) -> None:
        context.register(root if root is not None else self, self._restore_without_changelog, None)
        self._open = True

    def close(self) -> None:
        self._open = False
        self._data.clear()
        self._version += 1

    def get(self, key: Any) -> Any:
        canonical = self._canonical
        return self._data.get(key if canonical is None else canonical(key))

    def put(self, key: Any, value: Any) -> None:
        if key is None:
            raise ValueError(f"store {self._name!r}: keys cannot be None")
        canonical = self._canonical
        if canonical is not None:
            key = canonical(key)
        if value is None:
            self.delete(key)
            return
        data = self._data
        size = len(data)
        data[key] = value
        if len(data) != size:
            self._version += 1

    def put_if_absent(self, key: Any, value: Any) -> Any:
        if key is None:
            raise ValueError(f"store {self._name!r}: keys cannot be None")
        if self._canonical is not None:
            key = self._canonical(key)
        old = self._data.get(key)
        if old is None and value is not None:
            self._data[key] = value
            self._version += 1
        return old

    def put_all(self, entries: Iterable[tuple[Any, Any]]) -> None:
        put = self.put
        for key, value in entries:
            put(key, value)

    def delete(self, key: Any) -> Any:
        if self._canonical is not None:
            key = self._canonical(key)
        old = self._data.pop(key, None)
        if old is not None:
            self._version += 1
        return old

    def approximate_num_entries(self) -> int:
        return len(self._data)

    def _sorted_keys(self) -> tuple[list[Any], KeyOrder | None]:
        cached = self._sorted
        version = self._version
        if cached is not None and cached[0] == version:
            return cached[1], cached[2]
        while True:
            try:
                snapshot = list(self._data)
                break
            except RuntimeError:
                continue
        keys, order = sort_keys(snapshot)
        self._sorted = (version, keys, order)
        return keys, order

    def _slice(self, from_key: Any, to_key: Any) -> list[Any]:
        keys, order = self._sorted_keys()
        lo, hi = 0, len(keys)
        try:
            if from_key is not None:
                lo = bisect_left(keys, from_key if order is None else order(from_key), key=order)
            if to_key is not None:
                hi = bisect_right(keys, to_key if order is None else order(to_key), key=order)
        except TypeError as exc:
            raise TypeError(
                f"range bounds ({from_key!r}, {to_key!r}) of store {self._name!r} do not compare "
                f"with its keys: {exc}"
            ) from None
        return keys[lo:hi] if lo < hi else []

    def _entries(self, keys: list[Any]) -> list[KeyValue]:
        get = self._data.get
        return [_new_tuple(KeyValue, (k, v)) for k in keys if (v := get(k, _MISSING)) is not _MISSING]

    def range(self, from_key: Any = None, to_key: Any = None) -> list[KeyValue]:
        return self._entries(self._slice(from_key, to_key))

    def reverse_range(self, from_key: Any = None, to_key: Any = None) -> list[KeyValue]:
        return self._entries(self._slice(from_key, to_key)[::-1])

    def __repr__(self) -> str:
        return f"InMemoryKeyValueStore({self._name!r}, entries={len(self._data)})"
