"""Store layers: change-logging (writes the changes to the changelog, restores from it) and metering.

A change-logging layer holds its store's changes until the store flushes (at each commit, before the
offsets are committed) and writes then the latest change of each key: a compacted changelog keeps only
that one, so a key updated a thousand times between two commits costs one record and one serialization
instead of a thousand. The store below has every change at once, nothing downstream waits for the
changelog, and at each commit it holds what it would hold had every change been written. More than
``MAX_HELD_CHANGES`` keys held are written without waiting for the commit.

Held changes are told apart as the store below tells its keys apart: a RocksDB store by their bytes
(where 1 and True, or (1,) and (True,), are two keys), an in-memory store as a dict does.
"""

from __future__ import annotations

from collections.abc import Iterable
from time import perf_counter_ns
from typing import Any

from kstream_nb.cluster.serdes import Serde
from kstream_nb.errors import IllegalStateError, ProcessingError, SerializationError
from kstream_nb.state.store import (
    DelegatingStoreContext,
    KeyValue,
    KeyValueStore,
    RestoreCallback,
    StateStore,
    StateStoreContext,
    ValueAndTimestamp,
    WrappedKeyValueStore,
)


class ChangelogRegistration(DelegatingStoreContext):
    """A context seen by the layers below change-logging: their registration carries the changelog.

    The innermost store registers the stack (as in Kafka Streams); this swaps in the change-logging
    layer's restore callback and changelog topic, so each store is registered exactly once.
    """

    def __init__(self, context: StateStoreContext, restore: RestoreCallback, topic: str) -> None:
        super().__init__(context)
        self._restore = restore
        self._topic = topic

    def register(self, store: StateStore, restore: RestoreCallback, changelog_topic: str | None) -> None:
        self._context.register(store, self._restore, self._topic)


#: keys whose changes a change-logging layer holds for the commit before it writes them all at once
MAX_HELD_CHANGES = 10_000


class ChangeHolder:
    """What change-logging layers share: the changes held for the next flush, by what identifies a
    changelog key, each written by ``_write_change(*change)``; flushing and closing write them first.
    (A base listed before the layer's wrapper class, so that its ``flush`` and ``close`` are the ones.)"""

    inner: Any
    _context: StateStoreContext | None

    def __init__(self) -> None:
        #: what identifies a changelog key -> the change, its record timestamp last
        self._held: dict[Any, tuple[Any, ...]] = {}

    def _write_change(self, *change: Any) -> None:
        raise NotImplementedError

    def _hold(self, ident: Any, change: tuple[Any, ...]) -> None:
        held = self._held
        try:
            held[ident] = change
        except TypeError:  # an unhashable key (a store from the user's own supplier may take one): written at once
            self._write_change(*change)
            return
        if len(held) >= MAX_HELD_CHANGES:
            self._write_held()

    def _write_held(self) -> None:
        held, self._held = self._held, {}
        write = self._write_change
        change: tuple[Any, ...] = ()
        try:
            for change in held.values():
                write(*change)
        except SerializationError as e:  # far from the record that made the change: say which key it was
            store = getattr(self, "name", "?")
            raise ProcessingError(
                f"SerializationError: {e}; writing the change of key {change[0]!r} in store {store!r} to its "
                f"changelog (last changed by a record with timestamp {change[-1]})",
                task_id=getattr(self._context, "task_id", None),
            ) from e

    def flush(self) -> None:
        self._write_held()
        self.inner.flush()

    def close(self) -> None:
        """Writes the held changes (as closing a record cache flushes it), then closes the store below."""
        try:
            if self._held and self.inner.is_open:
                self._write_held()
        finally:
            self.inner.close()


class ChangeLoggingKeyValueStore(ChangeHolder, WrappedKeyValueStore):
    """Logs each put/delete to the store's changelog topic (at the next flush, the latest per key: see the
    module docstring) after applying it to the inner store.

    Keys and values are serialized with the store's serdes; a delete is logged as a tombstone. The
    restore callback it registers applies a batch of changelog records to the inner store directly,
    so restoring does not log the records again.
    """

    def __init__(
        self, inner: KeyValueStore, key_serde: Serde, value_serde: Serde, timestamped: bool = False
    ) -> None:
        WrappedKeyValueStore.__init__(self, inner)
        ChangeHolder.__init__(self)
        self.key_serde = key_serde
        self.value_serde = value_serde
        #: values are ValueAndTimestamp: the changelog holds the plain value, the timestamp on the record
        self.timestamped = timestamped
        self._context: StateStoreContext | None = None
        self._topic = ""

    @property
    def changelog_topic(self) -> str:
        """The changelog topic (known after ``init``)."""
        return self._topic

    def init(self, context: StateStoreContext, root: StateStore | None = None) -> None:
        self._topic = context.changelog_topic(self.name)
        self._context = context
        self._serialize_key = self.key_serde.serializer(self._topic)
        self._serialize_value = self.value_serde.serializer(self._topic)
        self._write = context.changelog_writer(self._topic)
        self._keys_by_bytes = self.inner.persistent
        registration = ChangelogRegistration(context, self.restore, self._topic)
        self.inner.init(registration, root if root is not None else self)

    def restore(self, batch: list[tuple[Any, ...]]) -> None:
        """Applies changelog records ``(key, value[, timestamp])`` (tombstones delete) without logging them."""
        topic = self._topic
        key_de = self.key_serde.deserialize
        value_de = self.value_serde.deserialize
        if self.timestamped:
            self.inner.put_all(
                (key_de(topic, k), None if v is None else ValueAndTimestamp(value_de(topic, v), rest[0]))
                for k, v, *rest in batch
            )
        else:
            self.inner.put_all((key_de(topic, k), None if v is None else value_de(topic, v)) for k, v, *_ in batch)

    def _log(self, key: Any, value: Any) -> None:
        """Holds the change (a tombstone for None) with the record's timestamp for the next flush."""
        context = self._context
        if context is None:
            raise _not_initialized(self.name)
        self._hold(self._serialize_key(key) if self._keys_by_bytes else key, (key, value, context.timestamp))

    def _write_change(self, key: Any, value: Any, timestamp: int) -> None:
        if value is not None and self.timestamped:
            value, timestamp = value.value, value.timestamp
        self._write(self._serialize_key(key), None if value is None else self._serialize_value(value), timestamp)

    def put(self, key: Any, value: Any) -> None:
        self.inner.put(key, value)
        self._log(key, value)

    def put_if_absent(self, key: Any, value: Any) -> Any:
        old = self.inner.put_if_absent(key, value)
        if old is None:
            self._log(key, value)
        return old

    def put_all(self, entries: Iterable[tuple[Any, Any]]) -> None:
        entries = list(entries)
        self.inner.put_all(entries)
        for key, value in entries:
            self._log(key, value)

    def delete(self, key: Any) -> Any:
        old = self.inner.delete(key)
        self._log(key, None)
        return old


def _not_initialized(store: str) -> IllegalStateError:
    return IllegalStateError(f"store {store!r} is not initialized: call init(context) first")


class StoreMeter:
    """Operation counts of a store stack, for ``metrics()`` (what the metered layers share).

    Point operations only bump an int (no clock reads on the hot path); scans and flushes, which cost
    far more than a clock read, are also timed. Counts from concurrent readers are approximate.
    """

    inner: Any

    def __init__(self, metrics_scope: str) -> None:
        self.metrics_scope = metrics_scope
        self._gets = 0
        self._puts = 0
        self._deletes = 0
        self._scans = 0
        self._scan_ns = 0
        self._flushes = 0
        self._flush_ns = 0

    def metrics(self) -> dict[str, Any]:
        """Operation counts and time spent in scans/flushes (milliseconds), with the store's identity."""
        return {
            "store": self.inner.name,
            "scope": self.metrics_scope,
            "entries": self.inner.approximate_num_entries(),
            "get_total": self._gets,
            "put_total": self._puts,
            "delete_total": self._deletes,
            "scan_total": self._scans,
            "scan_time_ms": self._scan_ns / 1e6,
            "flush_total": self._flushes,
            "flush_time_ms": self._flush_ns / 1e6,
        }

    def _scan(self, scan: Any, *args: Any) -> Any:
        start = perf_counter_ns()
        try:
            return scan(*args)
        finally:
            self._scans += 1
            self._scan_ns += perf_counter_ns() - start

    def flush(self) -> None:
        start = perf_counter_ns()
        try:
            self.inner.flush()
        finally:
            self._flushes += 1
            self._flush_ns += perf_counter_ns() - start


class MeteredKeyValueStore(WrappedKeyValueStore, StoreMeter):
    """The outermost layer of a key-value store stack: counts operations for ``metrics()``."""

    def __init__(self, inner: KeyValueStore, metrics_scope: str = "in-memory") -> None:
        WrappedKeyValueStore.__init__(self, inner)
        StoreMeter.__init__(self, metrics_scope)

    def get(self, key: Any) -> Any:
        self._gets += 1
        return self.inner.get(key)

    def put(self, key: Any, value: Any) -> None:
        self._puts += 1
        self.inner.put(key, value)

    def put_if_absent(self, key: Any, value: Any) -> Any:
        self._puts += 1
        return self.inner.put_if_absent(key, value)

    def put_all(self, entries: Iterable[tuple[Any, Any]]) -> None:
        entries = list(entries)
        self._puts += len(entries)
        self.inner.put_all(entries)

    def delete(self, key: Any) -> Any:
        self._deletes += 1
        return self.inner.delete(key)

    def range(self, from_key: Any = None, to_key: Any = None) -> list[KeyValue]:
        return self._scan(self.inner.range, from_key, to_key)

    def reverse_range(self, from_key: Any = None, to_key: Any = None) -> list[KeyValue]:
        return self._scan(self.inner.reverse_range, from_key, to_key)

    def all(self) -> list[KeyValue]:
        return self.range()

    def reverse_all(self) -> list[KeyValue]:
        return self.reverse_range()

    flush = StoreMeter.flush
