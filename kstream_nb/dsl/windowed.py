"""Windowed grouped streams: ``group_by_key().windowed_by(windows)`` then count/reduce/aggregate."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kstream_nb.dsl.functions import check_callable
from kstream_nb.dsl.ktable import KTable
from kstream_nb.processor.window_aggregate import (
    ON_WINDOW_CLOSE,
    ON_WINDOW_UPDATE,
    KStreamSessionWindowAggregate,
    KStreamSlidingWindowAggregate,
    KStreamWindowAggregate,
)
from kstream_nb.processor.windows import SessionWindows, SlidingWindows, TimeWindows
from kstream_nb.state.builders import WindowStoreBuilder
from kstream_nb.state.window_store import InMemorySessionStore, InMemoryWindowStore

if TYPE_CHECKING:
    from kstream_nb.dsl.grouped import KGroupedStream

Windows = TimeWindows | SlidingWindows | SessionWindows

#: Extra time windows are kept beyond size + grace, as Kafka's segmented stores do (>= one segment).
_SEGMENT_MS = 60_000


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
    """A grouped stream cut into windows; aggregations return a KTable keyed by ``Windowed(key, start, end)``."""

    def __init__(self, grouped: KGroupedStream, windows: Windows) -> None:
        if not isinstance(windows, (TimeWindows, SlidingWindows, SessionWindows)):
            raise TypeError(f"windowed_by needs TimeWindows, SlidingWindows or SessionWindows, got {windows!r}")
        self._grouped = grouped
        self.windows = windows
        self._emit = ON_WINDOW_UPDATE

    def emit_strategy(self, strategy: str) -> WindowedKStream:
        """``"on_window_update"`` (default: every update) or ``"on_window_close"`` (final results only)."""
        if strategy not in (ON_WINDOW_UPDATE, ON_WINDOW_CLOSE):
            raise ValueError(
                f"emit strategy must be {ON_WINDOW_UPDATE!r} or {ON_WINDOW_CLOSE!r}, got {strategy!r}"
            )
        self._emit = strategy
        return self

    def count(self, store: str | None = None) -> KTable:
        """Records per key and window."""
        return self._aggregate(_zero, _count_add, store, None, merger=lambda k, a, b: a + b)

    def reduce(self, reducer: Callable[[Any, Any], Any], store: str | None = None) -> KTable:
        """``reducer(aggregate, value)`` per key and window; the first value starts the aggregate."""
        check_callable(reducer, "reduce")
        return self._aggregate(
            _none, _reducing(reducer), store, self._grouped.value_serde,
            merger=lambda k, a, b: b if a is None else (a if b is None else reducer(a, b)),
        )  # fmt: skip

    def aggregate(self, initializer: Callable[[], Any], aggregator: Callable[[Any, Any, Any], Any],
                  merger: Callable[[Any, Any, Any], Any] | None = None, store: str | None = None,
                  value_serde: Any = None) -> KTable:  # fmt: skip
        """``aggregator(key, value, agg)`` per key and window; session windows also need ``merger(key, a, b)``."""
        check_callable(initializer, "aggregate initializer")
        check_callable(aggregator, "aggregate aggregator")
        if isinstance(self.windows, SessionWindows) and merger is None:
            raise TypeError("aggregate over SessionWindows needs merger(key, agg1, agg2) to merge sessions")
        return self._aggregate(initializer, aggregator, store, value_serde, merger=merger)

    def _aggregate(self, initializer: Callable[[], Any], aggregator: Callable[[Any, Any, Any], Any],
                   store: str | None, value_serde: Any, merger: Any) -> KTable:  # fmt: skip
        grouped = self._grouped
        builder = grouped._builder
        windows = self.windows
        store_name = store or builder.new_name("KSTREAM-AGGREGATE-STATE-STORE")
        stream = grouped._stream
        if stream.repartition_required:
            stream = stream._through_internal(
                grouped.name or store_name,
                None,
                None,
                grouped.key_serde,
                grouped.value_serde,
                filter_null_keys=True,
            )
        emit = self._emit
        make: Callable[[], Any]
        if isinstance(windows, TimeWindows):
            retention = windows.retention_ms + max(windows.retention_ms // 2, _SEGMENT_MS)
            make = lambda: InMemoryWindowStore(store_name, retention, windows.size_ms)  # noqa: E731
            processor: Callable[[], Any] = lambda: KStreamWindowAggregate(  # noqa: E731
                windows, store_name, initializer, aggregator, emit
            )
            close_ms = windows.grace_ms
        elif isinstance(windows, SlidingWindows):
            retention = windows.retention_ms + max(windows.retention_ms // 2, _SEGMENT_MS)
            make = lambda: InMemoryWindowStore(store_name, retention, windows.time_difference_ms)  # noqa: E731
            processor = lambda: KStreamSlidingWindowAggregate(  # noqa: E731
                windows, store_name, initializer, aggregator, emit
            )
            close_ms = windows.grace_ms
        else:
            retention = windows.retention_ms + max(windows.retention_ms // 2, _SEGMENT_MS)
            make = lambda: InMemorySessionStore(store_name, retention)  # noqa: E731
            processor = lambda: KStreamSessionWindowAggregate(  # noqa: E731
                windows, store_name, initializer, aggregator, merger, emit
            )
            close_ms = windows.grace_ms + windows.gap_ms
        store_builder = WindowStoreBuilder(store_name, make, grouped.key_serde, value_serde)
        if isinstance(windows, TimeWindows):
            # Kafka caches DSL window stores; here when statestore_cache_max_bytes > 0 (sliding and session
            # windows are written through)
            store_builder.with_caching_enabled()
        builder.topology.add_state_store(store_builder)
        node = builder.new_name("KSTREAM-AGGREGATE")
        builder.topology.add_processor(node, processor, stream.node, stores=[store_name])
        table = KTable(builder, node, grouped.key_serde, value_serde, store_name)
        table.window_close_ms = close_ms
        return table
