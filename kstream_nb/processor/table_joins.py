"""Joins with tables: stream-table (only the stream side triggers) and table-table (either side triggers).

Versioned tables (KIP-914/923, as Kafka's ``KStreamKTableJoinProcessor``): a stream record joins the table
version valid at its own timestamp; with a grace period it first waits in a time-ordered buffer until the
buffer's stream time minus grace reaches it (a record already that late joins at once). Table-table joins
drop out-of-order updates of a versioned table (counted as dropped records).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kstream_nb.errors import TopologyError
from kstream_nb.processor.api import Change, Processor, Record
from kstream_nb.processor.node import NodeContext
from kstream_nb.processor.table_ops import is_latest
from kstream_nb.processor.windows import Windowed
from kstream_nb.state.timestamped import ValueAndTimestamp
from kstream_nb.state.versioned import is_versioned

#: Kafka's message when a stream-table join has a grace period and the table is not versioned
NOT_VERSIONED = "KTable must be versioned to use a grace period in a stream table join."

INNER, LEFT, OUTER = "inner", "left", "outer"


def lookup(store: Any, key: Any) -> Any:
    """The table row for ``key`` as a ValueAndTimestamp, or None: Kafka's KTableValueGetter.

    Windowed tables (windowed aggregations) are looked up in their window store by (key, window start),
    session tables in their session store by (key, start, end) with the session end as timestamp.
    """
    if isinstance(key, Windowed):
        if hasattr(store, "fetch_session"):
            value = store.fetch_session(key.key, key.start, key.end)
            return None if value is None else ValueAndTimestamp(value, key.end)
        if hasattr(store, "fetch_range"):
            return store.fetch(key.key, key.start)
    return store.get(key)


@dataclass(frozen=True)
class JoinGetter:
    """How an unmaterialized table-table join result is looked up (Kafka's ``KTableKTableJoinValueGetter``):
    recomputed from both sides' getters (a store name, or a nested join) at lookup time; no store of its own."""

    kind: str
    joiner: Callable[[Any, Any], Any]
    left: TableGetter
    right: TableGetter


@dataclass(frozen=True)
class RowGetter:
    """A filter or map_values (not materialized) of a table looked up through a join's getter (Kafka's
    KTableFilter/KTableMapValues value getters): ``row(key, value)`` of the parent's row (None: no row), with
    the parent row's timestamp."""

    row: Callable[[Any, Any], Any]
    parent: TableGetter


#: what a table is looked up through: the name of the store holding its rows, or a getter computing them
TableGetter = str | JoinGetter | RowGetter


def getter_stores(getter: TableGetter) -> list[str]:
    """The stores a processor looking a table up through ``getter`` must be connected to."""
    if isinstance(getter, str):
        return [getter]
    if isinstance(getter, RowGetter):
        return getter_stores(getter.parent)
    return list(dict.fromkeys(getter_stores(getter.left) + getter_stores(getter.right)))


def connect(context: Any, getter: TableGetter) -> Any:
    """The object a processor looks a table up in (its ``get(key)`` answers a ValueAndTimestamp or None)."""
    if isinstance(getter, str):
        return context.get_state_store(getter)
    if isinstance(getter, RowGetter):
        return DerivedRows(getter.row, connect(context, getter.parent))
    return JoinedRows(getter.kind, getter.joiner, connect(context, getter.left), connect(context, getter.right))


class JoinedRows:
    """A join result's rows computed from its sides' current rows, as Kafka's join value getters:
    inner (KTableKTableInnerJoin): both rows, timestamp the max of theirs; left (KTableKTableLeftJoin): the left
    row, timestamp the max of both rows' (the left's alone without a right row); outer (KTableKTableOuterJoin):
    either row, timestamp the max of the present rows'."""

    def __init__(self, kind: str, joiner: Callable[[Any, Any], Any], left: Any, right: Any) -> None:
        self.kind = kind
        self.joiner = joiner
        self.left = left
        self.right = right

    def get(self, key: Any) -> ValueAndTimestamp | None:
        left = lookup(self.left, key)
        if left is None and self.kind != OUTER:
            return None
        right = lookup(self.right, key)
        if right is None and self.kind == INNER:
            return None
        if left is None and right is None:
            return None
        value = self.joiner(None if left is None else left.value, None if right is None else right.value)
        timestamps = [row.timestamp for row in (left, right) if row is not None]
        return None if value is None else ValueAndTimestamp(value, max(timestamps))


class DerivedRows:
    """The rows of a ``RowGetter``: the parent's rows passed through ``row``, with their timestamps."""

    def __init__(self, row: Callable[[Any, Any], Any], parent: Any) -> None:
        self.row = row
        self.parent = parent

    def get(self, key: Any) -> ValueAndTimestamp | None:
        found = lookup(self.parent, key)
        value = None if found is None or found.value is None else self.row(key, found.value)
        return None if value is None else ValueAndTimestamp(value, found.timestamp)


class KStreamKTableJoin(Processor):
    """Joins each stream record with the table's value for its key (inner: only when present).

    ``key_selector`` (stream-GlobalKTable joins) maps the stream record to the table key to look up. A
    versioned table is read as of the stream record's timestamp. With ``buffer_store`` (a grace period) the
    record waits in that ``TimeOrderedJoinBuffer`` and joins when evicted, with its own timestamp and headers.
    """

    context: NodeContext

    def __init__(self, table_store: TableGetter, joiner: Callable[[Any, Any], Any], left: bool,
                 key_selector: Callable[[Any, Any], Any] | None = None,
                 buffer_store: str | None = None) -> None:  # fmt: skip
        self.table_store = table_store
        self.joiner = joiner
        self.left = left
        self.key_selector = key_selector
        self.buffer_store = buffer_store

    def init(self, context: Any) -> None:
        super().init(context)
        self.table = connect(context, self.table_store)
        self.versioned = is_versioned(self.table)
        self.buffer: Any = None
        if self.buffer_store is not None:
            if not self.versioned:
                raise TopologyError(NOT_VERSIONED)
            self.buffer = context.get_state_store(self.buffer_store)

    def process(self, record: Record) -> None:
        key, value = record.key, record.value
        lookup = key if self.key_selector is None else self.key_selector(key, value)
        if value is None or (lookup is None and not self.left):
            self.context.record_dropped("null key or value in stream-table join")
            return
        buffer = self.buffer
        if buffer is None or not buffer.put(key, value, record.timestamp, record.headers):
            self._join(record, lookup)
            return
        for held in buffer.evict():
            self._join(Record(held.key, held.value, held.timestamp, held.headers))

    def _join(self, record: Record, lookup: Any = None) -> None:
        if lookup is None and self.key_selector is None:
            lookup = record.key
        if lookup is None:
            found = None
        elif self.versioned:
            found = self.table.get(lookup, record.timestamp)
        else:
            found = self.table.get(lookup)
        if found is None and not self.left:
            return
        self.context.forward(record.with_value(self.joiner(record.value, None if found is None else found.value)))


class KTableKTableJoinSide(Processor):
    """One side of a table-table join: on an update, join with the other table's current row.

    inner: emits only when the other row exists; left: every left update (but a delete of a row neither
    side has), right updates only when the left row exists; outer: every update unless neither side has a
    row. Timestamp: max of both rows.
    """

    context: NodeContext

    def __init__(self, kind: str, left_side: bool, other_store: TableGetter,
                 joiner: Callable[[Any, Any], Any]) -> None:  # fmt: skip
        self.kind = kind
        self.left_side = left_side
        self.other_store = other_store
        self.joiner = joiner

    def init(self, context: Any) -> None:
        super().init(context)
        self.other = connect(context, self.other_store)

    def _join(self, this: Any, other: Any) -> Any:
        return self.joiner(this, other) if self.left_side else self.joiner(other, this)

    def process(self, record: Record) -> None:
        key = record.key
        if key is None:
            self.context.record_dropped("null key in table-table join")
            return
        change: Change = record.value
        if not is_latest(change):
            self.context.record_dropped("out-of-order record from versioned table in table-table join")
            return
        found = lookup(self.other, key)
        other = None if found is None else found.value
        timestamp = record.timestamp if found is None else max(record.timestamp, found.timestamp)
        kind = self.kind
        if kind == INNER and other is None:
            return
        if kind == LEFT and not self.left_side:
            if other is None:
                return
            new = self._join(change.new_value, other)
            old = self._join(change.old_value, other)
        elif other is None and change.new_value is None and change.old_value is None:
            return  # outer, or the left side of a left join: deleting a row neither side has emits nothing
        else:
            keep_new = change.new_value is not None or (kind == OUTER and other is not None)
            keep_old = change.old_value is not None or (kind == OUTER and other is not None)
            new = self._join(change.new_value, other) if keep_new else None
            old = self._join(change.old_value, other) if keep_old else None
        self.context.forward(Record(key, Change(new, old), timestamp, record.headers))
