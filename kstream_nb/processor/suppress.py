"""``KTable.suppress``: holds table updates back until their window closes or a time limit passes.

The buffer keeps the latest update per key with a buffer time (window end, or the time the key first
entered the buffer); when stream time passes buffer time + the suppression duration, the key is
released. Final-result suppression never releases tombstones.

The buffer is a change-logged in-memory store (Kafka's InMemoryTimeOrderedKeyValueBuffer, changelog
``<application_id>-<store>-changelog``): updates held back when an instance stops or dies are restored
with the task and released when their time comes, wherever the task runs next.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any, NamedTuple

import orjson

from kstream_nb.cluster.records import Headers
from kstream_nb.cluster.serdes import Serde, SerdeSpec, serde_from
from kstream_nb.durations import Duration, to_millis
from kstream_nb.errors import SerializationError, StreamsError
from kstream_nb.processor.api import Change, Processor, Record
from kstream_nb.processor.change_serde import ChangeSerde, JoinedSerializers
from kstream_nb.processor.node import NodeContext
from kstream_nb.processor.windows import Windowed
from kstream_nb.state.builders import KeyValueStoreBuilder, Stores
from kstream_nb.state.changelogging import FlushLoggingKeyValueStore
from kstream_nb.state.store import KeyValueStore, json_order


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

    def __init__(self, suppressed: Suppressed, window_close_ms: int, store_name: str) -> None:
        self.suppressed = suppressed
        self._final = suppressed.until_window_closes
        self._bounded = suppressed.buffer.max_records is not None or suppressed.buffer.max_bytes is not None
        self.duration = window_close_ms if self._final else suppressed.time_limit_ms
        self.store_name = store_name
        self.observed_stream_time = -1
        #: the buffered updates by key (the store holds the same, for the changelog and restores)
        self.buffer: dict[Any, tuple[int, Record]] = {}
        #: no buffered key has a buffer time below this (lets _enforce skip the scan while nothing is due)
        self._min_buffer_time = _NOTHING_BUFFERED
        #: with a byte bound: each buffered key's size estimate, and their sum
        self._sizes: dict[Any, int] | None = {} if suppressed.buffer.max_bytes is not None else None
        self._bytes = 0

    def init(self, context: Any) -> None:
        super().init(context)
        self.store: KeyValueStore = context.get_state_store(self.store_name)
        self.buffer = {}
        for key, held in self.store.all():
            self.buffer[key] = (held.buffer_time, Record(key, held.change, held.timestamp, held.headers))
            self._track_size(key, held.change)
            # stream time had passed every buffered update, and nothing was due then
            self.observed_stream_time = max(self.observed_stream_time, held.timestamp)
        self._min_buffer_time = min((t for t, _ in self.buffer.values()), default=_NOTHING_BUFFERED)

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
        self.buffer[key] = (buffer_time, record)
        if self._sizes is not None:
            self._track_size(key, record.value)
        self.store.put(key, BufferedUpdate(buffer_time, record.timestamp, record.headers, record.value))
        if buffer_time < self._min_buffer_time:
            self._min_buffer_time = buffer_time
        if self._bounded or self._min_buffer_time <= self.observed_stream_time - self.duration:
            self._enforce()

    def _enforce(self) -> None:
        expiry = self.observed_stream_time - self.duration
        if self._min_buffer_time <= expiry:
            due = [(t, k) for k, (t, _) in self.buffer.items() if t <= expiry]
            for _, key in _ordered(due):
                self._emit(key)
            self._min_buffer_time = min((t for t, _ in self.buffer.values()), default=_NOTHING_BUFFERED)
        config = self.suppressed.buffer
        while self._bounded and self._over_capacity(config):
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
        return config.max_bytes is not None and self._bytes > config.max_bytes

    def _track_size(self, key: Any, change: Change) -> None:
        """Keeps the byte count of a byte-bounded buffer: the JSON size of key, new and old value."""
        if self._sizes is not None:
            size = len(orjson.dumps([key, change.new_value, change.old_value], default=str))
            self._bytes += size - self._sizes.get(key, 0)
            self._sizes[key] = size

    def _emit(self, key: Any) -> None:
        _, record = self.buffer.pop(key)
        if self._sizes is not None:
            self._bytes -= self._sizes.pop(key)
        self.store.delete(key)
        change: Change = record.value
        if change.new_value is None and self._final:
            return
        self.context.forward(record)


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


class BufferedUpdate(NamedTuple):
    """A suppression buffer entry as stored and change-logged: the update with its record context."""

    buffer_time: int
    timestamp: int
    headers: Headers
    change: Change


_KEY_HEAD = struct.Struct(">Bqq")
_VALUE_HEAD = struct.Struct(">qqi")
_LENGTH = struct.Struct(">i")


class BufferKeySerde(Serde):
    """Buffer keys: a flag byte, then the table key's bytes; windowed keys add start and end (8 bytes each)."""

    def __init__(self, inner: Serde) -> None:
        self.inner = inner
        self._serializers = JoinedSerializers(inner)

    def serialize(self, topic: str, data: Any) -> bytes | None:
        if isinstance(data, Windowed):
            return _KEY_HEAD.pack(1, data.start, data.end) + (self._serializers[topic](data.key) or b"")
        return b"\x00" + (self._serializers[topic](data) or b"")

    def deserialize(self, topic: str, data: bytes | None) -> Any:
        if data is None:
            return None
        if data[:1] == b"\x01" and len(data) >= _KEY_HEAD.size:
            _, start, end = _KEY_HEAD.unpack_from(data)
            return Windowed(self.inner.deserialize(topic, data[_KEY_HEAD.size :]), start, end)
        if data[:1] == b"\x00":
            return self.inner.deserialize(topic, data[1:])
        raise SerializationError(f"corrupt suppression buffer key in topic {topic!r}: {data[:32]!r}")


class BufferValueSerde(Serde):
    """Buffer values: buffer time, record timestamp, the headers, then the change (``ChangeSerde``)."""

    def __init__(self, inner: Serde) -> None:
        self.change = ChangeSerde(inner)

    def serialize(self, topic: str, data: Any) -> bytes | None:
        if data is None:
            return None
        if not data.headers:
            return _VALUE_HEAD.pack(data.buffer_time, data.timestamp, 0) + (
                self.change.serialize(topic, data.change) or b""
            )
        parts = [_VALUE_HEAD.pack(data.buffer_time, data.timestamp, len(data.headers))]
        for name, value in data.headers:
            encoded = name.encode()
            parts += (_LENGTH.pack(len(encoded)), encoded)
            parts += (_LENGTH.pack(-1),) if value is None else (_LENGTH.pack(len(value)), bytes(value))
        parts.append(self.change.serialize(topic, data.change) or b"")
        return b"".join(parts)

    def deserialize(self, topic: str, data: bytes | None) -> Any:
        if data is None:
            return None
        try:
            buffer_time, timestamp, count = _VALUE_HEAD.unpack_from(data)
            pos, headers = _VALUE_HEAD.size, []
            for _ in range(count):
                (n,) = _LENGTH.unpack_from(data, pos)
                name = data[pos + 4 : pos + 4 + n].decode()
                pos += 4 + n
                (n,) = _LENGTH.unpack_from(data, pos)
                headers.append((name, None if n < 0 else data[pos + 4 : pos + 4 + n]))
                pos += 4 + max(n, 0)
        except (struct.error, UnicodeDecodeError) as e:
            raise SerializationError(f"corrupt suppression buffer value in topic {topic!r}: {data[:32]!r}") from e
        return BufferedUpdate(buffer_time, timestamp, tuple(headers), self.change.deserialize(topic, data[pos:]))


class SuppressionBufferBuilder(KeyValueStoreBuilder):
    """The suppression buffer's store: in memory, never cached, its serdes wrapping the table's; each key
    changed since the last commit is logged once at the commit (as Kafka's buffer does), not every update."""

    logging_layer = FlushLoggingKeyValueStore

    def __init__(self, name: str, key_serde: SerdeSpec | None, value_serde: SerdeSpec | None) -> None:
        super().__init__(Stores.in_memory_key_value_store(name))
        self.table_key_serde = key_serde
        self.table_value_serde = value_serde

    def build(
        self,
        default_key_serde: SerdeSpec | None = None,
        default_value_serde: SerdeSpec | None = None,
        dsl_store: str | None = None,
        cache_max_bytes: int = 0,
    ) -> KeyValueStore:
        key = serde_from(self.table_key_serde or default_key_serde or "json")
        value = serde_from(self.table_value_serde or default_value_serde or "json")
        return super().build(BufferKeySerde(key), BufferValueSerde(value))
