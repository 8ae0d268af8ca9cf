"""Windowed aggregations: time (tumbling/hopping), sliding and session windows; emit on update or on close.

Each processor keeps its own observed stream time (Kafka's rule: per operator). A window is updated only
while open; records that fall only into closed windows are dropped and counted. Under emit-on-close, the
windows a record closes are read after its own update, from what the store keeps (see
``kstream_nb.state.dsl_window_store``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kstream_nb.processor.api import Change, Processor, Record
from kstream_nb.processor.node import NodeContext
from kstream_nb.processor.window_time import LateRecord, OpenWindow
from kstream_nb.processor.windows import SessionWindows, SlidingWindows, TimeWindows, Windowed
from kstream_nb.state.caching import caching_layer
from kstream_nb.state.changelogging import StoreMeter
from kstream_nb.state.store import sort_entries
from kstream_nb.state.timestamped import ValueAndTimestamp

ON_WINDOW_UPDATE = "on_window_update"
ON_WINDOW_CLOSE = "on_window_close"
NO_TIMESTAMP = -1


class _WindowAggregate(Processor):
    context: NodeContext
    windows: Any

    def __init__(self, store_name: str, initializer: Callable[[], Any], aggregator: Callable[[Any, Any, Any], Any],
                 emit: str = ON_WINDOW_UPDATE) -> None:  # fmt: skip
        if emit not in (ON_WINDOW_UPDATE, ON_WINDOW_CLOSE):
            raise ValueError(f"emit strategy must be {ON_WINDOW_UPDATE!r} or {ON_WINDOW_CLOSE!r}, got {emit!r}")
        self.store_name = store_name
        self.initializer = initializer
        self.aggregator = aggregator
        self.emit_on_update = emit == ON_WINDOW_UPDATE
        self.observed_stream_time = NO_TIMESTAMP
        self.last_emit_close_time = NO_TIMESTAMP

    def init(self, context: Any) -> None:
        super().init(context)
        self.store = context.get_state_store(self.store_name)
        # over a cached store, updates go downstream when the cache flushes them: the latest per window and
        # commit (Kafka's TimestampedCacheFlushListener, SessionCacheFlushListener); results on window close
        # are read from the store
        layer = caching_layer(self.store)
        self.forward_now = layer is None
        if layer is not None and self.emit_on_update:
            layer.set_flush_listener(self._forward_flushed)
        if not self.emit_on_update:
            # after a restart or a task move, emission takes up where it stopped instead of emitting again
            # the closed windows still in the store: Kafka keeps the last emit time with the committed offsets
            saved = context.processor_metadata_for_key(self.store_name)
            if saved is not None:
                self.last_emit_close_time = saved

    def _emitted_up_to(self, close_time: int) -> None:
        """Every window closed at ``close_time`` was emitted: kept with the next offset commit."""
        self.last_emit_close_time = close_time
        self.context.add_processor_metadata_key_value(self.store_name, close_time)

    def _close_time(self, stream_time: int) -> int:
        """Windows ending at or before this are closed (emitted, under emit-on-close) at ``stream_time``."""
        return int(stream_time - self.windows.grace_ms)

    def _forward(self, windowed: Windowed, new: Any, old: Any, timestamp: int) -> None:
        self.context.forward(Record(windowed, Change(new, old), timestamp, self.context.headers))

    def _window_ms(self) -> int:
        """How long a window of the store is (its end = start + this)."""
        raise NotImplementedError

    def _forward_flushed(self, window: Any, new: Any, old: Any, timestamp: int, headers: Any) -> None:
        """A window the cache flushed: ``window`` = (key, start), values ValueAndTimestamp."""
        key, start = window
        self.context.forward(
            Record(
                Windowed(key, start, start + self._window_ms()),
                Change(None if new is None else new.value, None if old is None else old.value),
                timestamp if new is None else new.timestamp,
                headers,
            )
        )

    def _drop(self, reason: str) -> None:
        self.context.record_dropped(reason)

    def _drop_late(self, key: Any, ts: int, start: int, end: int, close_time: int) -> None:
        """Counts a record for the closed window ``[start, end]`` and keeps it among the task's late records."""
        late = LateRecord(key, ts, start, end, self.observed_stream_time, close_time - end)
        self.context.record_dropped("record for a closed window", late)


class KStreamWindowAggregate(_WindowAggregate):
    """Tumbling/hopping windows ``[start, start + size)``; a record updates every open window containing it."""

    def __init__(self, windows: TimeWindows, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.windows = windows

    def _window_ms(self) -> int:
        return int(self.windows.size_ms)

    def process(self, record: Record) -> None:
        key, ts = record.key, record.timestamp
        if key is None:
            self._drop("null key in windowed aggregation")
            return
        if ts > self.observed_stream_time:
            self.observed_stream_time = ts
        close_time = self.observed_stream_time - self.windows.grace_ms
        size = self.windows.size_ms
        for start in self.windows.window_starts(ts):
            end = start + size
            if end <= close_time:
                self._drop_late(key, ts, start, end, close_time)
                continue
            old = self.store.fetch(key, start)
            if old is None:
                old_agg, new_ts = self.initializer(), ts
            else:
                old_agg, new_ts = old.value, max(ts, old.timestamp)
            new_agg = self.aggregator(key, record.value, old_agg)
            self.store.put(key, _stored(new_agg, new_ts), start)
            if self.emit_on_update and self.forward_now:
                self._forward(Windowed(key, start, end), new_agg, old_agg, new_ts)  # old: the initial value if new
        if not self.emit_on_update:
            self._emit_closed(close_time)

    def oldest_open_window(self) -> OpenWindow | None:
        """Windows ``[start, start + size)`` on the ``advance`` grid are open while ``end > stream time - grace``:
        the oldest open one is the first grid start above ``close time - size``."""
        if self.observed_stream_time == NO_TIMESTAMP:
            return None
        size, advance = self.windows.size_ms, self.windows.advance_ms
        start = max(0, ((self._close_time(self.observed_stream_time) - size) // advance + 1) * advance)
        return OpenWindow(self.store_name, self.observed_stream_time, start, start + size)

    def _emit_closed(self, close_time: int) -> None:
        if close_time <= self.last_emit_close_time:
            return
        size = self.windows.size_ms
        low = 0 if self.last_emit_close_time == NO_TIMESTAMP else self.last_emit_close_time - size + 1
        high = close_time - size
        if high >= max(low, 0):
            closed = [(start, key, vt) for key, start, vt in self.store.fetch_all(max(low, 0), high)]
            for start, key, vt in _by_start_then_key(closed):
                self._forward(Windowed(key, start, start + size), vt.value, None, vt.timestamp)
        self._emitted_up_to(close_time)


class KStreamSlidingWindowAggregate(_WindowAggregate):
    """Sliding windows ``[t - d, t]`` per record and right windows ``[t + 1, t + 1 + d]`` (inclusive)."""

    def __init__(self, windows: SlidingWindows, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.windows = windows

    def _window_ms(self) -> int:
        return int(self.windows.time_difference_ms)

    def process(self, record: Record) -> None:
        key, value, ts = record.key, record.value, record.timestamp
        if key is None or value is None:
            self._drop("null key or value in sliding-window aggregation")
            return
        if ts > self.observed_stream_time:
            self.observed_stream_time = ts
        d = self.windows.time_difference_ms
        close_time = self.observed_stream_time - self.windows.grace_ms
        if ts + 1 + d <= close_time:  # even the last window that could hold it, [ts, ts + d], has closed
            self._drop_late(key, ts, ts, ts + d, close_time)
            return
        if ts < d:
            self._process_early(key, value, ts, close_time)
        else:
            self._process(key, value, ts, close_time)
        if not self.emit_on_update:
            self._emit_closed(close_time)

    def _process(self, key: Any, value: Any, ts: int, close_time: int) -> None:
        d = self.windows.time_difference_ms
        starts: set[int] = set()
        left_agg = right_agg = None
        left_created = right_created = False
        previous_ts = None
        for start, vt in reversed(self.store.fetch_range(key, max(0, ts - 2 * d), ts + 1)):
            starts.add(start)
            end = start + d
            if start == ts + 1:
                right_created = True
            elif end > ts:
                if right_agg is None:
                    right_agg = vt
                self._update(key, value, start, vt, close_time, ts)
            elif end == ts:
                left_created = True
                self._update(key, value, start, vt, close_time, ts)
                if vt.timestamp < ts:
                    previous_ts = vt.timestamp
                else:
                    return
            else:
                left_agg = vt
                previous_ts = vt.timestamp
                break
        if previous_ts is not None and previous_ts + 1 not in starts and previous_ts + 1 + d >= ts:
            self._update(key, value, previous_ts + 1, ValueAndTimestamp(self.initializer(), ts), close_time, ts)
        if not left_created:
            if previous_ts is not None and ts - d <= previous_ts and left_agg is not None:
                vt = ValueAndTimestamp(left_agg.value, ts)
            else:
                vt = ValueAndTimestamp(self.initializer(), ts)
            self._update(key, value, ts - d, vt, close_time, ts)
        if not right_created and right_agg is not None and right_agg.timestamp > ts:
            self._create_right_window(key, ts, right_agg)

    def _process_early(self, key: Any, value: Any, ts: int, close_time: int) -> None:
        starts: set[int] = set()
        combined = None
        right_agg = None
        right_created = False
        previous_ts = None
        for start, vt in self.store.fetch_range(key, 0, ts + 1):
            starts.add(start)
            if start == 0:
                combined = vt
                if vt.timestamp < ts:
                    previous_ts = vt.timestamp
            elif start <= ts:
                right_agg = vt
                self._update(key, value, start, vt, close_time, ts)
            elif start == ts + 1:
                right_created = True
        if right_agg is None and combined is not None and combined.timestamp > ts:
            right_agg = combined
        if not right_created and right_agg is not None and right_agg.timestamp > ts:
            self._create_right_window(key, ts, right_agg)
        if previous_ts is not None and previous_ts + 1 not in starts:
            self._update(key, value, previous_ts + 1, ValueAndTimestamp(self.initializer(), ts), close_time, ts)
        initial = combined if combined is not None else ValueAndTimestamp(self.initializer(), ts)
        self._update(key, value, 0, initial, close_time, ts)

    def _create_right_window(self, key: Any, ts: int, agg: ValueAndTimestamp) -> None:
        start = ts + 1
        self.store.put(key, agg, start)
        if self.emit_on_update and self.forward_now:
            self._forward(
                Windowed(key, start, start + self.windows.time_difference_ms), agg.value, None, agg.timestamp
            )

    def _update(self, key: Any, value: Any, start: int, vt: ValueAndTimestamp, close_time: int, ts: int) -> None:
        end = start + self.windows.time_difference_ms
        if end < close_time:
            self._drop_late(key, ts, start, end, close_time)
            return
        new_agg = self.aggregator(key, value, vt.value)
        new_ts = ts if vt.value is None else max(ts, vt.timestamp)
        self.store.put(key, _stored(new_agg, new_ts), start)
        if self.emit_on_update and self.forward_now:
            self._forward(Windowed(key, start, end), new_agg, vt.value, new_ts)

    def oldest_open_window(self) -> OpenWindow | None:
        """Windows ``[start, start + d]`` (inclusive) are open while ``end >= stream time - grace``."""
        if self.observed_stream_time == NO_TIMESTAMP:
            return None
        d = self.windows.time_difference_ms
        start = max(0, self._close_time(self.observed_stream_time) - d)
        return OpenWindow(self.store_name, self.observed_stream_time, start, start + d)

    def _emit_closed(self, close_time: int) -> None:
        if close_time <= self.last_emit_close_time:
            return
        d = self.windows.time_difference_ms
        closed = [
            (start, key, vt)
            for key, start, vt in self.store.fetch_all()
            if self.last_emit_close_time <= start + d < close_time
        ]
        for start, key, vt in _by_start_then_key(closed):
            self._forward(Windowed(key, start, start + d), vt.value, None, vt.timestamp)
        self._emitted_up_to(close_time)


class KStreamSessionWindowAggregate(_WindowAggregate):
    """Session windows: a record merges every session of its key within the gap; replaced ones get tombstones."""

    def __init__(self, windows: SessionWindows, store_name: str, initializer: Callable[[], Any],
                 aggregator: Callable[[Any, Any, Any], Any], merger: Callable[[Any, Any, Any], Any],
                 emit: str = ON_WINDOW_UPDATE) -> None:  # fmt: skip
        super().__init__(store_name, initializer, aggregator, emit)
        self.windows = windows
        self.merger = merger

    def process(self, record: Record) -> None:
        key, ts = record.key, record.timestamp
        if key is None:
            self._drop("null key in session aggregation")
            return
        if ts > self.observed_stream_time:
            self.observed_stream_time = ts
        gap = self.windows.gap_ms
        close_time = self.observed_stream_time - self.windows.grace_ms - gap
        merged = self.store.find_sessions(key, ts - gap, ts + gap)
        agg = self.initializer()
        start, end = ts, ts
        for s, e, value in merged:
            agg = self.merger(key, agg, value)
            start, end = min(start, s), max(end, e)
        if end < close_time:
            self._drop_late(key, ts, start, end, close_time)
        else:
            self._merge_and_put(key, record.value, ts, start, end, merged, agg)
        if not self.emit_on_update:
            self._emit_closed(close_time)

    def _close_time(self, stream_time: int) -> int:
        return int(stream_time - self.windows.grace_ms - self.windows.gap_ms)

    def oldest_open_window(self) -> OpenWindow | None:
        """The stored session with the smallest start among those still open (``end >= stream time - grace -
        gap``): sessions exist only as data, so this reads the store (on demand, never per record)."""
        if self.observed_stream_time == NO_TIMESTAMP:
            return None
        close = self._close_time(self.observed_stream_time)
        store = self.store.inner if isinstance(self.store, StoreMeter) else self.store  # not counted as a scan
        # every kept session, also at the edge of the read retention; and through the record cache, if any
        kept = getattr(store, "all_kept", None)
        rows = store.all() if kept is None or caching_layer(self.store) is not None else []
        if kept is not None:
            rows = [*rows, *kept()]
        open_sessions = [(s, e) for _, s, e, _ in rows if e >= close]
        if not open_sessions:
            return None
        start, end = min(open_sessions)
        return OpenWindow(self.store_name, self.observed_stream_time, start, end)

    def _forward_flushed(self, window: Any, new: Any, old: Any, timestamp: int, headers: Any) -> None:
        """A session the cache flushed: ``window`` = (key, start, end), at the session's end (Kafka's
        SessionCacheFlushListener)."""
        key, start, end = window
        self.context.forward(Record(Windowed(key, start, end), Change(new, old), end, headers))

    def _merge_and_put(self, key: Any, value: Any, ts: int, start: int, end: int,
                       merged: list[tuple[int, int, Any]], agg: Any) -> None:  # fmt: skip
        if (start, end) != (ts, ts):
            for s, e, old in merged:
                self.store.remove(key, s, e)
                if self.emit_on_update and self.forward_now:
                    self._forward(Windowed(key, s, e), None, old, e)
        agg = self.aggregator(key, value, agg)
        self.store.put(key, start, end, agg)
        if self.emit_on_update and self.forward_now:
            self._forward(Windowed(key, start, end), agg, None, end)

    def _emit_closed(self, close_time: int) -> None:
        if close_time <= self.last_emit_close_time:
            return
        # every session the store still keeps, also past its retention (Kafka's emit-final session store)
        kept = getattr(self.store, "all_kept", self.store.all)
        last = self.last_emit_close_time
        closed = [(s, k, ValueAndTimestamp(v, e), e) for k, s, e, v in kept() if last <= e < close_time]
        closed.sort(key=lambda c: (c[3], c[0]))  # by end, start, then key (Kafka's time-ordered session store)
        for s, k, vt, e in closed:
            self._forward(Windowed(k, s, e), vt.value, None, e)
        self._emitted_up_to(close_time)


def _stored(agg: Any, timestamp: int) -> ValueAndTimestamp | None:
    """What a window store keeps for an aggregate: nothing for None (Kafka's ValueAndTimestamp.make: a null
    aggregate, as a windowed reduce of a null first value, deletes the window)."""
    return None if agg is None else ValueAndTimestamp(agg, timestamp)


def _by_start_then_key(rows: list[tuple[int, Any, Any]]) -> list[tuple[int, Any, Any]]:
    entries = sort_entries([(k, (s, vt)) for s, k, vt in rows])  # type: ignore[misc]
    entries.sort(key=lambda e: e[1][0])
    return [(s, k, vt) for k, (s, vt) in entries]
