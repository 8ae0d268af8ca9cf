"""Versioned store stacks: the supplier, the builder, and the change-logging and metering layers over a backend.

As in Kafka Streams, every write goes to the changelog at once (not only a key's latest one, as the key-value
layer does: a versioned store restores its whole history), a delete as a tombstone, each record carrying the
version's timestamp; the changelog topic is compacted with ``min.compaction.lag.ms`` = history retention plus
one day (Kafka's ``VersionedChangelogTopicConfig``), so compaction keeps the history a restore needs. Versioned
stores have no record cache.
"""

from __future__ import annotations

from typing import Any

from kstream_nb.cluster.serdes import Serde, SerdeSpec, serde_from
from kstream_nb.durations import Duration, to_millis
from kstream_nb.errors import IllegalStateError, StreamsError
from kstream_nb.state.changelogging import ChangelogRegistration, StoreMeter
from kstream_nb.state.store import KeyValue, StateStore, StateStoreContext
from kstream_nb.state.versioned import (
    InMemoryVersionedKeyValueStore,
    VersionedKeyValueStore,
    VersionedRecord,
    VersionedStoreBackend,
)

#: Kafka's VERSIONED_STORE_CHANGE_LOG_ADDITIONAL_COMPACTION_LAG_MS
ADDITIONAL_COMPACTION_LAG_MS = 86_400_000


def default_segment_interval(history_retention_ms: int) -> int:
    """Kafka's default segment interval for a history retention (it only tunes performance)."""
    if history_retention_ms <= 60_000:
        return max(history_retention_ms // 3, 2_000)
    if history_retention_ms <= 300_000:
        return max(history_retention_ms // 5, 20_000)
    if history_retention_ms <= 3_600_000:
        return max(history_retention_ms // 12, 60_000)
    return max(history_retention_ms // 24, 300_000)


class VersionedKeyValueStoreSupplier:
    """Makes versioned stores (RocksDB, or kstream_nb's in-memory backend), one per task."""

    def __init__(self, name: str, history_retention: Duration, segment_interval: Duration | None = None,
                 persistent: bool = True) -> None:  # fmt: skip
        if not isinstance(name, str) or not name:
            raise StreamsError(f"a store name must be a non-empty string, got {name!r}")
        self._name = name
        self.history_retention_ms = to_millis(history_retention, "historyRetention")
        if segment_interval is None:
            self.segment_interval_ms = default_segment_interval(self.history_retention_ms)
        else:
            self.segment_interval_ms = to_millis(segment_interval, "segmentInterval")
            if self.segment_interval_ms < 1:
                raise StreamsError("segmentInterval cannot be zero or negative")
        self.persistent = persistent

    @property
    def name(self) -> str:
        return self._name

    @property
    def metrics_scope(self) -> str:
        """The backend's name in metrics ("rocksdb", "in-memory")."""
        return "rocksdb" if self.persistent else "in-memory"

    def get(self) -> VersionedStoreBackend:
        """A new, uninitialized store."""
        if self.persistent:
            from kstream_nb.state.rocksdb_versioned import RocksDBVersionedKeyValueStore

            return RocksDBVersionedKeyValueStore(self._name, self.history_retention_ms, self.segment_interval_ms)
        return InMemoryVersionedKeyValueStore(self._name, self.history_retention_ms, self.segment_interval_ms)

    def renamed(self, name: str) -> VersionedKeyValueStoreSupplier:
        """The same kind of store under another name (for a table the DSL materializes from this one)."""
        supplier = VersionedKeyValueStoreSupplier(name, self.history_retention_ms, self.segment_interval_ms)
        supplier.persistent = self.persistent
        return supplier

    def __repr__(self) -> str:
        return (
            f"VersionedKeyValueStoreSupplier({self._name!r}, history_retention_ms={self.history_retention_ms}, "
            f"persistent={self.persistent})"
        )


class VersionedKeyValueStoreBuilder:
    """Builds metered -> change-logging (unless disabled) -> versioned backend, one stack per task."""

    #: what ``app.store`` and the DSL check (a versioned table, a versioned join lookup)
    versioned = True
    caching_enabled = False

    def __init__(self, supplier: VersionedKeyValueStoreSupplier, key_serde: SerdeSpec | None = None,
                 value_serde: SerdeSpec | None = None) -> None:  # fmt: skip
        self.supplier = supplier
        self.key_serde = key_serde
        self.value_serde = value_serde
        self._logging_enabled = True
        self._log_config: dict[str, str] = {}

    @property
    def name(self) -> str:
        return self.supplier.name

    @property
    def history_retention_ms(self) -> int:
        return self.supplier.history_retention_ms

    @property
    def logging_enabled(self) -> bool:
        return self._logging_enabled

    @property
    def log_config(self) -> dict[str, str]:
        """The changelog's topic configs: ``min.compaction.lag.ms`` = history retention + 1 day unless given."""
        config = dict(self._log_config)
        config.setdefault(
            "min.compaction.lag.ms", str(self.supplier.history_retention_ms + ADDITIONAL_COMPACTION_LAG_MS)
        )
        return config

    def with_logging_enabled(self, config: dict[str, str] | None = None) -> VersionedKeyValueStoreBuilder:
        """Logs every write to the changelog, created with the given topic configs."""
        self._logging_enabled = True
        self._log_config = dict(config or {})
        return self

    def with_logging_disabled(self) -> VersionedKeyValueStoreBuilder:
        """No changelog: the store starts empty after a task move (a RocksDB store keeps its disk data)."""
        self._logging_enabled = False
        self._log_config = {}
        return self

    def with_caching_enabled(self) -> VersionedKeyValueStoreBuilder:
        raise IllegalStateError(f"versioned store {self.name!r}: versioned stores do not support caching")

    def with_caching_disabled(self) -> VersionedKeyValueStoreBuilder:
        return self

    def build(self, default_key_serde: SerdeSpec | None = None,
              default_value_serde: SerdeSpec | None = None) -> MeteredVersionedKeyValueStore:  # fmt: skip
        """A new stack: metered -> change-logging (if enabled) -> backend."""
        store: Any = self.supplier.get()
        key_serde = serde_from(self.key_serde if self.key_serde is not None else default_key_serde or "json")
        value = serde_from(self.value_serde if self.value_serde is not None else default_value_serde or "json")
        use_serdes = getattr(store, "use_serdes", None)
        if use_serdes is not None:
            use_serdes(key_serde, value)
        if self._logging_enabled:
            store = ChangeLoggingVersionedKeyValueStore(store, key_serde, value)
        return MeteredVersionedKeyValueStore(store, self.supplier.metrics_scope)

    def __repr__(self) -> str:
        return f"VersionedKeyValueStoreBuilder({self.name!r}, logging={self._logging_enabled})"


class WrappedVersionedKeyValueStore(VersionedKeyValueStore):
    """A layer over a versioned store that forwards everything; layers override what they add."""

    def __init__(self, inner: VersionedKeyValueStore) -> None:
        self.inner = inner
        self.history_retention_ms = inner.history_retention_ms

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def persistent(self) -> bool:
        return self.inner.persistent

    @property
    def is_open(self) -> bool:
        return self.inner.is_open

    @property
    def observed_stream_time(self) -> int:
        return int(getattr(self.inner, "observed_stream_time", -1))

    def init(self, context: StateStoreContext, root: StateStore | None = None) -> None:
        self.inner.init(context, root if root is not None else self)

    def flush(self) -> None:
        self.inner.flush()

    def close(self) -> None:
        self.inner.close()

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

    def approximate_num_entries(self) -> int:
        return self.inner.approximate_num_entries()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.inner!r})"


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
