"""Kafka Streams' store suppliers: each makes the innermost store of a stack (in memory or RocksDB), one per
task, for the builders of ``kstream_nb.state.builders`` to wrap.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from kstream_nb.durations import Duration, to_millis
from kstream_nb.errors import StreamsError
from kstream_nb.state.memory import InMemoryKeyValueStore
from kstream_nb.state.store import KeyValueStore
from kstream_nb.state.versioned import InMemoryVersionedKeyValueStore, VersionedStoreBackend
from kstream_nb.state.window_store import InMemorySessionStore, InMemoryWindowStore, SessionStore, WindowStore


def _check_name(name: object) -> str:
    if not isinstance(name, str) or not name:
        raise StreamsError(f"a store name must be a non-empty string, got {name!r}")
    return name


class KeyValueStoreSupplier(ABC):
    """Makes the innermost (bytes-free) store of a key-value stack, one per task."""

    @property
    @abstractmethod
    def name(self) -> str:
        """The store's name."""

    @property
    @abstractmethod
    def metrics_scope(self) -> str:
        """The backend's name in metrics ("in-memory", "rocksdb")."""

    @abstractmethod
    def get(self) -> KeyValueStore:
        """A new, uninitialized store."""

    def for_dsl_store(self, dsl_store: str | None) -> KeyValueStoreSupplier:
        """The supplier a DSL-made store uses when the app's ``default_dsl_store`` is ``dsl_store``: this one."""
        return self


class _NamedKeyValueStoreSupplier(KeyValueStoreSupplier):
    """What the built-in key-value suppliers share: a checked name."""

    def __init__(self, name: str) -> None:
        self._name = _check_name(name)

    @property
    def name(self) -> str:
        return self._name

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._name!r})"


class InMemoryKeyValueStoreSupplier(_NamedKeyValueStoreSupplier):
    """Supplies ``InMemoryKeyValueStore`` instances."""

    @property
    def metrics_scope(self) -> str:
        return "in-memory"

    def get(self) -> KeyValueStore:
        return InMemoryKeyValueStore(self._name)

    def for_dsl_store(self, dsl_store: str | None) -> KeyValueStoreSupplier:
        """A RocksDB supplier of the same name when ``default_dsl_store`` is ``"rocksdb"``."""
        return RocksDBKeyValueStoreSupplier(self._name) if dsl_store == "rocksdb" else self


class RocksDBKeyValueStoreSupplier(_NamedKeyValueStoreSupplier):
    """Supplies ``RocksDBKeyValueStore`` instances (persistent, under the app's state_dir)."""

    @property
    def metrics_scope(self) -> str:
        return "rocksdb"

    def get(self) -> KeyValueStore:
        from kstream_nb.state.rocksdb import RocksDBKeyValueStore

        return RocksDBKeyValueStore(self._name)


class _RetainingStoreSupplier:
    """What window and session suppliers share: a name, a retention behind stream time, memory or RocksDB."""

    #: what the metrics scope ends with
    _kind = ""

    def __init__(self, name: str, retention: Duration, persistent: bool) -> None:
        self._name = _check_name(name)
        self.retention_ms = to_millis(retention, "retention")
        self.persistent = persistent

    @property
    def name(self) -> str:
        return self._name

    @property
    def metrics_scope(self) -> str:
        """The backend's name in metrics ("in-memory-window", "rocksdb-session", ...)."""
        return ("rocksdb-" if self.persistent else "in-memory-") + self._kind


class WindowStoreSupplier(_RetainingStoreSupplier):
    """Makes window stores (in memory or RocksDB) with a retention period and a window size, one per task."""

    _kind = "window"

    def __init__(
        self, name: str, retention: Duration, window_size: Duration, retain_duplicates: bool, persistent: bool
    ) -> None:
        super().__init__(name, retention, persistent)
        self.window_size_ms = to_millis(window_size, "window size")
        if self.window_size_ms < 0 or self.retention_ms < self.window_size_ms:
            raise StreamsError(
                f"window store {name!r}: retention ({self.retention_ms} ms) must be at least the window size "
                f"({self.window_size_ms} ms), and the window size not negative"
            )
        self.retain_duplicates = retain_duplicates

    def get(self) -> WindowStore:
        """A new, uninitialized store."""
        if self.persistent:
            from kstream_nb.state.rocksdb_window import RocksDBWindowStore

            return RocksDBWindowStore(self._name, self.retention_ms, self.window_size_ms, self.retain_duplicates)
        return InMemoryWindowStore(self._name, self.retention_ms, self.window_size_ms, self.retain_duplicates)

    def __repr__(self) -> str:
        return (
            f"WindowStoreSupplier({self._name!r}, retention_ms={self.retention_ms}, "
            f"window_size_ms={self.window_size_ms}, persistent={self.persistent})"
        )


class SessionStoreSupplier(_RetainingStoreSupplier):
    """Makes session stores (in memory or RocksDB) with a retention period, one per task."""

    _kind = "session"

    def __init__(self, name: str, retention: Duration, persistent: bool) -> None:
        super().__init__(name, retention, persistent)
        if self.retention_ms < 0:
            raise StreamsError(f"session store {name!r}: retention must not be negative, got {retention!r}")

    def get(self) -> SessionStore:
        """A new, uninitialized store."""
        if self.persistent:
            from kstream_nb.state.rocksdb_window import RocksDBSessionStore

            return RocksDBSessionStore(self._name, self.retention_ms)
        return InMemorySessionStore(self._name, self.retention_ms)

    def __repr__(self) -> str:
        return (
            f"SessionStoreSupplier({self._name!r}, retention_ms={self.retention_ms}, persistent={self.persistent})"
        )


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
        self._name = _check_name(name)
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
