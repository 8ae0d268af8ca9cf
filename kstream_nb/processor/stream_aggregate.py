"""KStream aggregations into a KTable: aggregate (count is one) and reduce, per key in a store."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kstream_nb.processor.api import Change, ValueAndTimestamp
from kstream_nb.processor.node import Entry, FusedProcessor, NodeContext
from kstream_nb.processor.table_ops import timestamped_tuple_forwarder


class _KStreamFold(FusedProcessor):
    """What KStreamAggregate and KStreamReduce share: the store of the aggregates, and whether they forward
    their changes themselves (no record cache) or the cache's flush does."""

    context: NodeContext
    store_name: str

    def init(self, context: Any) -> None:
        super().init(context)
        self.store = context.get_state_store(self.store_name)
        self.forward_now = timestamped_tuple_forwarder(self.store, context)


class KStreamAggregate(_KStreamFold):
    """``agg = aggregator(key, value, agg or initializer())``; records with a null key or value are dropped.

    The result timestamp is the max of the previous result's and the record's (Kafka's rule). The change goes
    on with the aggregate it started from as old value: for a new key, the initializer's (Kafka's
    KStreamAggregate), so a table aggregation downstream subtracts it. With a cached store, results are
    forwarded as the cache flushes them (once per key and commit, the old value being the store's: none for a
    new key).
    """

    def __init__(
        self, store_name: str, initializer: Callable[[], Any], aggregator: Callable[[Any, Any, Any], Any]
    ) -> None:
        self.store_name = store_name
        self.initializer = initializer
        self.aggregator = aggregator

    def fuse(self, downstream: Entry) -> Entry:
        initializer, aggregator = self.initializer, self.aggregator

        def combine(key: Any, value: Any, old: ValueAndTimestamp | None) -> tuple[Any, Any]:
            old_agg = initializer() if old is None else old.value
            return aggregator(key, value, old_agg), old_agg

        return fused_update(self, combine, "aggregation", downstream)


class KStreamReduce(_KStreamFold):
    """``agg = reducer(agg, value)``; the first value of a key is taken as is (and goes on with no old value)."""

    def __init__(self, store_name: str, reducer: Callable[[Any, Any], Any]) -> None:
        self.store_name = store_name
        self.reducer = reducer

    def fuse(self, downstream: Entry) -> Entry:
        reducer = self.reducer

        def combine(key: Any, value: Any, old: ValueAndTimestamp | None) -> tuple[Any, Any]:
            return (value, None) if old is None else (reducer(old.value, value), old.value)

        return fused_update(self, combine, "reduce", downstream)


def fused_update(
    processor: _KStreamFold,
    combine: Callable[[Any, Any, ValueAndTimestamp | None], tuple[Any, Any]],
    what: str,
    downstream: Entry,
) -> Entry:
    """The step of an aggregation over the key and value: the update goes on as ``(key, Change)`` with
    the result's timestamp as the current one, without a Record (the path of every record of a count).
    ``combine(key, value, stored)`` answers the new aggregate and the old value to send with it."""
    rc = processor.context.record_context
    store = processor.store
    get, put = store.get, store.put
    forward_now = processor.forward_now
    record_dropped = processor.context.record_dropped
    reason = f"null key or value in {what}"

    def update(key: Any, value: Any) -> None:
        if key is None or value is None:
            record_dropped(reason)
            return
        timestamp = rc.timestamp
        old = get(key)
        new_agg, old_agg = combine(key, value, old)
        if old is not None and old.timestamp > timestamp:
            timestamp = old.timestamp
        put(key, ValueAndTimestamp(new_agg, timestamp))
        if forward_now:
            saved = rc.timestamp
            rc.timestamp = timestamp
            downstream(key, Change(new_agg, old_agg))
            rc.timestamp = saved

    return update
