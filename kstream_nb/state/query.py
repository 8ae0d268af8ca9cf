"""Interactive queries: one read-only view over the same-named stores of all local tasks."""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import Any

import pandas as pd

from kstream_nb.errors import InvalidStateStoreError
from kstream_nb.state.store import KeyValue, ReadOnlyKeyValueStore, StateStore, sort_entries
from kstream_nb.state.timestamped import ValueAndTimestamp


class CompositeReadOnlyKeyValueStore(ReadOnlyKeyValueStore):
    """What ``app.store(name)`` returns: reads across every local task's instance of the store.

    Each task owns the store instance of its partition, and a key lives in exactly one partition, so
    ``get`` returns the first hit and scans merge the instances in key order. The instances are asked
    for on every call, so the view follows rebalances.
    """

    def __init__(self, name: str, stores_provider: Callable[[], list[Any]]) -> None:
        self.name = name
        self._provider = stores_provider

    def _stores(self) -> list[ReadOnlyKeyValueStore]:
        stores = self._provider()
        if not stores:
            raise InvalidStateStoreError(
                f"state store {self.name!r} has no local instance: the application is not running "
                "(call start() first) or its tasks are being (re)assigned; retry shortly"
            )
        for store in stores:
            if isinstance(store, StateStore) and not store.is_open:
                raise InvalidStateStoreError(
                    f"state store {self.name!r} is closed: the application stopped or is migrating "
                    "this store's task; retry after the rebalance"
                )
        return stores

    def get(self, key: Any) -> Any:
        for store in self._stores():
            value = store.get(key)
            if value is not None:
                return value
        return None

    def range(self, from_key: Any = None, to_key: Any = None) -> list[KeyValue]:
        entries: list[KeyValue] = []
        for store in self._stores():
            entries.extend(store.range(from_key, to_key))
        return sort_entries(entries)

    def reverse_range(self, from_key: Any = None, to_key: Any = None) -> list[KeyValue]:
        return self.range(from_key, to_key)[::-1]

    def approximate_num_entries(self) -> int:
        return sum(store.approximate_num_entries() for store in self._stores())

    def __repr__(self) -> str:
        try:
            stores = self._stores()
        except InvalidStateStoreError:
            return f"<store {self.name!r}: not available (application not running or rebalancing)>"
        entries = sum(store.approximate_num_entries() for store in stores)
        return f"<store {self.name!r}: {entries} entries in {len(stores)} local task store(s)>"

    def _repr_html_(self) -> str | None:
        """A table of the first entries in notebooks (plain repr when the store is not available)."""
        return _head_html(self, "store", "entries")


class CompositeVersionedKeyValueStore(CompositeReadOnlyKeyValueStore):
    """``app.store(name)`` for a versioned store: ``get(key)`` the latest version, ``get(key, as_of)`` the
    version valid then (a ``VersionedRecord``: value, timestamp, valid_to); scans and ``to_pandas`` show latest
    versions."""

    def get(self, key: Any, as_of_timestamp: int | None = None) -> Any:
        for store in self._stores():
            found = store.get(key, as_of_timestamp)  # type: ignore[call-arg]  # versioned stores
            if found is not None:
                return found
        return None

    def to_pandas(self, expand: bool = False) -> pd.DataFrame:
        """Latest versions: ``key``, ``value`` and ``timestamp`` (the version's valid-from) columns."""
        rows = [(kv.key, kv.value.value, kv.value.timestamp) for kv in self.all()]
        frame = pd.DataFrame(rows, columns=["key", "value", "timestamp"])
        if expand and rows and all(isinstance(value, dict) for _, value, _ in rows):
            fields = pd.json_normalize([value for _, value, _ in rows])
            frame = pd.concat([frame[["key"]], fields, frame[["timestamp"]]], axis=1)
        return frame


class CompositeWindowStore:
    """``app.store(name)`` for window and session stores: windows of every local task, plain values."""

    def __init__(self, name: str, stores_provider: Callable[[], list[Any]]) -> None:
        self.name = name
        self._provider = stores_provider

    def _stores(self) -> list[Any]:
        stores = self._provider()
        if not stores:
            raise InvalidStateStoreError(
                f"state store {self.name!r} has no local instance: the application is not running "
                "(call start() first) or its tasks are being (re)assigned; retry shortly"
            )
        return stores

    def all(self) -> list[tuple[Any, int, int, Any]]:
        """(key, window start, window end, value) for every window, by key then start."""
        rows: list[tuple[Any, int, int, Any]] = []
        for store in self._stores():
            if hasattr(store, "window_size_ms"):
                size = store.window_size_ms
                rows.extend((k, s, s + size, _plain(v)) for k, s, v in store.all())
            else:
                rows.extend((k, s, e, _plain(v)) for k, s, e, v in store.all())
        entries = sort_entries([KeyValue(r[0], r[1:]) for r in rows])
        return [(e.key, *e.value) for e in entries]

    def fetch(self, key: Any, time_from: int = 0, time_to: int | None = None) -> list[tuple[int, int, Any]]:
        """(start, end, value) of ``key``'s windows whose start lies in [time_from, time_to]."""
        return [
            (s, e, v)
            for k, s, e, v in self.all()
            if k == key and s >= time_from and (time_to is None or s <= time_to)
        ]

    def to_pandas(self) -> pd.DataFrame:
        return pd.DataFrame(self.all(), columns=["key", "start", "end", "value"])

    def approximate_num_entries(self) -> int:
        return sum(int(s.approximate_num_entries()) for s in self._stores())

    def __repr__(self) -> str:
        try:
            n = self.approximate_num_entries()
        except InvalidStateStoreError:
            return f"<window store {self.name!r}: not available>"
        return f"<window store {self.name!r}: {n} windows>"

    def _repr_html_(self) -> str | None:
        """A table of the first windows (key, start, end, value) in notebooks (plain repr when unavailable)."""
        return _head_html(self, "window store", "windows")


def _head_html(view: Any, kind: str, rows: str, n: int = 20) -> str | None:
    """The first ``n`` rows of a store view's ``to_pandas()`` as HTML; None when the store is not available."""
    try:
        frame = view.to_pandas()
    except InvalidStateStoreError:
        return None
    head = frame.head(n).to_html(index=False)
    more = f"<p>{len(frame)} {rows}, showing {n}</p>" if len(frame) > n else ""
    return f"<p>{kind} <code>{html.escape(view.name)}</code></p>{head}{more}"


def _plain(value: Any) -> Any:
    return value.value if isinstance(value, ValueAndTimestamp) else value
