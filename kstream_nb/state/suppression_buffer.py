"""The suppression buffer of ``KTable.suppress`` (Kafka Streams' ``InMemoryTimeOrderedKeyValueChangeBuffer``).

A ``BufferedUpdate`` per key in memory, change-logged once per key and commit to
``<application_id>-<store>-changelog`` and restored from it, so updates held back when an instance stops are
released wherever the task runs next. Its changelog format carries table changes and windowed keys, as
Kafka's buffer (in ``state.internals``) carries ``kstream.internals.Change``: hence its processor
imports.
"""

from __future__ import annotations

import struct
from typing import Any, NamedTuple

from kstream_nb.cluster.records import Headers
from kstream_nb.cluster.serde_specs import SerdeSpec, serde_from
from kstream_nb.cluster.serdes import JoinedSerializers, Serde
from kstream_nb.cluster.windowed_serdes import SessionWindowedSerde, TimeWindowedSerde, Windowed
from kstream_nb.errors import IllegalStateError, SerializationError
from kstream_nb.processor.api import Change
from kstream_nb.processor.change_serde import ChangeSerde
from kstream_nb.state.builders import StoreBuilder
from kstream_nb.state.changelogging import StoreMeter
from kstream_nb.state.memory import InMemoryKeyValueStore
from kstream_nb.state.record_headers import decode_headers, header_parts
from kstream_nb.state.store import StateStore, StateStoreContext


class BufferedUpdate(NamedTuple):
    """A suppression buffer entry as stored and change-logged: the update with its record context."""

    buffer_time: int
    timestamp: int
    headers: Headers
    change: Change


_KEY_HEAD = struct.Struct(">Bqq")
_VALUE_HEAD = struct.Struct(">qqi")


class BufferKeySerde(Serde):
    """Buffer keys: a flag byte, then the table key's bytes; windowed keys add start and end (8 bytes each)."""

    def __init__(self, inner: Serde) -> None:
        # a windowed table's key serde (Kafka's windowed format): the buffer writes the window itself
        self.inner = inner.inner if isinstance(inner, TimeWindowedSerde | SessionWindowedSerde) else inner
        self._serializers = JoinedSerializers(self.inner)

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
        head = _VALUE_HEAD.pack(data.buffer_time, data.timestamp, len(data.headers))
        return b"".join([head, *header_parts(data.headers), self.change.serialize(topic, data.change) or b""])

    def deserialize(self, topic: str, data: bytes | None) -> Any:
        if data is None:
            return None
        try:
            buffer_time, timestamp, count = _VALUE_HEAD.unpack_from(data)
            headers, pos = decode_headers(data, _VALUE_HEAD.size, count)
        except (struct.error, UnicodeDecodeError) as e:
            raise SerializationError(f"corrupt suppression buffer value in topic {topic!r}: {data[:32]!r}") from e
        return BufferedUpdate(buffer_time, timestamp, headers, self.change.deserialize(topic, data[pos:]))


class SuppressionBuffer(InMemoryKeyValueStore, StoreMeter):
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
        StoreMeter.__init__(self, "in-memory-suppression")

    def metrics(self) -> dict[str, Any]:
        """What ``app.metrics()["stores"]`` shows for it: the buffered keys and the operation counts."""
        return {
            "store": self.name,
            "scope": self.metrics_scope,
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


class SuppressionBufferBuilder(StoreBuilder):
    """Builds a task's ``SuppressionBuffer`` (it logs and counts itself: no layers); its serdes wrap the
    table's (or the app's defaults)."""

    def __init__(self, name: str, key_serde: SerdeSpec | None, value_serde: SerdeSpec | None) -> None:
        super().__init__(name, key_serde, value_serde)

    def _serdes(
        self, default_key_serde: SerdeSpec | None, default_value_serde: SerdeSpec | None
    ) -> tuple[Serde, Serde]:
        return (
            serde_from(self.key_serde or default_key_serde or "string_or_json"),
            serde_from(self.value_serde or default_value_serde or "json"),
        )

    def _backend(self, dsl_store: str | None, key_serde: Serde, value_serde: Serde) -> tuple[Any, str]:
        return SuppressionBuffer(self.name, key_serde, value_serde, self.logging_enabled), "in-memory-suppression"
