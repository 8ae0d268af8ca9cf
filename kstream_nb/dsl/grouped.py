"""Grouped streams and tables: ``count``, ``reduce``, ``aggregate`` into a KTable backed by a store."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kstream_nb.dsl.functions import check_callable
from kstream_nb.dsl.ktable import KTable
from kstream_nb.processor.change_serde import ChangeSerde
from kstream_nb.processor.stream_aggregate import KStreamAggregate, KStreamReduce
from kstream_nb.processor.table_aggregate import KTableAggregate, KTableReduce
from kstream_nb.topology.naming import repartition_topic

if TYPE_CHECKING:
    from kstream_nb.dsl.builder import StreamsBuilder
    from kstream_nb.dsl.cogrouped import CogroupedKStream
    from kstream_nb.dsl.kstream import KStream
    from kstream_nb.dsl.windowed import WindowedKStream


def _count_add(key: Any, value: Any, agg: int) -> int:
    return agg + 1


def _count_subtract(key: Any, value: Any, agg: int) -> int:
    return agg - 1


def _zero() -> int:
    return 0


class KGroupedStream:
    """A stream grouped by key; aggregations repartition first when the key was changed upstream."""

    def __init__(self, stream: KStream, key_serde: Any, value_serde: Any, name: str | None) -> None:
        self._stream = stream
        self._builder = stream._builder
        self.key_serde = key_serde if key_serde is not None else stream.key_serde
        self.value_serde = value_serde if value_serde is not None else stream.value_serde
        self.name = name

    def _aggregate(self, prefix: str, make: Callable[[str], Any], store: str | None, value_serde: Any,
                   burn: bool = False) -> KTable:  # fmt: skip
        builder = self._builder
        if burn and store is None:
            builder.new_name(f"{prefix}-STATE-STORE")  # Kafka's count() burns a number for compatibility
        store_name = store or builder.new_name(f"{prefix}-STATE-STORE")
        node = builder.new_name(prefix)
        stream = self.repartitioned(store_name)
        builder.add_timestamped_store(store_name, self.key_serde, value_serde, caching=True)
        builder.topology.add_processor(node, lambda: make(store_name), stream.node, stores=[store_name])
        return KTable(builder, node, self.key_serde, value_serde, store_name)

    def repartitioned(self, store_name: str) -> KStream:
        """The grouped stream, through ``<Grouped name or store name>-repartition`` when its key was changed
        upstream; the repartition takes three numbers of the name counter (sink, filter, source) after the
        aggregation's store and node names, as Kafka's ``GroupedStreamAggregateBuilder``."""
        stream = self._stream
        if not stream.repartition_required:
            return stream
        return stream._through_internal(self.name or store_name, None, None, self.key_serde, self.value_serde)

    def windowed_by(self, windows: Any) -> WindowedKStream:
        """Aggregate per key and window: ``TimeWindows``, ``SlidingWindows`` or ``SessionWindows``."""
        from kstream_nb.dsl.windowed import WindowedKStream

        return WindowedKStream(self, windows)

    def cogroup(self, aggregator: Callable[[Any, Any, Any], Any]) -> CogroupedKStream:
        """Starts a cogroup: ``aggregator(key, value, agg)`` for this stream; add others with ``.cogroup(g, agg)``
        and ``aggregate`` them all into one table (Kafka's KIP-150)."""
        from kstream_nb.dsl.cogrouped import CogroupedKStream

        return CogroupedKStream(self, aggregator)

    def count(self, store: str | None = None) -> KTable:
        """Number of records per key (records with a null value are not counted)."""
        return self._aggregate(
            "KSTREAM-AGGREGATE", lambda s: KStreamAggregate(s, _zero, _count_add), store, None, burn=True
        )

    def reduce(
        self, reducer: Callable[[Any, Any], Any], store: str | None = None, value_serde: Any = None
    ) -> KTable:
        """``reducer(aggregate, value)`` per key; the first value is the initial aggregate."""
        check_callable(reducer, "reduce")
        serde = value_serde if value_serde is not None else self.value_serde
        return self._aggregate("KSTREAM-REDUCE", lambda s: KStreamReduce(s, reducer), store, serde)

    def aggregate(
        self,
        initializer: Callable[[], Any],
        aggregator: Callable[[Any, Any, Any], Any],
        store: str | None = None,
        value_serde: Any = None,
    ) -> KTable:
        """``aggregator(key, value, aggregate)`` per key, starting from ``initializer()``."""
        check_callable(initializer, "aggregate initializer")
        check_callable(aggregator, "aggregate aggregator")
        return self._aggregate(
            "KSTREAM-AGGREGATE", lambda s: KStreamAggregate(s, initializer, aggregator), store, value_serde
        )

    def agg(self, store: str | None = None, **named: Any) -> KTable:
        """Pandas-style named aggregations: ``g.agg(total=("amount", "sum"), n=("amount", "count"))``.

        Functions: sum, count, min, max, mean, first, last over a field of dict values (nulls skipped).
        The result is a KTable of dicts; ``store`` names it for interactive queries.
        """
        from kstream_nb.dsl.named_agg import named_aggregation

        initializer, aggregator, finish = named_aggregation(named)
        state_store = f"{store}-agg-state" if store else None
        table = self._aggregate(
            "KSTREAM-AGGREGATE", lambda s: KStreamAggregate(s, initializer, aggregator), state_store, None
        )
        return table.map_values(finish, store=store)


class KGroupedTable:
    """A re-keyed table; aggregations subtract a row's old value and add its new one."""

    def __init__(
        self, builder: StreamsBuilder, node: str, key_serde: Any, value_serde: Any, name: str | None
    ) -> None:
        self._builder = builder
        self._node = node
        self.key_serde = key_serde
        self.value_serde = value_serde
        self.name = name

    def _aggregate(self, prefix: str, make: Callable[[str], Any], store: str | None, value_serde: Any) -> KTable:
        from kstream_nb.cluster.serde_specs import serde_from
        from kstream_nb.cluster.serdes import JsonSerde

        builder, topology = self._builder, self._builder.topology
        # Kafka's KGroupedTableImpl: the store (KTABLE-AGGREGATE-STATE-STORE, reduce too), the repartition's sink
        # and source, then the aggregation node
        store_name = store or builder.new_name("KTABLE-AGGREGATE-STATE-STORE")
        topic = repartition_topic(self.name or store_name)
        topology.add_repartition_topic(topic)
        inner = serde_from(self.value_serde) if self.value_serde is not None else JsonSerde()
        sink, source = builder.new_name("KSTREAM-SINK"), builder.new_name("KSTREAM-SOURCE")
        topology.add_sink(
            sink,
            topic,
            self._node,
            key_serde=self.key_serde,
            value_serde=ChangeSerde(inner),
        )
        topology.add_source(source, topic, key_serde=self.key_serde, value_serde=ChangeSerde(inner))
        builder.add_timestamped_store(store_name, self.key_serde, value_serde, caching=True)
        node = builder.new_name(prefix)
        topology.add_processor(node, lambda: make(store_name), source, stores=[store_name])
        return KTable(builder, node, self.key_serde, value_serde, store_name)

    def aggregate(
        self,
        initializer: Callable[[], Any],
        adder: Callable[[Any, Any, Any], Any],
        subtractor: Callable[[Any, Any, Any], Any],
        store: str | None = None,
        value_serde: Any = None,
    ) -> KTable:
        """``adder(key, new, agg)`` for new values and ``subtractor(key, old, agg)`` for replaced ones."""
        for fn, what in ((initializer, "initializer"), (adder, "adder"), (subtractor, "subtractor")):
            check_callable(fn, f"aggregate {what}")
        return self._aggregate(
            "KTABLE-AGGREGATE",
            lambda s: KTableAggregate(s, initializer, adder, subtractor),
            store,
            value_serde,
        )

    def reduce(
        self,
        adder: Callable[[Any, Any], Any],
        subtractor: Callable[[Any, Any], Any],
        store: str | None = None,
    ) -> KTable:
        """``adder(agg, new)`` and ``subtractor(agg, old)``; the first value is the initial aggregate."""
        check_callable(adder, "reduce adder")
        check_callable(subtractor, "reduce subtractor")
        return self._aggregate(
            "KTABLE-REDUCE", lambda s: KTableReduce(s, adder, subtractor), store, self.value_serde
        )

    def count(self, store: str | None = None) -> KTable:
        """Rows per group key: +1 when a row joins the group, -1 when it leaves."""
        return self._aggregate(
            "KTABLE-AGGREGATE", lambda s: KTableAggregate(s, _zero, _count_add, _count_subtract), store, None
        )
