"""The store and processor of a windowed aggregation, with Kafka Streams' retention rules.

Kafka's ``WindowStoreMaterializer``, ``SlidingWindowStoreMaterializer`` and ``SessionStoreMaterializer``:
a windowed aggregation's store keeps windows for its retention (``retention=`` on the aggregation, Kafka's
``Materialized.withRetention``), by default the least that can still hold every open window: size + grace
(time windows), 2 * time difference + grace (sliding windows: a record reads windows that far back to
create its own), inactivity gap + grace (sessions). A shorter retention is refused when the aggregation is
defined.

Kafka's default DSL store (RocksDB) drops old windows a segment at a time, segments of
``max(retention / 2, 60 s)``: a window is kept until its segment goes and read alone (``fetch``, a windowed
join's look-up) until then, while range reads (``fetch_range``, ``all``: interactive queries) see only the
windows within the retention. The stores built here read so (``kstream_nb.state.dsl_window_store``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kstream_nb.cluster.serde_specs import serde_from
from kstream_nb.cluster.serdes import Serde
from kstream_nb.cluster.windowed_serdes import SessionWindowedSerde, TimeWindowedSerde
from kstream_nb.durations import Duration, to_millis
from kstream_nb.errors import TopologyError
from kstream_nb.processor.window_aggregate import (
    ON_WINDOW_CLOSE,
    ON_WINDOW_UPDATE,
    KStreamSessionWindowAggregate,
    KStreamSlidingWindowAggregate,
    KStreamWindowAggregate,
)
from kstream_nb.processor.windows import SessionWindows, SlidingWindows, TimeWindows
from kstream_nb.state.builders import SessionStoreBuilder, WindowStoreBuilder
from kstream_nb.state.dsl_window_store import DslSessionStore, DslWindowStore

Windows = TimeWindows | SlidingWindows | SessionWindows


class RetentionError(TopologyError, ValueError):
    """A window or session store's retention is shorter than its windows stay open (Kafka's
    IllegalArgumentException from ``Materialized.withRetention``)."""


def check_windows(windows: Any, op: str = "windowed_by") -> Windows:
    """``windows`` if it is one of the aggregation windows, else a TypeError naming ``op``."""
    if not isinstance(windows, (TimeWindows, SlidingWindows, SessionWindows)):
        raise TypeError(f"{op} needs TimeWindows, SlidingWindows or SessionWindows, got {windows!r}")
    return windows


def minimum_retention_ms(windows: Windows) -> int:
    """How long the store must keep a window: also the default retention, as in Kafka Streams."""
    if isinstance(windows, TimeWindows):
        return windows.size_ms + windows.grace_ms
    if isinstance(windows, SlidingWindows):
        return 2 * windows.time_difference_ms + windows.grace_ms
    return windows.gap_ms + windows.grace_ms


def retention_ms(windows: Windows, retention: Duration | None, store_name: str) -> int:
    """The store's retention: ``retention`` if given (checked against the windows), else the minimum."""
    minimum = minimum_retention_ms(windows)
    if retention is None:
        return minimum
    ms = to_millis(retention, "retention")
    if ms < minimum:
        if isinstance(windows, TimeWindows):
            what = (
                f"its window size plus the grace period (size={windows.size_ms} ms, grace={windows.grace_ms} ms)"
            )
        elif isinstance(windows, SlidingWindows):
            what = (
                f"2 * time difference plus the grace period (time difference={windows.time_difference_ms} ms, "
                f"grace={windows.grace_ms} ms)"
            )
        else:
            what = (
                f"the session inactivity gap plus the grace period (gap={windows.gap_ms} ms, "
                f"grace={windows.grace_ms} ms)"
            )
        kind = "session" if isinstance(windows, SessionWindows) else "window"
        raise RetentionError(
            f"the retention period of the {kind} store {store_name!r} must be no smaller than {what}; "
            f"got retention={ms} ms"
        )
    return ms


def close_after_ms(windows: Windows) -> int:
    """How long after a window's end it closes: grace (plus the gap for sessions)."""
    if isinstance(windows, SessionWindows):
        return windows.grace_ms + windows.gap_ms
    return windows.grace_ms


def windowed_key_serde(key_serde: Any, windows: Windows) -> Serde | None:
    """The key serde of a windowed aggregation's table, as Kafka's: the grouping's key serde inside a
    ``TimeWindowedSerde`` (window size; a sliding window's time difference) or ``SessionWindowedSerde``, so its
    records go out as Java's windowed keys; None (the app's default, JSON for a Windowed key) when it has none."""
    if key_serde is None:
        return None
    inner = serde_from(key_serde)
    if isinstance(windows, SessionWindows):
        return SessionWindowedSerde(inner)
    return TimeWindowedSerde(
        inner, windows.size_ms if isinstance(windows, TimeWindows) else windows.time_difference_ms
    )


def window_store_builder(store_name: str, windows: Windows, retention: int, key_serde: Any, value_serde: Any,
                         emit: str = ON_WINDOW_UPDATE) -> WindowStoreBuilder:  # fmt: skip
    """The store of a windowed aggregation with retention ``retention`` ms (in memory unless the app's
    ``default_dsl_store`` is RocksDB); cached as Kafka's: time-window stores always, sliding-window and session
    stores unless the aggregation emits on window close."""
    final = emit == ON_WINDOW_CLOSE
    builder: WindowStoreBuilder
    if isinstance(windows, SessionWindows):
        make_session = lambda: DslSessionStore(store_name, retention)  # noqa: E731
        builder = SessionStoreBuilder(store_name, make_session, key_serde, value_serde)
    else:
        size = windows.size_ms if isinstance(windows, TimeWindows) else windows.time_difference_ms
        make_window = lambda: DslWindowStore(store_name, retention, size, final)  # noqa: E731
        builder = WindowStoreBuilder(store_name, make_window, key_serde, value_serde)
    if isinstance(windows, TimeWindows) or not final:
        # cached when statestore_cache_max_bytes > 0 (WindowStoreMaterializer, SlidingWindowStoreMaterializer,
        # SessionStoreMaterializer: emit-on-close sliding and session stores are written through)
        builder.with_caching_enabled()
    return builder


def window_aggregate_supplier(
    windows: Windows,
    store_name: str,
    initializer: Callable[[], Any],
    aggregator: Callable[[Any, Any, Any], Any],
    merger: Callable[[Any, Any, Any], Any] | None = None,
    emit: str = ON_WINDOW_UPDATE,
) -> Callable[[], Any]:
    """A supplier of the processor aggregating records into ``windows`` in store ``store_name``."""
    if isinstance(windows, TimeWindows):
        return lambda: KStreamWindowAggregate(windows, store_name, initializer, aggregator, emit)
    if isinstance(windows, SlidingWindows):
        return lambda: KStreamSlidingWindowAggregate(windows, store_name, initializer, aggregator, emit)
    if merger is None:
        raise TypeError("an aggregation over SessionWindows needs merger(key, agg1, agg2) to merge sessions")
    merge = merger
    return lambda: KStreamSessionWindowAggregate(windows, store_name, initializer, aggregator, merge, emit)
