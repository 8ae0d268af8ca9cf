"""``KTable.suppress``: holds table updates back until their window closes or a time limit passes.

The buffer keeps the latest update per key with a buffer time (window end, or the time the key first
entered the buffer); when stream time passes buffer time + the suppression duration, the key is
released. Final-result suppression never releases tombstones.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from kstream_nb.durations import Duration, to_millis
from kstream_nb.errors import StreamsError
from kstream_nb.processor.api import Change, Processor, Record
from kstream_nb.processor.node import NodeContext
from kstream_nb.processor.windows import Windowed
from kstream_nb.state.store import json_order


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


class KTableSuppress(Processor):
    """Buffers table changes per key and releases them by buffer time, then key."""

    context: NodeContext

    def __init__(self, suppressed: Suppressed, window_close_ms: int) -> None:
        self.suppressed = suppressed
        self.duration = window_close_ms if suppressed.until_window_closes else suppressed.time_limit_ms
        self.observed_stream_time = -1
        self.buffer: dict[Any, tuple[int, Record]] = {}
        self._bytes = 0
        #: no buffered key has a buffer time below this (lets _enforce skip the scan while nothing is due)
        self._min_buffer_time = _NOTHING_BUFFERED

    def process(self, record: Record) -> None:
        if record.timestamp > self.observed_stream_time:
            self.observed_stream_time = record.timestamp
        key = record.key
        if self.suppressed.until_window_closes:
            if not isinstance(key, Windowed):
                raise StreamsError(
                    "suppress(until_window_closes) needs a windowed KTable (windowed_by(...) upstream)"
                )
            buffer_time = key.end
        else:
            previous = self.buffer.get(key)
            buffer_time = previous[0] if previous is not None else record.timestamp
        self.buffer[key] = (buffer_time, record)
        if buffer_time < self._min_buffer_time:
            self._min_buffer_time = buffer_time
        self._enforce()

    def _enforce(self) -> None:
        expiry = self.observed_stream_time - self.duration
        if self._min_buffer_time <= expiry:
            due = [(t, k) for k, (t, _) in self.buffer.items() if t <= expiry]
            for _, key in _ordered(due):
                self._emit(key)
            self._min_buffer_time = min((t for t, _ in self.buffer.values()), default=_NOTHING_BUFFERED)
        config = self.suppressed.buffer
        while self._over_capacity(config):
            if not config.emit_early:
                raise StreamsError(
                    f"suppression buffer full ({len(self.buffer)} records; limit {config.max_records} records, "
                    f"{config.max_bytes} bytes) and configured to shut down when full"
                )
            oldest = _ordered([(t, k) for k, (t, _) in self.buffer.items()])[0][1]
            self._emit(oldest)
            self._min_buffer_time = min((t for t, _ in self.buffer.values()), default=_NOTHING_BUFFERED)

    def _over_capacity(self, config: BufferConfig) -> bool:
        if config.max_records is not None and len(self.buffer) > config.max_records:
            return True
        if config.max_bytes is not None:
            size = sum(len(orjson.dumps(r.value, default=str)) for _, r in self.buffer.values())
            return size > config.max_bytes
        return False

    def _emit(self, key: Any) -> None:
        _, record = self.buffer.pop(key)
        change: Change = record.value
        if change.new_value is None and self.suppressed.until_window_closes:
            return
        self.context.forward(record)


_NOTHING_BUFFERED = 2**63


def _ordered(entries: list[tuple[int, Any]]) -> list[tuple[int, Any]]:
    try:
        return sorted(entries, key=lambda e: (e[0], _key_order(e[1])))
    except TypeError:
        return sorted(entries, key=lambda e: (e[0], json_order(e[1])))


def _key_order(key: Any) -> Any:
    return (key.key, key.start) if isinstance(key, Windowed) else key
