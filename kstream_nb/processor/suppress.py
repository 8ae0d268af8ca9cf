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
from kstream_nb.cluster.serdes import JoinedSerializers, Serde, SerdeSpec, serde_from
from kstream_nb.durations import Duration, to_millis
from kstream_nb.errors import IllegalStateError, SerializationError, StreamsError
from kstream_nb.processor.api import Change, Processor, Record, ValueAndTimestamp
from kstream_nb.processor.change_serde import ChangeSerde
from kstream_nb.processor.node import NodeContext
from kstream_nb.processor.windows import Windowed
from kstream_nb.state.builders import KeyValueStoreBuilder, Stores
from kstream_nb.state.memory import InMemoryKeyValueStore
from kstream_nb.state.store import KeyValueStore, StateStore, StateStoreContext, json_order


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


class SuppressionBuffer(InMemoryKeyValueStore):
    """The suppression buffer (Kafka's InMemoryTimeOrderedKeyValueBuffer): a ``BufferedUpdate`` per key in
    memory, readable as a key-value store; each key changed since the last commit is logged once, at the
    commit (its latest update, or a tombstone), to ``<application_id>-<store>-changelog``, and restored
    from it. One store, not a layered stack: it is written once per update of the suppressed table."""

    def __init__(self, name: str, key_serde: Serde, value_serde: Serde, logging_enabled: bool = True) -> None:
        super().__init__(name)
        self.key_serde = BufferKeySerde(key_serde)
        self.value_serde = BufferValueSerde(value_serde)
        self.logging_enabled = logging_enabled
        #: the buffered updates by key (the store's dict: what the processor scans)
        self.held: dict[Any, BufferedUpdate] = self._data
        #: keys changed since the last flush, with the timestamp of their last change
        self._dirty: dict[Any, int] = {}
        self._context: StateStoreContext | None = None
        self._topic = ""
        self._puts = self._deletes = self._flushes = 0

    def metrics(self) -> dict[str, Any]:
        """What ``app.metrics()["stores"]`` shows for it: the buffered keys and the operation counts."""
        return {
            "store": self.name,
            "scope": "in-memory-suppression",
            "entries": len(self._data),
            "put_total": self._puts,
            "delete_total": self._deletes,
            "flush_total": self._flushes,
        }

    def init(self, context: StateStoreContext, root: StateStore | None = None) -> None:
        self._context = context
        if not self.logging_enabled:
            super().init(context, root)
            return
        self._topic = context.changelog_topic(self.name)
        self._write = context.changelog_writer(self._topic)
        context.register(root if root is not None else self, self._restore, self._topic)
        self._open = True

    def put(self, key: Any, value: Any) -> None:
        InMemoryKeyValueStore.put(self, key, value)  # (a None value deletes, logged by delete)
        if value is not None:
            self._puts += 1
            if self.logging_enabled:
                self._dirty[key] = value.timestamp

    def delete(self, key: Any) -> Any:
        old = super().delete(key)
        self._deletes += 1
        if self.logging_enabled:
            self._dirty[key] = self._now()
        return old

    def _now(self) -> int:
        if self._context is None:
            raise IllegalStateError(f"store {self.name!r} is not initialized: call init(context) first")
        return self._context.timestamp

    def flush(self) -> None:
        self._flushes += 1
        dirty, self._dirty = self._dirty, {}
        context = self._context
        if not dirty or context is None:
            return
        topic, get, write = self._topic, self._data.get, self._write
        key_bytes, value_bytes = self.key_serde.serialize, self.value_serde.serialize
        for key, timestamp in dirty.items():
            held = get(key)
            write(key_bytes(topic, key), None if held is None else value_bytes(topic, held), timestamp)

    def _restore(self, batch: list[tuple[Any, ...]]) -> None:
        topic, data = self._topic, self._data
        for key_bytes, value_bytes, *_ in batch:
            key = self.key_serde.deserialize(topic, key_bytes)
            if value_bytes is None:
                data.pop(key, None)
            else:
                data[key] = self.value_serde.deserialize(topic, value_bytes)
        self._version += 1


class SuppressionBufferBuilder(KeyValueStoreBuilder):
    """Builds a task's ``SuppressionBuffer``; its serdes wrap the table's (or the app's defaults)."""

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
        return SuppressionBuffer(self.name, key, value, self.logging_enabled)
