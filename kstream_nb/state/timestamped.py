"""Timestamped key-value stores (what KTables and aggregations keep): value plus the result timestamp."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Any, NamedTuple

from kstream_nb.cluster.serdes import Serde, SerdeSpec, serde_from
from kstream_nb.errors import SerializationError
from kstream_nb.state.builders import KeyValueStoreBuilder
from kstream_nb.state.store import KeyValueStore

_TS = struct.Struct(">q")


class ValueAndTimestamp(NamedTuple):
    """A stored value and the timestamp of the record that last produced it."""

    value: Any
    timestamp: int


class ValueAndTimestampSerde(Serde):
    """8-byte big-endian timestamp then the value's bytes, as Kafka's timestamped stores write changelogs."""

    def __init__(self, inner: Serde) -> None:
        self.inner = inner

    def serialize(self, topic: str, data: Any) -> bytes | None:
        if data is None:
            return None
        return _TS.pack(data.timestamp) + (self.inner.serialize(topic, data.value) or b"")

    def deserialize(self, topic: str, data: bytes | None) -> Any:
        if data is None:
            return None
        if len(data) < 8:
            raise SerializationError(f"corrupt timestamped value in topic {topic!r}: {data!r}")
        return ValueAndTimestamp(self.inner.deserialize(topic, data[8:]), _TS.unpack_from(data)[0])

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ValueAndTimestampSerde) and other.inner == self.inner

    def __hash__(self) -> int:
        return hash(("value-and-timestamp", self.inner))


class TimestampedKeyValueStoreBuilder(KeyValueStoreBuilder):
    """A key-value store builder whose values are ``ValueAndTimestamp`` (changelog serde wrapped)."""

    timestamped = True

    def build(
        self, default_key_serde: SerdeSpec | None = None, default_value_serde: SerdeSpec | None = None
    ) -> KeyValueStore:
        spec = self.value_serde if self.value_serde is not None else default_value_serde
        inner = serde_from(spec if spec is not None else "json")
        saved = self.value_serde
        self.value_serde = ValueAndTimestampSerde(inner)
        try:
            return super().build(default_key_serde, default_value_serde)
        finally:
            self.value_serde = saved


class PlainValueView:
    """Read-only view of a timestamped store that answers with plain values (for interactive queries)."""

    def __init__(self, store: Any) -> None:
        self._store = store
        self.name = store.name

    def get(self, key: Any) -> Any:
        found = self._store.get(key)
        return None if found is None else found.value

    def range(self, from_key: Any = None, to_key: Any = None) -> Iterator[tuple[Any, Any]]:
        return ((k, v.value) for k, v in self._store.range(from_key, to_key))

    def reverse_range(self, from_key: Any = None, to_key: Any = None) -> Iterator[tuple[Any, Any]]:
        return ((k, v.value) for k, v in self._store.reverse_range(from_key, to_key))

    def all(self) -> Iterator[tuple[Any, Any]]:
        return ((k, v.value) for k, v in self._store.all())

    def approximate_num_entries(self) -> int:
        return int(self._store.approximate_num_entries())
