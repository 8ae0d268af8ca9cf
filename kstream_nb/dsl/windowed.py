"""Windowed grouped streams: ``group_by_key().windowed_by(windows)`` then count/reduce/aggregate/agg.

``retention=`` on an aggregation is Kafka's ``Materialized.withRetention``: how long the store keeps
windows (at least size + grace; see ``kstream_nb.dsl.window_stores``).
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
from kstream_nb.processor.window_aggregate import ON_WINDOW_CLOSE, ON_WINDOW_UPDATE
from kstream_nb.processor.windows import SessionWindows, SlidingWindows

if TYPE_CHECKING:
    from kstream_nb.dsl.grouped import KGroupedStream


def _count_add(key: Any, value: Any, agg: int) -> int:
    return agg + 1


def _zero() -> int:
    return 0


def _reducing(reducer: Callable[[Any, Any], Any]) -> Callable[[Any, Any, Any], Any]:
    def aggregate(key: Any, value: Any, agg: Any) -> Any:
        return value if agg is None else reducer(agg, value)

    return aggregate


def _none() -> None:
    return None


class WindowedKStream:
    """A grouped stream cut into windows; aggregations return a KTable keyed by ``Windowed(key, start, end)``.

    As in Kafka Streams, when the grouping has a key serde the table's key serde is that serde in Kafka's windowed
    format (``TimeWindowedSerde`` with the window size, ``SessionWindowedSerde``), so ``to_stream().to(topic)``
    writes what a Java app writes; without one, ``Windowed`` keys go out with the default serde (JSON).
    """

    def __init__(self, grouped: KGroupedStream, windows: Windows) -> None:
        self._grouped = grouped
        self.windows = check_windows(windows)
        self._emit = ON_WINDOW_UPDATE

    def emit_strategy(self, strategy: str) -> WindowedKStream:
        """``"on_window_update"`` (default: every update) or ``"on_window_close"`` (final results only)."""
        if strategy not in (ON_WINDOW_UPDATE, ON_WINDOW_CLOSE):
            raise ValueError(
                f"emit strategy must be {ON_WINDOW_UPDATE!r} or {ON_WINDOW_CLOSE!r}, got {strategy!r}"
            )
        self._emit = strategy
        return self

    def count(self, store: str | None = None, retention: Duration | None = None) -> KTable:
        """Records per key and window; ``retention``: how long the store keeps windows."""
        return self._aggregate(_zero, _count_add, store, None, lambda k, a, b: a + b, retention, "KSTREAM-COUNT")

    def reduce(self, reducer: Callable[[Any, Any], Any], store: str | None = None,
               retention: Duration | None = None) -> KTable:  # fmt: skip
        """``reducer(aggregate, value)`` per key and window; the first value starts the aggregate."""
        check_callable(reducer, "reduce")
        return self._aggregate(
            _none, _reducing(reducer), store, self._grouped.value_serde,
            lambda k, a, b: b if a is None else (a if b is None else reducer(a, b)), retention, "KSTREAM-REDUCE",
        )  # fmt: skip

    def aggregate(self, initializer: Callable[[], Any], aggregator: Callable[[Any, Any, Any], Any],
                  merger: Callable[[Any, Any, Any], Any] | None = None, store: str | None = None,
                  value_serde: Any = None, retention: Duration | None = None) -> KTable:  # fmt: skip
        """``aggregator(key, value, agg)`` per key and window; session windows also need ``merger(key, a, b)``."""
        check_callable(initializer, "aggregate initializer")
        check_callable(aggregator, "aggregate aggregator")
        if isinstance(self.windows, SessionWindows) and merger is None:
            raise TypeError("aggregate over SessionWindows needs merger(key, agg1, agg2) to merge sessions")
        return self._aggregate(initializer, aggregator, store, value_serde, merger, retention)

    def agg(self, store: str | None = None, retention: Duration | None = None, **named: Any) -> KTable:
        """Pandas-style named aggregations per key and window: ``w.agg(total=("amount", "sum"))``.

        The same functions as ``KGroupedStream.agg`` (sum, count, min, max, mean, first, last; nulls skipped);
        sessions merge their partial aggregates. The running state lives in the window store
        ``{store}-agg-state``; ``store`` names the finished rows (keyed by ``Windowed``), as ``agg`` on a
        grouped stream does.
        """
        from kstream_nb.dsl.named_agg import named_aggregation, named_merger

        initializer, aggregator, finish = named_aggregation(named)
        merger = named_merger(named) if isinstance(self.windows, SessionWindows) else None
        state_store = f"{store}-agg-state" if store else None
        table = self._aggregate(initializer, aggregator, state_store, None, merger, retention)
        return table.map_values(finish, store=store)

    def _aggregate(self, initializer: Callable[[], Any], aggregator: Callable[[Any, Any, Any], Any],
                   store: str | None, value_serde: Any, merger: Any,
                   retention: Duration | None, prefix: str = "KSTREAM-AGGREGATE") -> KTable:  # fmt: skip
        grouped = self._grouped
        builder = grouped._builder
        windows = self.windows
        # Kafka's names: count() burns a number (not over sliding windows), reduce is KSTREAM-REDUCE; the store,
        # the node, then the repartition's
        if prefix == "KSTREAM-COUNT":
            prefix = "KSTREAM-AGGREGATE"
            if store is None and not isinstance(windows, SlidingWindows):
                builder.new_name(f"{prefix}-STATE-STORE")
        store_name = store or builder.new_name(f"{prefix}-STATE-STORE")
        keep_ms = retention_ms(windows, retention, store_name)
        node = builder.new_name(prefix)
        stream = grouped.repartitioned(store_name)
        builder.topology.add_state_store(
            window_store_builder(store_name, windows, keep_ms, grouped.key_serde, value_serde, self._emit)
        )
        processor = window_aggregate_supplier(windows, store_name, initializer, aggregator, merger, self._emit)
        builder.topology.add_processor(node, processor, stream.node, stores=[store_name])
        table = KTable(builder, node, windowed_key_serde(grouped.key_serde, windows), value_serde, store_name)
        table.window_close_ms = close_after_ms(windows)
        return table
