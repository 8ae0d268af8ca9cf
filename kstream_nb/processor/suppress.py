"""``KTable.suppress``: holds table updates back until their window closes or a time limit passes.

The buffer keeps the latest update per key with a buffer time (window end, or the time the key first
entered the buffer); when stream time passes buffer time + the suppression duration, the key is
released. Final-result suppression never releases tombstones.

The buffer is a change-logged in-memory store (``kstream_nb.state.suppression_buffer``): updates held back
when an instance stops or dies are restored with the task and released when their time comes, wherever the
task runs next.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from kstream_nb.durations import Duration, to_millis
from kstream_nb.errors import StreamsError
from kstream_nb.processor.api import Change, Processor, Record, ValueAndTimestamp
from kstream_nb.processor.node import NodeContext
from kstream_nb.processor.windows import Windowed
from kstream_nb.state.store import json_order
from kstream_nb.state.suppression_buffer import BufferedUpdate, SuppressionBuffer


@dataclass(frozen=True)
class BufferConfig:
    """Bounds of a suppression buffer and what to do when they are hit (emit early or fail)."""

    max_records: int | None = None
    max_bytes: int | None = None
    emit_early: bool = True

    @classmethod
    def unbounded(cls) -> BufferConfig:
        return cls()

    @classmethod
    def with_max_records(cls, n: int) -> BufferConfig:
        return cls(max_records=n)

    @classmethod
    def with_max_bytes(cls, n: int) -> BufferConfig:
        return cls(max_bytes=n)

    def emit_early_when_full(self) -> BufferConfig:
        return BufferConfig(self.max_records, self.max_bytes, True)

    def shut_down_when_full(self) -> BufferConfig:
        return BufferConfig(self.max_records, self.max_bytes, False)


@dataclass(frozen=True)
class Suppressed:
    """What ``suppress`` waits for: window close (final results) or a time limit per key."""

    until_window_closes: bool
    time_limit_ms: int
    buffer: BufferConfig

    @classmethod
    def window_closes(cls, buffer: BufferConfig | None = None) -> Suppressed:
        return cls(True, 0, buffer or BufferConfig.unbounded())

    @classmethod
    def time_limit(cls, limit: Duration, buffer: BufferConfig | None = None) -> Suppressed:
        return cls(False, to_millis(limit, "time limit"), buffer or BufferConfig.unbounded())


def until_window_closes(buffer: BufferConfig | None = None) -> Suppressed:
    """Only the final result of each window, once stream time passes window end + grace."""
    if buffer is not None and buffer.emit_early and (buffer.max_records or buffer.max_bytes):
        raise StreamsError(
            "final-result suppression cannot emit early: use BufferConfig.unbounded() or shut_down_when_full()"
        )
    return Suppressed.window_closes(buffer)


def until_time_limit(limit: Duration, buffer: BufferConfig | None = None) -> Suppressed:
    """The latest update per key, released ``limit`` after the key first entered the buffer."""
    return Suppressed.time_limit(limit, buffer)


class SuppressedView:
    """Where a suppressed table's rows can be looked up (by a join), set while the DSL builds: a store the
    suppress processor keeps as Kafka's suppressed value getter answers — for a buffered key the value it had
    before it was buffered (with timestamp -1), else the parent's current value (what was last emitted)."""

    __slots__ = ("store_name",)

    def __init__(self) -> None:
        self.store_name: str | None = None


class KTableSuppress(Processor):
    """Buffers table changes per key and releases them by buffer time, then key."""

    context: NodeContext

    def __init__(self, suppressed: Suppressed, window_close_ms: int, store_name: str,
                 view: SuppressedView | None = None) -> None:  # fmt: skip
        self.suppressed = suppressed
        self.view = view
        self._final = suppressed.until_window_closes
        self._bounded = suppressed.buffer.max_records is not None or suppressed.buffer.max_bytes is not None
        self.duration = window_close_ms if self._final else suppressed.time_limit_ms
        self.store_name = store_name
        self.observed_stream_time = -1
        #: the buffered updates by key: the buffer store's own dict (read here, written through the store)
        self.buffer: dict[Any, BufferedUpdate] = {}
        #: no buffered key has a buffer time below this (lets _enforce skip the scan while nothing is due)
        self._min_buffer_time = _NOTHING_BUFFERED
        #: with a byte bound: each buffered key's size estimate, and their sum
        self._sizes: dict[Any, int] | None = {} if suppressed.buffer.max_bytes is not None else None
        self._bytes = 0

    def init(self, context: Any) -> None:
        super().init(context)
        self.store: SuppressionBuffer = context.get_state_store(self.store_name)
        self.view_store: Any = None
        if self.view is not None and self.view.store_name is not None:
            self.view_store = context.get_state_store(self.view.store_name)
        self.buffer = self.store.held
        for key, held in self.buffer.items():  # restored from the changelog
            self._track_size(key, held.change)
            # stream time had passed every buffered update, and nothing was due then
            self.observed_stream_time = max(self.observed_stream_time, held.timestamp)
        self._min_buffer_time = min((held[0] for held in self.buffer.values()), default=_NOTHING_BUFFERED)

    def process(self, record: Record) -> None:
        if record.timestamp > self.observed_stream_time:
            self.observed_stream_time = record.timestamp
        key = record.key
        if self._final:
            if not isinstance(key, Windowed):
                raise StreamsError(
                    "suppress(until_window_closes) needs a windowed KTable (windowed_by(...) upstream)"
                )
            buffer_time = key.end
        else:
            previous = self.buffer.get(key)
            buffer_time = previous[0] if previous is not None else record.timestamp
        if self.view_store is not None and key not in self.buffer:
            # Kafka's buffer keeps the change's old value as the key's prior value, which its getter answers
            self._set_view(key, record.value.old_value, -1)
        self.store.put(key, BufferedUpdate(buffer_time, record.timestamp, record.headers, record.value))
        if self._sizes is not None:
            self._track_size(key, record.value)
        if buffer_time < self._min_buffer_time:
            self._min_buffer_time = buffer_time
        if self._bounded or self._min_buffer_time <= self.observed_stream_time - self.duration:
            self._enforce()

    def _enforce(self) -> None:
        expiry = self.observed_stream_time - self.duration
        if self._min_buffer_time <= expiry:
            due = [(held[0], k) for k, held in self.buffer.items() if held[0] <= expiry]
            for _, key in _ordered(due):
                self._emit(key)
            self._min_buffer_time = min((held[0] for held in self.buffer.values()), default=_NOTHING_BUFFERED)
        config = self.suppressed.buffer
        while self._bounded and self._over_capacity(config):
            if not config.emit_early:
                raise StreamsError(
                    f"suppression buffer full ({len(self.buffer)} records; limit {config.max_records} records, "
                    f"{config.max_bytes} bytes) and configured to shut down when full"
                )
            oldest = _ordered([(held[0], k) for k, held in self.buffer.items()])[0][1]
            self._emit(oldest)
            self._min_buffer_time = min((held[0] for held in self.buffer.values()), default=_NOTHING_BUFFERED)

    def _over_capacity(self, config: BufferConfig) -> bool:
        if config.max_records is not None and len(self.buffer) > config.max_records:
            return True
        return config.max_bytes is not None and self._bytes > config.max_bytes

    def _track_size(self, key: Any, change: Change) -> None:
        """Keeps the byte count of a byte-bounded buffer: the JSON size of key, new and old value."""
        if self._sizes is not None:
            size = len(orjson.dumps([key, change.new_value, change.old_value], default=str))
            self._bytes += size - self._sizes.get(key, 0)
            self._sizes[key] = size

    def _emit(self, key: Any) -> None:
        held = self.store.delete(key)
        if self._sizes is not None:
            self._bytes -= self._sizes.pop(key)
        if self.view_store is not None:  # no longer buffered: the parent's value
            self._set_view(key, held.change.new_value, held.timestamp)
        if held.change.new_value is None and self._final:
            return
        self.context.forward(Record(key, held.change, held.timestamp, held.headers))

    def _set_view(self, key: Any, value: Any, timestamp: int) -> None:
        self.view_store.put(key, None if value is None else ValueAndTimestamp(value, timestamp))


_NOTHING_BUFFERED = 2**63


def _ordered(entries: list[tuple[int, Any]]) -> list[tuple[int, Any]]:
    """By buffer time, then key (windowed: key, then window start); keys of mixed types by their JSON form."""
    try:
        # no two entries tie on (time, key, start): the last item, the key itself, is never compared
        decorated = [(t, k.key, k.start, k) if type(k) is Windowed else (t, k, 0, k) for t, k in entries]
        decorated.sort()
    except TypeError:
        return sorted(entries, key=lambda e: (e[0], json_order(e[1])))
    return [(d[0], d[3]) for d in decorated]
