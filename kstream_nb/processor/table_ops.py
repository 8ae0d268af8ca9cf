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
from kstream_nb.processor.node import Entry, FusedProcessor, NodeContext
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


class TableFlags:
    """What the DSL settled for one KTable's processor after adding it, read when a task creates the processor:
    whether it sends old values (Kafka's ``sendOldValues``, turned on by a downstream operation that needs them)
    and, for a table source, whether it has a store (Kafka materializes a source only when asked to)."""

    __slots__ = ("materialized", "send_old_values")

    def __init__(self, send_old_values: bool = True, materialized: bool = True) -> None:
        self.send_old_values = send_old_values
        self.materialized = materialized

    def __repr__(self) -> str:
        return f"TableFlags(send_old_values={self.send_old_values}, materialized={self.materialized})"


def timestamped_tuple_forwarder(store: Any, context: ProcessorContext, send_old_values: bool = True) -> bool:
    """Kafka's TimestampedTupleForwarder: True when the processor forwards its changes itself.

    When ``store`` has a record cache, its flush listener forwards instead (Kafka's
    TimestampedCacheFlushListener): one ``Change(new, old)`` per key and flush, old being the value the
    store held before (None unless ``send_old_values``), with the new value's timestamp (a delete's: its
    record's), at commit or eviction.
    """
    layer = caching_layer(store)
    if layer is None:
        return True

    def forward_flushed(key: Any, new: Any, old: Any, timestamp: int, headers: Headers) -> None:
        context.forward(
            Record(
                key,
                Change(
                    None if new is None else new.value, None if old is None or not send_old_values else old.value
                ),
                timestamp if new is None else new.timestamp,
                headers,
            )
        )

    layer.set_flush_listener(forward_flushed)
    return False


class TableStoreWriter:
    """A table processor's own store (Kafka's ``queryableName``): each change is put into it and forwarded as
    Kafka's TimestampedTupleForwarder does (at once, or by the record cache's flush; old values only when sent).

    A versioned store puts the change at its timestamp; it goes on only if put, latest or out-of-order as the
    put says. A non-versioned store takes every change, which goes on as the latest.
    """

    def __init__(self, context: ProcessorContext, store_name: str, send_old_values: bool) -> None:
        self.context = context
        self.store: Any = context.get_state_store(store_name)
        self.versioned = is_versioned(self.store)
        self.send_old_values = send_old_values
        self.forward_now = self.versioned or timestamped_tuple_forwarder(self.store, context, send_old_values)

    def old_value(self, key: Any) -> Any:
        """The value the store holds for ``key`` (None if none, or if old values are not sent)."""
        if not self.send_old_values:
            return None
        found = self.store.get(key)
        return None if found is None else found.value

    def put_and_forward(self, record: Record, new: Any, old: Any) -> None:
        """Puts ``new`` for the record's key at its timestamp and forwards ``Change(new, old)``."""
        old = old if self.send_old_values else None
        if self.versioned:
            code = self.store.put(record.key, new, record.timestamp)
            if code != PUT_RETURN_CODE_NOT_PUT:
                self.context.forward(record.with_value(versioned_change(new, old, code)))
            return
        self.store.put(record.key, None if new is None else ValueAndTimestamp(new, record.timestamp))
        if self.forward_now:
            self.context.forward(record.with_value(Change(new, old)))


class KTableSource(Processor):
    """Upserts each record into the table's store (null value deletes) and forwards the change.

    Null keys are dropped. As Kafka's KTableSource, a source is materialized only when named or when a downstream
    operation needs its store (``flags.materialized``): without a store every record goes on as
    ``Change(value, None)``. Every update is forwarded, also one with the value the key already has (Kafka
    Streams 4.4 emits on update: KIP-557's emit-on-change for table sources was rolled back; checked against
    its TopologyTestDriver). The old value goes with it only when ``flags.send_old_values``. When the store is
    cached, changes are forwarded as the cache flushes them (``timestamped_tuple_forwarder``).
    A versioned store (Kafka's KTableSource over a versioned store): the record is put at its timestamp and
    forwarded only if put (an update older than the store's grace period is not), with the latest version
    before it as old value, as an ``OutOfOrderChange`` when a later version exists.
    """

    context: NodeContext

    def __init__(self, store_name: str, queryable: bool = False, flags: TableFlags | None = None) -> None:
        self.store_name = store_name
        #: the table was materialized under a name the user chose (Kafka's queryableName)
        self.queryable = queryable
        self.flags = flags if flags is not None else TableFlags()

    def init(self, context: Any) -> None:
        super().init(context)
        self.writer = (
            TableStoreWriter(context, self.store_name, self.flags.send_old_values)
            if (self.flags.materialized)
            else None
        )

    def process(self, record: Record) -> None:
        key = record.key
        if key is None:
            self.context.record_dropped("null key in table")
            return
        writer = self.writer
        if writer is None:
            self.context.forward(record.with_value(Change(record.value, None)))
            return
        found = writer.store.get(key)
        writer.put_and_forward(record, record.value, None if found is None else found.value)


class _OptionallyStoredTableOp(Processor):
    """What KTableFilter and KTableMapValues share: whether they send old values, and their own store's
    writer when they have one (``store_name``)."""

    context: NodeContext
    flags: TableFlags
    store_name: str | None

    def init(self, context: Any) -> None:
        super().init(context)
        self.send_old_values = self.flags.send_old_values
        self.writer = (
            None if self.store_name is None else TableStoreWriter(context, self.store_name, self.send_old_values)
        )


class KTableFilter(_OptionallyStoredTableOp):
    """Keeps rows matching ``predicate(key, value)``; an update that does not match becomes a tombstone.

    As Kafka's KTableFilter: when it sends old values (its parent sends them, or a downstream operation asked)
    an update where neither the new nor the old value passes is not forwarded at all (unless the table is
    versioned); without old values it cannot tell and forwards the tombstone. With its own store
    (``store_name``), the old value is the one in the store.
    """

    def __init__(self, predicate: Callable[[Any, Any], Any], negate: bool = False, flags: TableFlags | None = None,
                 store_name: str | None = None, versioned_semantics: bool = False) -> None:  # fmt: skip
        self.predicate = predicate
        self.negate = negate
        self.flags = flags if flags is not None else TableFlags()
        self.store_name = store_name
        self.versioned_semantics = versioned_semantics

    def _keep(self, key: Any, value: Any) -> Any:
        if value is None or bool(self.predicate(key, value)) is self.negate:
            return None
        return value

    def process(self, record: Record) -> None:
        key = record.key
        change: Change = record.value
        new = self._keep(key, change.new_value)
        old = None
        writer = self.writer
        if self.send_old_values:
            old = writer.old_value(key) if writer is not None else self._keep(key, change.old_value)
            if new is None and old is None and not self.versioned_semantics:
                return  # neither passes: nothing to say downstream
        if writer is not None:
            writer.put_and_forward(record, new, old)
        else:
            self.context.forward(record.with_value(type(change)(new, old)))  # out-of-order stays out-of-order


class KTableMapValues(_OptionallyStoredTableOp):
    """Maps the values of a table; tombstones stay tombstones. Old values are mapped only when sent (Kafka's
    KTableMapValues); with its own store (``store_name``) the old value is the one in the store."""

    def __init__(self, mapper: Callable[..., Any], with_key: bool = False, flags: TableFlags | None = None,
                 store_name: str | None = None) -> None:  # fmt: skip
        self.mapper = mapper
        self.with_key = with_key
        self.flags = flags if flags is not None else TableFlags()
        self.store_name = store_name

    def _map(self, key: Any, value: Any) -> Any:
        if value is None:
            return None
        return self.mapper(key, value) if self.with_key else self.mapper(value)

    def process(self, record: Record) -> None:
        key = record.key
        change: Change = record.value
        new = self._map(key, change.new_value)
        writer = self.writer
        if writer is not None:
            writer.put_and_forward(record, new, writer.old_value(key))
            return
        old = self._map(key, change.old_value) if self.send_old_values else None
        self.context.forward(record.with_value(type(change)(new, old)))


class KTableToStream(FusedProcessor):
    """Turns table changes into a stream of new values (deletes as None values)."""

    def fuse(self, downstream: Entry) -> Entry:
        def to_stream(key: Any, change: Change) -> None:
            downstream(key, change.new_value)

        return to_stream


class KTableMaterialize(Processor):
    """Writes a table's changes into a store so it can be queried (KTable ``store=...`` after an op).

    As Kafka's table processors with a queryable store: a non-versioned store takes every change and the
    change goes on as the latest; a versioned store puts it at its timestamp and it goes on only if put,
    latest or out-of-order as the store's put says.
    With ``flags`` (a table-table join's store, Kafka's ``KTableKTableJoinMerger``) the store's record cache
    forwards, as a table's own store: ``TableStoreWriter``.
    """

    context: NodeContext

    def __init__(self, store_name: str, flags: TableFlags | None = None) -> None:
        self.store_name = store_name
        self.flags = flags

    def init(self, context: Any) -> None:
        super().init(context)
        self.store = context.get_state_store(self.store_name)
        self.versioned = is_versioned(self.store)
        flags = self.flags
        self.writer = None if flags is None else TableStoreWriter(context, self.store_name, flags.send_old_values)

    def process(self, record: Record) -> None:
        change: Change = record.value
        new = change.new_value
        if self.writer is not None:
            self.writer.put_and_forward(record, new, change.old_value)
            return
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
