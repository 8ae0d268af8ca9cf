"""The buffer of a stream-table join with a grace period (Kafka's ``RocksDBTimeOrderedKeyValueBuffer``).

Stream records wait here, in (timestamp, key bytes + sequence number) order, until the buffer's stream time
minus the grace period reaches their timestamp. The buffer's stream time is the largest timestamp put into it
(so records the join drops, or joins at once because they are late, do not advance it). Every put and every
eviction is change-logged (the entry, then a tombstone) to ``<application_id>-<store>-changelog``, and a restore
rebuilds the entries and the stream time from it.
"""

from __future__ import annotations

import struct
from bisect import insort
from typing import Any, NamedTuple

from kstream_nb.cluster.records import Headers
from kstream_nb.cluster.serde_specs import SerdeSpec
from kstream_nb.cluster.serdes import Serde
from kstream_nb.errors import SerializationError
from kstream_nb.state.builders import StoreBuilder
from kstream_nb.state.record_headers import decode_headers, header_parts
from kstream_nb.state.store import KeyValue, StateStore, StateStoreContext, StoreBackend

_TS = struct.Struct(">q")
_SEQ = struct.Struct(">i")
_LEN = struct.Struct(">i")
_NO_TIMESTAMP = -1


class BufferedRecord(NamedTuple):
    """A stream record waiting in the buffer: what the join needs of it when it is evicted."""

    key: Any
    value: Any
    timestamp: int
    headers: Headers


def _encode_value(value: bytes, headers: Headers) -> bytes:
    return b"".join([_LEN.pack(len(headers)), *header_parts(headers), value])


def _decode_value(data: bytes) -> tuple[bytes, Headers]:
    (count,) = _LEN.unpack_from(data)
    headers, pos = decode_headers(data, _LEN.size, count)
    return data[pos:], headers


class TimeOrderedJoinBuffer(StoreBackend):
    """Stream records held for a grace period, evicted in time order."""

    def __init__(self, name: str, grace_ms: int, key_serde: Serde, value_serde: Serde,
                 logging_enabled: bool = True) -> None:  # fmt: skip
        self._name = name
        self.grace_ms = grace_ms
        self.key_serde = key_serde
        self.value_serde = value_serde
        self.logging_enabled = logging_enabled
        #: the largest timestamp put (Kafka: the buffer store's observed stream time)
        self.observed_stream_time = _NO_TIMESTAMP
        #: (timestamp, key bytes + sequence number) -> the buffered record, and the keys in order
        self._entries: dict[tuple[int, bytes], BufferedRecord] = {}
        self._order: list[tuple[int, bytes]] = []
        self._seqnum = 0
        self._open = False
        self._topic = ""

    def init(self, context: StateStoreContext, root: StateStore | None = None) -> None:
        if self.logging_enabled:
            self._topic = context.changelog_topic(self._name)
            self._write = context.changelog_writer(self._topic)
        context.register(root if root is not None else self, self._restore, self._topic or None)
        self._open = True

    def close(self) -> None:
        self._open = False
        self._entries, self._order = {}, []

    def __len__(self) -> int:
        return len(self._order)

    def all(self) -> list[KeyValue]:
        """The waiting records as ``KeyValue(key, BufferedRecord)``, in eviction order (for queries)."""
        entries = self._entries
        return [KeyValue(record.key, record) for slot in list(self._order) if (record := entries.get(slot))]

    def range(self, from_key: Any = None, to_key: Any = None) -> list[KeyValue]:
        """``all()`` (a buffer is read whole; bounds apply to keys that compare)."""
        return [
            kv
            for kv in self.all()
            if (from_key is None or not kv.key < from_key) and (to_key is None or not to_key < kv.key)
        ]

    def approximate_num_entries(self) -> int:
        return len(self._order)

    def put(self, key: Any, value: Any, timestamp: int, headers: Headers = ()) -> bool:
        """Buffers a record; False (not buffered) when it is older than stream time minus the grace period."""
        if key is None:  # checked first, as Kafka's buffer does: also a late record with a null key fails
            raise ValueError(
                f"join buffer {self._name!r}: a record with a null key cannot wait for the grace period "
                "(Kafka Streams' buffer rejects it the same way)"
            )
        if self.observed_stream_time - self.grace_ms > timestamp:
            return False
        topic = self._topic or self._name
        key_bytes = self.key_serde.serialize(topic, key) or b""
        self._seqnum = (self._seqnum + 1) & 0x7FFFFFFF
        slot = (timestamp, key_bytes + _SEQ.pack(self._seqnum))
        self._entries[slot] = BufferedRecord(key, value, timestamp, headers)
        insort(self._order, slot)
        self.observed_stream_time = max(self.observed_stream_time, timestamp)
        if self.logging_enabled:
            value_bytes = self.value_serde.serialize(topic, value) or b""
            self._write(_TS.pack(timestamp) + slot[1], _encode_value(value_bytes, headers), timestamp)
        return True

    def evict(self) -> list[BufferedRecord]:
        """Removes and returns, in time order, the records at or before stream time minus the grace period."""
        limit = self.observed_stream_time - self.grace_ms
        order = self._order
        count = 0
        while count < len(order) and order[count][0] <= limit:
            count += 1
        if not count:
            return []
        slots, self._order = order[:count], order[count:]
        out = [self._entries.pop(slot) for slot in slots]
        if self.logging_enabled:
            for slot in slots:
                self._write(_TS.pack(slot[0]) + slot[1], None, slot[0])
        return out

    def _restore(self, batch: list[tuple[Any, ...]]) -> None:
        topic = self._topic
        for key_bytes, value_bytes, *_ in batch:
            if key_bytes is None or len(key_bytes) < _TS.size + _SEQ.size:
                raise SerializationError(f"corrupt join buffer key in topic {topic!r}: {key_bytes!r}")
            timestamp = _TS.unpack_from(key_bytes)[0]
            slot = (timestamp, key_bytes[_TS.size :])
            self.observed_stream_time = max(self.observed_stream_time, timestamp)
            if value_bytes is None:
                if self._entries.pop(slot, None) is not None:
                    self._order.remove(slot)
                continue
            value, headers = _decode_value(value_bytes)
            key = self.key_serde.deserialize(topic, key_bytes[_TS.size : -_SEQ.size])
            if slot not in self._entries:
                insort(self._order, slot)
            record_value = self.value_serde.deserialize(topic, value)
            self._entries[slot] = BufferedRecord(key, record_value, timestamp, headers)
            # new puts continue after the restored sequence numbers (so none replaces a restored record)
            self._seqnum = max(self._seqnum, _SEQ.unpack_from(key_bytes, len(key_bytes) - _SEQ.size)[0])

    def __repr__(self) -> str:
        return f"TimeOrderedJoinBuffer({self._name!r}, grace_ms={self.grace_ms}, records={len(self._order)})"


class TimeOrderedJoinBufferBuilder(StoreBuilder):
    """Builds a task's join buffer (it logs itself: no layers); serdes left None fall back to the app's
    defaults (then JSON)."""

    def __init__(self, name: str, grace_ms: int, key_serde: SerdeSpec | None = None,
                 value_serde: SerdeSpec | None = None) -> None:  # fmt: skip
        super().__init__(name, key_serde, value_serde)
        self.grace_ms = grace_ms

    def _backend(self, dsl_store: str | None, key_serde: Serde, value_serde: Serde) -> tuple[Any, str]:
        return TimeOrderedJoinBuffer(self.name, self.grace_ms, key_serde, value_serde, self.logging_enabled), ""

    def __repr__(self) -> str:
        return f"TimeOrderedJoinBufferBuilder({self.name!r}, grace_ms={self.grace_ms})"
