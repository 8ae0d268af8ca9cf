"""KStream aggregations into a KTable: aggregate (count is one) and reduce, per key in a store."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kstream_nb.processor.api import Change, Processor, Record, ValueAndTimestamp
from kstream_nb.processor.node import NodeContext
from kstream_nb.processor.table_ops import timestamped_tuple_forwarder


class KStreamAggregate(Processor):
    """``agg = aggregator(key, value, agg or initializer())``; records with a null key or value are dropped.

    The result timestamp is the max of the previous result's and the record's (Kafka's rule). With a
    cached store, results are forwarded as the cache flushes them (once per key and commit).
    """

    context: NodeContext

    def __init__(
        self, store_name: str, initializer: Callable[[], Any], aggregator: Callable[[Any, Any, Any], Any]
    ) -> None:
        self.store_name = store_name
        self.initializer = initializer
        self.aggregator = aggregator

    def init(self, context: Any) -> None:
        super().init(context)
        self.store = context.get_state_store(self.store_name)
        self.forward_now = timestamped_tuple_forwarder(self.store, context)

    def process(self, record: Record) -> None:
        key, value = record.key, record.value
        if key is None or value is None:
            self.context.record_dropped("null key or value in aggregation")
            return
        old = self.store.get(key)
        if old is None:
            old_agg = self.initializer()
            timestamp = record.timestamp
        else:
            old_agg = old.value
            timestamp = max(record.timestamp, old.timestamp)
        new_agg = self.aggregator(key, value, old_agg)
        self.store.put(key, ValueAndTimestamp(new_agg, timestamp))
        if self.forward_now:
            self.context.forward(
                Record(key, Change(new_agg, old.value if old else None), timestamp, record.headers)
            )


class KStreamReduce(Processor):
    """``agg = reducer(agg, value)``; the first value of a key is taken as is."""

    context: NodeContext

    def __init__(self, store_name: str, reducer: Callable[[Any, Any], Any]) -> None:
        self.store_name = store_name
        self.reducer = reducer

    def init(self, context: Any) -> None:
        super().init(context)
        self.store = context.get_state_store(self.store_name)
        self.forward_now = timestamped_tuple_forwarder(self.store, context)

    def process(self, record: Record) -> None:
        key, value = record.key, record.value
        if key is None or value is None:
            self.context.record_dropped("null key or value in reduce")
            return
        old = self.store.get(key)
        if old is None:
            new_agg, timestamp = value, record.timestamp
        else:
            new_agg = self.reducer(old.value, value)
            timestamp = max(record.timestamp, old.timestamp)
        self.store.put(key, ValueAndTimestamp(new_agg, timestamp))
        if self.forward_now:
            self.context.forward(
                Record(key, Change(new_agg, old.value if old else None), timestamp, record.headers)
            )
