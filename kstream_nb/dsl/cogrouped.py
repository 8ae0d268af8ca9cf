"""Cogrouping (Kafka's KIP-150): several grouped streams aggregated into one table through one store.

``g1.cogroup(agg1).cogroup(g2, agg2).aggregate(initializer)``: each input's records go through its own
aggregator into the shared store (one aggregate processor per input, Kafka's ``COGROUPKSTREAM-AGGREGATE``),
and every update comes out of one merge node (``COGROUPKSTREAM-MERGE``) as the table. As Kafka's
``CogroupedStreamAggregateBuilder``:

* an input whose key was changed upstream is repartitioned on its own, through ``<name>-repartition``
  (its ``group_by_key(name=...)``) or else ``<store>-repartition``; a cogrouped stream aggregated twice
  reuses the repartition of its first aggregation;
* all inputs must be co-partitioned (checked at start, as for joins);
* results follow the single-stream aggregations: a record with a null key or value is dropped, a result's
  timestamp is the largest of the record's and the previous result's; windowed cogroups emit on every
  update, each input's processor keeping its own stream time for late records.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kstream_nb.dsl.functions import check_callable
from kstream_nb.dsl.ktable import KTable
from kstream_nb.dsl.window_stores import (
    Windows,
    check_windows,
    close_after_ms,
    retention_ms,
    window_aggregate_supplier,
    window_store_builder,
    windowed_key_serde,
)
from kstream_nb.durations import Duration
from kstream_nb.errors import TopologyError
from kstream_nb.processor.stream_aggregate import KStreamAggregate
from kstream_nb.processor.stream_stateless import PassThrough
from kstream_nb.processor.windows import SessionWindows
from kstream_nb.topology.naming import repartition_topic

if TYPE_CHECKING:
    from kstream_nb.dsl.builder import StreamsBuilder
    from kstream_nb.dsl.grouped import KGroupedStream

Aggregator = Callable[[Any, Any, Any], Any]

AGGREGATE_NAME = "COGROUPKSTREAM-AGGREGATE"
MERGE_NAME = "COGROUPKSTREAM-MERGE"


class CogroupedKStream:
    """Grouped streams with one aggregator each, to aggregate into one table (``KGroupedStream.cogroup``)."""

    def __init__(self, grouped: KGroupedStream, aggregator: Aggregator) -> None:
        self._builder: StreamsBuilder = grouped._builder
        #: (grouped stream, aggregator) by grouped stream, in the order they were added (Kafka's LinkedHashMap:
        #: cogrouping a stream again replaces its aggregator)
        self._patterns: dict[int, tuple[KGroupedStream, Aggregator]] = {}
        #: the node each grouped stream's records come from (its repartition source once made)
        self._parents: dict[int, str] = {}
        self.cogroup(grouped, aggregator)

    def cogroup(self, grouped: KGroupedStream, aggregator: Aggregator) -> CogroupedKStream:
        """Adds ``grouped``, aggregated with ``aggregator(key, value, aggregate)`` into the shared aggregate."""
        from kstream_nb.dsl.grouped import KGroupedStream

        if not isinstance(grouped, KGroupedStream):
            raise TypeError(f"cogroup needs a grouped stream (group_by_key() or group_by(...)), got {grouped!r}")
        if grouped._builder is not self._builder:
            raise TopologyError("cogroup: the grouped streams come from different StreamsBuilders")
        check_callable(aggregator, "cogroup aggregator")
        self._patterns[id(grouped)] = (grouped, aggregator)
        return self

    def windowed_by(self, windows: Windows) -> WindowedCogroupedKStream:
        """Aggregates per key and window: ``TimeWindows``, ``SlidingWindows`` or ``SessionWindows``."""
        return WindowedCogroupedKStream(self, check_windows(windows))

    def aggregate(self, initializer: Callable[[], Any], store: str | None = None, value_serde: Any = None,
                  name: str | None = None) -> KTable:  # fmt: skip
        """The aggregate per key, from ``initializer()``, updated by each input's aggregator; ``store`` names
        the store for queries, ``name`` the processors (``<name>-cogroup-agg-<i>``, ``<name>-cogroup-merge``)."""
        check_callable(initializer, "aggregate initializer")
        builder = self._builder
        store_name = store or builder.new_name(f"{AGGREGATE_NAME}-STATE-STORE")
        parents = self._parent_nodes(store_name)
        builder.add_timestamped_store(store_name, self._key_serde(), value_serde, caching=True)
        return self._build(
            parents,
            lambda aggregator: lambda: KStreamAggregate(store_name, initializer, aggregator),
            store_name,
            value_serde,
            name,
        )

    # ---- building --------------------------------------------------------------------------------

    def _key_serde(self) -> Any:
        first, _ = next(iter(self._patterns.values()))
        return first.key_serde

    def _parent_nodes(self, store_name: str) -> list[str]:
        """Each input's parent node, repartitioning the inputs whose key was changed upstream."""
        topology = self._builder.topology
        parents = []
        for ident, (grouped, _) in self._patterns.items():
            parent = self._parents.get(ident)
            if parent is None:
                stream = grouped._stream
                if stream.repartition_required:
                    base = grouped.name or store_name
                    if repartition_topic(base) in topology.repartition_topics:
                        raise TopologyError(
                            f"cogroup: repartition topic {repartition_topic(base)!r} already exists; when more "
                            "than one cogrouped stream changed its key, name them: group_by_key(name=...)"
                        )
                    stream = stream._through_internal(base, None, None, grouped.key_serde, grouped.value_serde)
                parent = self._parents[ident] = stream.node
            parents.append(parent)
        return parents

    def _build(self, parents: list[str], supplier: Callable[[Aggregator], Callable[[], Any]], store_name: str,
               value_serde: Any, name: str | None) -> KTable:  # fmt: skip
        builder = self._builder
        topology = builder.topology
        nodes = []
        for i, (parent, (_, aggregator)) in enumerate(zip(parents, self._patterns.values())):
            node = f"{name}-cogroup-agg-{i}" if name else builder.new_name(AGGREGATE_NAME)
            topology.add_processor(node, supplier(aggregator), parent, stores=[store_name])
            nodes.append(node)
        merge = f"{name}-cogroup-merge" if name else builder.new_name(MERGE_NAME)
        topology.add_processor(merge, PassThrough, *nodes)
        if len(nodes) > 1:
            topology.add_copartition_group(*nodes)
        return KTable(builder, merge, self._key_serde(), value_serde, store_name)

    def __repr__(self) -> str:
        return f"CogroupedKStream({len(self._patterns)} grouped streams)"


class WindowedCogroupedKStream:
    """A cogrouped stream cut into windows; ``aggregate`` gives a table keyed by ``Windowed(key, start, end)``."""

    def __init__(self, cogrouped: CogroupedKStream, windows: Windows) -> None:
        self._cogrouped = cogrouped
        self.windows = windows

    def aggregate(self, initializer: Callable[[], Any], session_merger: Aggregator | None = None,
                  store: str | None = None, value_serde: Any = None, retention: Duration | None = None,
                  name: str | None = None) -> KTable:  # fmt: skip
        """The aggregate per key and window; session windows also need ``session_merger(key, agg1, agg2)``.

        ``retention``: how long the store keeps windows (Kafka's ``Materialized.withRetention``, at least
        size + grace; see ``kstream_nb.dsl.window_stores``).
        """
        check_callable(initializer, "aggregate initializer")
        windows = self.windows
        if isinstance(windows, SessionWindows):
            if session_merger is None:
                raise TypeError("aggregate over SessionWindows needs session_merger(key, agg1, agg2)")
            check_callable(session_merger, "aggregate session_merger")
        elif session_merger is not None:
            raise TypeError("session_merger applies only to SessionWindows")
        cogrouped = self._cogrouped
        builder = cogrouped._builder
        store_name = store or builder.new_name(f"{AGGREGATE_NAME}-STATE-STORE")
        keep_ms = retention_ms(windows, retention, store_name)
        parents = cogrouped._parent_nodes(store_name)
        key_serde = cogrouped._key_serde()
        builder.topology.add_state_store(
            window_store_builder(store_name, windows, keep_ms, key_serde, value_serde)
        )
        merger = session_merger
        table = cogrouped._build(
            parents,
            lambda aggregator: window_aggregate_supplier(windows, store_name, initializer, aggregator, merger),
            store_name,
            value_serde,
            name,
        )
        table.key_serde = windowed_key_serde(key_serde, windows)
        table.window_close_ms = close_after_ms(windows)
        return table

    def __repr__(self) -> str:
        return f"WindowedCogroupedKStream({self.windows!r})"
