"""The layers of a versioned store stack: change-logging (Kafka's ``ChangeLoggingVersionedKeyValueBytesStore``)
and metering (``MeteredVersionedKeyValueStore``) over a versioned backend.

As in Kafka Streams, every write goes to the changelog at once (not only a key's latest one, as the key-value
layer does: a versioned store restores its whole history), a delete as a tombstone, each record carrying the
version's timestamp. Versioned stores have no record cache.
"""

from __future__ import annotations

from typing import Any

from kstream_nb.cluster.serdes import Serde
from kstream_nb.state.changelogging import ChangelogRegistration, StoreMeter
from kstream_nb.state.store import KeyValue, StateStore, StateStoreContext, WrappedStateStore
from kstream_nb.state.versioned import VersionedKeyValueStore, VersionedRecord


class WrappedVersionedKeyValueStore(WrappedStateStore, VersionedKeyValueStore):
    """A layer over a versioned store that forwards everything; layers override what they add."""

    inner: VersionedKeyValueStore

    def __init__(self, inner: VersionedKeyValueStore) -> None:
        self.inner = inner
        self.history_retention_ms = inner.history_retention_ms

    @property
    def observed_stream_time(self) -> int:
        return int(getattr(self.inner, "observed_stream_time", -1))

    def put(self, key: Any, value: Any, timestamp: int) -> int:
        return self.inner.put(key, value, timestamp)

    def delete(self, key: Any, timestamp: int) -> VersionedRecord | None:
        return self.inner.delete(key, timestamp)

    def get(self, key: Any, as_of_timestamp: int | None = None) -> VersionedRecord | None:
        return self.inner.get(key, as_of_timestamp)

    def restore_batch(self, records: list[tuple[Any, Any, int]]) -> None:
        self.inner.restore_batch(records)

    def all(self) -> list[KeyValue]:
        return self.inner.all()


class ChangeLoggingVersionedKeyValueStore(WrappedVersionedKeyValueStore):
    """Writes every put and delete to the changelog at once (key, value or tombstone, the write's timestamp);
    restores by replaying the changelog through the backend's rules (so expired writes stay out)."""

    def __init__(self, inner: VersionedKeyValueStore, key_serde: Serde, value_serde: Serde) -> None:
        super().__init__(inner)
        self.key_serde = key_serde
        self.value_serde = value_serde
        self._topic = ""

    @property
    def changelog_topic(self) -> str:
        return self._topic

    def init(self, context: StateStoreContext, root: StateStore | None = None) -> None:
        self._topic = context.changelog_topic(self.name)
        self._serialize_key = self.key_serde.serializer(self._topic)
        self._serialize_value = self.value_serde.serializer(self._topic)
        self._write = context.changelog_writer(self._topic)
        self.inner.init(
            ChangelogRegistration(context, self.restore, self._topic), root if root is not None else self
        )

    def restore(self, batch: list[tuple[Any, ...]]) -> None:
        """Applies changelog records ``(key, value or None, timestamp)`` without logging them again."""
        topic, key_de, value_de = self._topic, self.key_serde.deserialize, self.value_serde.deserialize
        self.inner.restore_batch(
            [(key_de(topic, k), None if v is None else value_de(topic, v), ts) for k, v, ts, *_ in batch]
        )

    def put(self, key: Any, value: Any, timestamp: int) -> int:
        code = self.inner.put(key, value, timestamp)
        self._write(self._serialize_key(key), None if value is None else self._serialize_value(value), timestamp)
        return code

    def delete(self, key: Any, timestamp: int) -> VersionedRecord | None:
        old = self.inner.delete(key, timestamp)
        self._write(self._serialize_key(key), None, timestamp)
        return old


class MeteredVersionedKeyValueStore(WrappedVersionedKeyValueStore, StoreMeter):
    """The outermost layer: counts operations for ``metrics()``."""

    def __init__(self, inner: VersionedKeyValueStore, metrics_scope: str) -> None:
        WrappedVersionedKeyValueStore.__init__(self, inner)
        StoreMeter.__init__(self, metrics_scope)

    def put(self, key: Any, value: Any, timestamp: int) -> int:
        self._puts += 1
        return self.inner.put(key, value, timestamp)

    def delete(self, key: Any, timestamp: int) -> VersionedRecord | None:
        self._deletes += 1
        return self.inner.delete(key, timestamp)

    def get(self, key: Any, as_of_timestamp: int | None = None) -> VersionedRecord | None:
        self._gets += 1
        return self.inner.get(key, as_of_timestamp)

    def all(self) -> list[KeyValue]:
        return self._scan(self.inner.all)

    flush = StoreMeter.flush
