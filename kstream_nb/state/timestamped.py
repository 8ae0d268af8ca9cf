"""Timestamped key-value stores (what KTables and aggregations keep): value plus the result timestamp."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from kstream_nb.state.builders import KeyValueStoreBuilder
from kstream_nb.state.store import ValueAndTimestamp

__all__ = ["PlainValueView", "TimestampedKeyValueStoreBuilder", "ValueAndTimestamp"]


class TimestampedKeyValueStoreBuilder(KeyValueStoreBuilder):
    """A key-value store builder whose values are ``ValueAndTimestamp``.

    As in Kafka, the changelog carries the plain value with the timestamp on the changelog record. The DSL
    makes these (KTables, aggregations): an in-memory one becomes RocksDB with ``default_dsl_store="rocksdb"``.
    """

    timestamped = True
    follows_dsl_store = True


class PlainValueView:
    """Read-only view of a timestamped store that answers with plain values (for interactive queries)."""

    def __init__(self, store: Any) -> None:
        self._store = store
        self.name = store.name

    def get(self, key: Any) -> Any:
        found = self._store.get(key)
        return None if found is None else found.value

    def range(self, from_key: Any = None, to_key: Any = None) -> Iterator[tuple[Any, Any]]:
        return ((k, v.value) for k, v in self._store.range(from_key, to_key))

    def reverse_range(self, from_key: Any = None, to_key: Any = None) -> Iterator[tuple[Any, Any]]:
        return ((k, v.value) for k, v in self._store.reverse_range(from_key, to_key))

    def all(self) -> Iterator[tuple[Any, Any]]:
        return ((k, v.value) for k, v in self._store.all())

    def approximate_num_entries(self) -> int:
        return int(self._store.approximate_num_entries())
