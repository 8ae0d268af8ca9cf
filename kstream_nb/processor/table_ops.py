"""KTable processors: the table source (upsert/delete), filter, map_values, to_stream, re-keying.

A table materialized in a versioned store (KIP-914) puts each update at its timestamp and forwards it only when
the store took it; an update older than the key's latest version is forwarded as an ``OutOfOrderChange``
(Kafka's ``Change`` with ``isLatest=false``): filter and map_values pass it on as such, to_stream emits it,
table-table joins and group_by drop it, a non-versioned materialization makes it a plain (latest) change.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kstream_nb.cluster.records import Headers
from kstream_nb.processor.api import Change, Processor, ProcessorContext, Record, ValueAndTimestamp
from kstream_nb.processor.node import Entry, Fail, NodeContext
from kstream_nb.state.caching import caching_layer
from kstream_nb.state.versioned import PUT_RETURN_CODE_NOT_PUT, PUT_RETURN_CODE_VALID_TO_UNDEFINED, is_versioned


class OutOfOrderChange(Change):
    """An update of a versioned table older than its key's latest version (Kafka's ``Change.isLatest`` false)."""

    __slots__ = ()


def is_latest(change: Change) -> bool:
    """False for an out-of-order update of a versioned table."""
    return type(change) is not OutOfOrderChange


def versioned_change(new: Any, old: Any, put_return_code: int) -> Change:
    """The change a versioned store's put makes: latest when the new version has no valid_to."""
    if put_return_code == PUT_RETURN_CODE_VALID_TO_UNDEFINED:
        return Change(new, old)
    return OutOfOrderChange(new, old)


def timestamped_tuple_forwarder(store: Any, context: ProcessorContext) -> bool:
    """Kafka's TimestampedTupleForwarder: True when the processor forwards its changes itself.

    When ``store`` has a record cache, its flush listener forwards instead (Kafka's
    TimestampedCacheFlushListener): one ``Change(new, old)`` per key and flush, old being the value the
    store held before, with the new value's timestamp (a delete's: its record's), at commit or eviction.
    """
    layer = caching_layer(store)
    if layer is None:
        return True

    def forward_flushed(key: Any, new: Any, old: Any, timestamp: int, headers: Headers) -> None:
        context.forward(
            Record(
                key,
                Change(None if new is None else new.value, None if old is None else old.value),
                timestamp if new is None else new.timestamp,
                headers,
            )
        )

    layer.set_flush_listener(forward_flushed)
    return False


class KTableSource(Processor):
    """Upserts each record into the table's store (null value deletes) and forwards the change.

    Null keys are dropped. Every update is forwarded, also one with the value the key already has (Kafka
    Streams 4.4 emits on update: KIP-557's emit-on-change for table sources was rolled back; checked against
    its TopologyTestDriver). When the store is cached, changes are forwarded as the cache flushes them
    (``timestamped_tuple_forwarder``).
    A versioned store (Kafka's KTableSource over a versioned store): the record is put at its timestamp and
    forwarded only if put (an update older than the store's grace period is not), with the latest version
    before it as old value, as an ``OutOfOrderChange`` when a later version exists.
    """

    context: NodeContext

    def __init__(self, store_name: str, queryable: bool = False) -> None:
        self.store_name = store_name
        #: the table was materialized under a name the user chose (Kafka's queryableName)
        self.queryable = queryable

    def init(self, context: Any) -> None:
        super().init(context)
        self.store = context.get_state_store(self.store_name)
        self.versioned = is_versioned(self.store)
        self.forward_now = self.versioned or timestamped_tuple_forwarder(self.store, context)

    def process(self, record: Record) -> None:
        key, value = record.key, record.value
        if key is None:
            self.context.record_dropped("null key in table")
            return
        old = self.store.get(key)
        if self.versioned:
            code = self.store.put(key, value, record.timestamp)
            if code != PUT_RETURN_CODE_NOT_PUT:
                self.context.forward(
                    record.with_value(versioned_change(value, None if old is None else old.value, code))
                )
            return
        self.store.put(key, None if value is None else ValueAndTimestamp(value, record.timestamp))
        if self.forward_now:
            self.context.forward(record.with_value(Change(value, old.value if old is not None else None)))


class KTableFilter(Processor):
    """Keeps rows matching ``predicate(key, value)``; an update that does not match becomes a tombstone."""

    context: NodeContext

    def __init__(self, predicate: Callable[[Any, Any], Any], negate: bool = False) -> None:
        self.predicate = predicate
        self.negate = negate

    def _keep(self, key: Any, value: Any) -> Any:
        if value is None or bool(self.predicate(key, value)) is self.negate:
            return None
        return value

    def process(self, record: Record) -> None:
        # As Kafka's KTableFilter (old values not requested): an update that does not pass is forwarded
        # as a delete even when the row never matched, since downstream cannot tell; consumers of old
        # values (group_by) ignore a change that is None on both sides.
        change: Change = record.value
        new = self._keep(record.key, change.new_value)
        old = self._keep(record.key, change.old_value)
        self.context.forward(record.with_value(type(change)(new, old)))  # out-of-order stays out-of-order


class KTableMapValues(Processor):
    """Maps the values of a table; tombstones stay tombstones."""

    context: NodeContext

    def __init__(self, mapper: Callable[..., Any], with_key: bool = False) -> None:
        self.mapper = mapper
        self.with_key = with_key

    def _map(self, key: Any, value: Any) -> Any:
        if value is None:
            return None
        return self.mapper(key, value) if self.with_key else self.mapper(value)

    def process(self, record: Record) -> None:
        change: Change = record.value
        self.context.forward(
            record.with_value(
                type(change)(self._map(record.key, change.new_value), self._map(record.key, change.old_value))
            )
        )


class KTableToStream(Processor):
    """Turns table changes into a stream of new values (deletes as None values)."""

    context: NodeContext

    def process(self, record: Record) -> None:
        self.context.forward(record.with_value(record.value.new_value))

    def fuse(self, downstream: Entry, fail: Fail) -> Entry:
        def to_stream(key: Any, change: Change) -> None:
            downstream(key, change.new_value)

        return to_stream


class KTableMaterialize(Processor):
    """Writes a table's changes into a store so it can be queried (KTable ``store=...`` after an op).

    As Kafka's table processors with a queryable store: a non-versioned store takes every change and the
    change goes on as the latest; a versioned store puts it at its timestamp and it goes on only if put,
    latest or out-of-order as the store's put says.
    """

    context: NodeContext

    def __init__(self, store_name: str) -> None:
        self.store_name = store_name

    def init(self, context: Any) -> None:
        super().init(context)
        self.store = context.get_state_store(self.store_name)
        self.versioned = is_versioned(self.store)

    def process(self, record: Record) -> None:
        change: Change = record.value
        new = change.new_value
        if self.versioned:
            code = self.store.put(record.key, new, record.timestamp)
            if code != PUT_RETURN_CODE_NOT_PUT:
                self.context.forward(record.with_value(versioned_change(new, change.old_value, code)))
            return
        self.store.put(record.key, None if new is None else ValueAndTimestamp(new, record.timestamp))
        self.context.forward(record if is_latest(change) else record.with_value(Change(new, change.old_value)))


class KTableRepartitionMap(Processor):
    """``KTable.group_by``: maps each update to (group key, value); old and new go out as a subtraction
    on the old group key and an addition on the new one (one combined change when the keys are equal).
    """

    context: NodeContext

    def __init__(self, mapper: Callable[[Any, Any], Any]) -> None:
        self.mapper = mapper

    def _map(self, key: Any, value: Any) -> tuple[Any, Any] | None:
        if value is None:
            return None
        pair = self.mapper(key, value)
        if pair is None:
            return None
        new_key, new_value = pair
        if new_key is None or new_value is None:
            return None
        return new_key, new_value

    def process(self, record: Record) -> None:
        change: Change = record.value
        if not is_latest(change):
            return  # as Kafka: an aggregate of a versioned table takes its latest versions only
        new = self._map(record.key, change.new_value)
        old = self._map(record.key, change.old_value)
        if new is not None and old is not None and new[0] == old[0]:
            self.context.forward(Record(new[0], Change(new[1], old[1]), record.timestamp, record.headers))
            return
        if old is not None:
            self.context.forward(Record(old[0], Change(None, old[1]), record.timestamp, record.headers))
        if new is not None:
            self.context.forward(Record(new[0], Change(new[1], None), record.timestamp, record.headers))
