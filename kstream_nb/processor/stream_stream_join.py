"""Stream-stream windowed joins (inner, left, outer) with Kafka's handling of unmatched records.

Each side stores its records in its own window store and looks up the other side's. For left/outer
joins an unmatched record waits in the shared ``JoinBuffer`` and is emitted padded with None only once
its window has closed (window end + grace behind the shared stream time), unless a match arrives first.

As Kafka's ``KStreamKStreamJoin`` (4.x): every record, null key or value included, first advances the join's
shared stream time; an outer side (left of a left join, both of an outer join) forwards a null-key record
padded with None at once (KIP-962); other null keys or values are dropped and counted. The window stores
keep ``before + after + grace`` of history behind their own observed stream time: an older record of the
other side is no longer found (Kafka's window store fetch starts at observed stream time - retention + 1).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kstream_nb.processor.api import Processor, Record
from kstream_nb.processor.node import NodeContext
from kstream_nb.processor.window_time import OpenWindow
from kstream_nb.processor.windows import JoinWindows
from kstream_nb.state.join_buffer import JoinBuffer


class KStreamKStreamJoinSide(Processor):
    """One side of the join: store the record, join it with the other side's window, buffer if unmatched."""

    context: NodeContext

    def __init__(self, left_side: bool, windows: JoinWindows, joiner: Callable[[Any, Any], Any],
                 this_store: str, other_store: str, buffer_store: str | None, outer: bool) -> None:  # fmt: skip
        self.left_side = left_side
        self.windows = windows
        self.joiner = joiner
        self.this_store_name = this_store
        self.other_store_name = other_store
        self.buffer_store_name = buffer_store
        self.outer = outer
        self.retention = windows.before_ms + windows.after_ms + windows.grace_ms
        if left_side:
            self.before, self.after = windows.before_ms, windows.after_ms
        else:
            self.before, self.after = windows.after_ms, windows.before_ms

    def init(self, context: Any) -> None:
        super().init(context)
        self.this_store = context.get_state_store(self.this_store_name)
        self.other_store = context.get_state_store(self.other_store_name)
        self.buffer: JoinBuffer | None = (
            context.get_state_store(self.buffer_store_name) if self.buffer_store_name else None
        )

    def oldest_open_window(self) -> OpenWindow | None:
        """The join window of the oldest record still waiting for matches (``ts + after + grace >= stream
        time``, as the join buffer expires them): ``[stream time - grace - before - after, stream time - grace]``,
        the same on both sides. Stream time: the join's shared one (outer joins), else what the stores saw."""
        w = self.windows
        if not hasattr(self, "this_store"):
            return None  # not initialized yet (its task is restoring)
        if self.buffer is not None:
            stream_time = self.buffer.stream_time
        else:
            stream_time = max(self.this_store.observed_stream_time, self.other_store.observed_stream_time)
        if stream_time < 0:
            return None
        end = stream_time - w.grace_ms
        return OpenWindow(self.this_store_name, stream_time, end - w.before_ms - w.after_ms, end)

    def _join(self, this: Any, other: Any) -> Any:
        return self.joiner(this, other) if self.left_side else self.joiner(other, this)

    def process(self, record: Record) -> None:
        key, value, ts = record.key, record.value, record.timestamp
        buffer = self.buffer
        if buffer is not None:
            buffer.advance_stream_time(ts)
        if key is None or value is None:
            if key is None and value is not None and self.outer:
                self.context.forward(record.with_value(self._join(value, None)))
                return
            self.context.record_dropped("null key or value in stream-stream join")
            return
        self.this_store.put(key, value, ts)
        if buffer is not None and ts == buffer.stream_time:
            self._emit_expired(buffer)
        matched = False
        other = self.other_store
        oldest = other.observed_stream_time - self.retention
        for other_ts, other_value in other.fetch_range(key, max(0, ts - self.before), max(0, ts + self.after)):
            if other_ts <= oldest:
                continue  # behind the other store's retention: Kafka's window store no longer returns it
            matched = True
            if buffer is not None:
                buffer.remove(other_ts, not self.left_side, key)
            self.context.forward(Record(key, self._join(value, other_value), max(ts, other_ts), record.headers))
        if matched or not self.outer:
            return
        if buffer is None or self.windows.eager_null_results or max(0, ts + self.after) < buffer.stream_time:
            self.context.forward(record.with_value(self._join(value, None)))
        else:
            buffer.add(ts, self.left_side, key, value)

    def _emit_expired(self, buffer: JoinBuffer) -> None:
        grace = self.windows.grace_ms
        if not buffer.scan_due(self.after, grace):
            return
        for ts, is_left, key, value in buffer.expired(self.windows.after_ms, self.windows.before_ms, grace):
            joined = self.joiner(value, None) if is_left else self.joiner(None, value)
            self.context.forward(Record(key, joined, ts, ()))
