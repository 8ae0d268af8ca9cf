"""Aggregations of a re-keyed KTable: each change subtracts the old value and adds the new one."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kstream_nb.processor.api import Change, Processor, Record, ValueAndTimestamp
from kstream_nb.processor.node import NodeContext
from kstream_nb.processor.table_ops import timestamped_tuple_forwarder


class _KTableFold(Processor):
    """What KTableAggregate and KTableReduce share: per change, take the old value out of the key's
    aggregate and put the new one in; a None aggregate deletes the row.

    With a cached store, results are forwarded as the cache flushes them (once per key and commit).
    """

    context: NodeContext
    store_name: str
    #: why a record with a null key is dropped
    _null_key_reason: str

    def init(self, context: Any) -> None:
        super().init(context)
        self.store = context.get_state_store(self.store_name)
        self.forward_now = timestamped_tuple_forwarder(self.store, context)

    def _subtract(self, key: Any, old_value: Any, agg: Any) -> Any:
        raise NotImplementedError

    def _add(self, key: Any, new_value: Any, agg: Any) -> Any:
        """``agg`` is None when the key has no aggregate (yet, or any more)."""
        raise NotImplementedError

    def process(self, record: Record) -> None:
        key = record.key
        if key is None:
            self.context.record_dropped(self._null_key_reason)
            return
        change: Change = record.value
        old = self.store.get(key)
        old_agg = old.value if old is not None else None
        timestamp = record.timestamp
        agg = old_agg
        if change.old_value is not None and old_agg is not None:
            agg = self._subtract(key, change.old_value, old_agg)
            timestamp = max(timestamp, old.timestamp)
        if change.new_value is not None:
            agg = self._add(key, change.new_value, agg)
            if old is not None:
                timestamp = max(record.timestamp, old.timestamp)
        self.store.put(key, None if agg is None else ValueAndTimestamp(agg, timestamp))
        if self.forward_now:
            self.context.forward(Record(key, Change(agg, old_agg), timestamp, record.headers))


class KTableAggregate(_KTableFold):
    """``subtractor(key, old, agg)`` then ``adder(key, new, agg)``; a None result deletes the row."""

    _null_key_reason = "null key in table aggregation"

    def __init__(
        self,
        store_name: str,
        initializer: Callable[[], Any],
        adder: Callable[[Any, Any, Any], Any],
        subtractor: Callable[[Any, Any, Any], Any],
    ) -> None:
        self.store_name = store_name
        self.initializer = initializer
        self.adder = adder
        self.subtractor = subtractor

    def _subtract(self, key: Any, old_value: Any, agg: Any) -> Any:
        return self.subtractor(key, old_value, agg)

    def _add(self, key: Any, new_value: Any, agg: Any) -> Any:
        return self.adder(key, new_value, self.initializer() if agg is None else agg)


class KTableReduce(_KTableFold):
    """``subtractor(agg, old)`` then ``adder(agg, new)``; the first value of a key is taken as is."""

    _null_key_reason = "null key in table reduce"

    def __init__(
        self, store_name: str, adder: Callable[[Any, Any], Any], subtractor: Callable[[Any, Any], Any]
    ) -> None:
        self.store_name = store_name
        self.adder = adder
        self.subtractor = subtractor

    def _subtract(self, key: Any, old_value: Any, agg: Any) -> Any:
        return self.subtractor(agg, old_value)

    def _add(self, key: Any, new_value: Any, agg: Any) -> Any:
        return new_value if agg is None else self.adder(agg, new_value)
