"""Kafka Streams' ``Stores`` factory: store suppliers and builders that stack the store layers."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from kstream_nb.cluster.serdes import SerdeSpec, serde_from
from kstream_nb.durations import Duration, to_millis
from kstream_nb.errors import StreamsError
from kstream_nb.state.caching import CachingKeyValueStore, thread_cache
from kstream_nb.state.changelogging import ChangeLoggingKeyValueStore, MeteredKeyValueStore
from kstream_nb.state.memory import InMemoryKeyValueStore
from kstream_nb.state.session_caching import CachingSessionStore
from kstream_nb.state.store import KeyValueStore, StateStore
from kstream_nb.state.versioned_builders import VersionedKeyValueStoreBuilder, VersionedKeyValueStoreSupplier
from kstream_nb.state.window_caching import CachingWindowStore
from kstream_nb.state.window_store import (
    ChangeLoggingSessionStore,
    ChangeLoggingWindowStore,
    InMemorySessionStore,
    InMemoryWindowStore,
    MeteredSessionStore,
    MeteredWindowStore,
    SessionStore,
    WindowStore,
)


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


class InMemoryKeyValueStoreSupplier(KeyValueStoreSupplier):
    """Supplies ``InMemoryKeyValueStore`` instances."""

    def __init__(self, name: str) -> None:
        self._name = _check_name(name)

    @property
    def name(self) -> str:
        return self._name

    @property
    def metrics_scope(self) -> str:
        return "in-memory"

    def get(self) -> KeyValueStore:
        return InMemoryKeyValueStore(self._name)

    def __repr__(self) -> str:
        return f"InMemoryKeyValueStoreSupplier({self._name!r})"


class RocksDBKeyValueStoreSupplier(KeyValueStoreSupplier):
    """Supplies ``RocksDBKeyValueStore`` instances (persistent, under the app's state_dir)."""

    def __init__(self, name: str) -> None:
        self._name = _check_name(name)

    @property
    def name(self) -> str:
        return self._name

    @property
    def metrics_scope(self) -> str:
        return "rocksdb"

    def get(self) -> KeyValueStore:
        from kstream_nb.state.rocksdb import RocksDBKeyValueStore

        return RocksDBKeyValueStore(self._name)

    def __repr__(self) -> str:
        return f"RocksDBKeyValueStoreSupplier({self._name!r})"


class WindowStoreSupplier:
    """Makes window stores (in memory or RocksDB) with a retention period and a window size, one per task."""

    def __init__(
        self, name: str, retention: Duration, window_size: Duration, retain_duplicates: bool, persistent: bool
    ) -> None:
        self._name = _check_name(name)
        self.retention_ms = to_millis(retention, "retention")
        self.window_size_ms = to_millis(window_size, "window size")
        if self.window_size_ms < 0 or self.retention_ms < self.window_size_ms:
            raise StreamsError(
                f"window store {name!r}: retention ({self.retention_ms} ms) must be at least the window size "
                f"({self.window_size_ms} ms), and the window size not negative"
            )
        self.retain_duplicates = retain_duplicates
        self.persistent = persistent

    @property
    def name(self) -> str:
        return self._name

    @property
    def metrics_scope(self) -> str:
        """The backend's name in metrics ("in-memory-window", "rocksdb-window")."""
        return "rocksdb-window" if self.persistent else "in-memory-window"

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


class SessionStoreSupplier:
    """Makes session stores (in memory or RocksDB) with a retention period, one per task."""

    def __init__(self, name: str, retention: Duration, persistent: bool) -> None:
        self._name = _check_name(name)
        self.retention_ms = to_millis(retention, "retention")
        if self.retention_ms < 0:
            raise StreamsError(f"session store {name!r}: retention must not be negative, got {retention!r}")
        self.persistent = persistent

    @property
    def name(self) -> str:
        return self._name

    @property
    def metrics_scope(self) -> str:
        """The backend's name in metrics ("in-memory-session", "rocksdb-session")."""
        return "rocksdb-session" if self.persistent else "in-memory-session"

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


_B = TypeVar("_B", bound="StoreBuilder")


class StoreFactory(Protocol):
    """What a topology needs of any store builder (key-value, window, session, join buffer)."""

    @property
    def name(self) -> str: ...

    @property
    def logging_enabled(self) -> bool: ...

    @property
    def log_config(self) -> dict[str, str]: ...

    def build(self, default_key_serde: Any = None, default_value_serde: Any = None) -> Any: ...


def changelog_topic_config(builder: StoreFactory, additional_retention_ms: int) -> dict[str, str]:
    """The configs a store's changelog topic is created with, as Kafka Streams sets them: compacted; a window
    or session store's also deleted after its retention plus ``additional_retention_ms`` (old windows never
    come back, so compaction alone would keep them for ever). The store's ``log_config`` wins."""
    if not isinstance(builder, WindowStoreBuilder):
        return {"cleanup.policy": "compact", **builder.log_config}
    config = {"cleanup.policy": "compact,delete", **builder.log_config}
    config.setdefault("retention.ms", str(builder.retention_ms + additional_retention_ms))
    return config


class StoreBuilder(ABC):
    """Builds one store stack per task, with the logging and caching choices made on it."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._logging_enabled = True
        self._log_config: dict[str, str] = {}
        self._caching_enabled = False

    @property
    def name(self) -> str:
        return self._name

    @property
    def logging_enabled(self) -> bool:
        """Whether changes go to the changelog topic (default True, as in Kafka Streams)."""
        return self._logging_enabled

    @property
    def log_config(self) -> dict[str, str]:
        """Topic configs for the changelog topic (a copy)."""
        return dict(self._log_config)

    @property
    def caching_enabled(self) -> bool:
        """Whether a record cache sits in the stack (built when the app's ``statestore_cache_max_bytes`` > 0)."""
        return self._caching_enabled

    def with_logging_enabled(self: _B, config: dict[str, str] | None = None) -> _B:
        """Logs changes to the changelog, created with the given topic configs."""
        self._logging_enabled = True
        self._log_config = dict(config or {})
        return self

    def with_logging_disabled(self: _B) -> _B:
        """No changelog: the store starts empty after a restart or a task move."""
        self._logging_enabled = False
        self._log_config = {}
        return self

    def with_caching_enabled(self: _B) -> _B:
        """Puts a record cache in front of the store: writes reach it and its changelog once per commit."""
        self._caching_enabled = True
        return self

    def with_caching_disabled(self: _B) -> _B:
        """Every write goes straight through to the store and its changelog."""
        self._caching_enabled = False
        return self

    @abstractmethod
    def build(
        self, default_key_serde: SerdeSpec | None = None, default_value_serde: SerdeSpec | None = None
    ) -> StateStore:
        """A new store stack; serdes left None on the builder fall back to the given defaults, then JSON."""


class KeyValueStoreBuilder(StoreBuilder):
    """Builds metered -> caching (when enabled) -> change-logging (when enabled) -> supplied store.

    A new layer is one ``WrappedKeyValueStore`` subclass and one line here.
    """

    def __init__(
        self,
        supplier: KeyValueStoreSupplier,
        key_serde: SerdeSpec | None = None,
        value_serde: SerdeSpec | None = None,
    ) -> None:
        super().__init__(supplier.name)
        self.supplier = supplier
        self.key_serde = key_serde
        self.value_serde = value_serde

    #: values are ValueAndTimestamp (KTable and aggregation stores)
    timestamped = False

    def build(
        self,
        default_key_serde: SerdeSpec | None = None,
        default_value_serde: SerdeSpec | None = None,
        dsl_store: str | None = None,
        cache_max_bytes: int = 0,
    ) -> KeyValueStore:
        """The stack metered -> caching (if enabled) -> change-logging (if enabled) -> backend.

        ``dsl_store="rocksdb"`` swaps an in-memory backend for RocksDB (the app's ``default_dsl_store``).
        ``cache_max_bytes`` is the budget of the calling stream thread's record cache (Kafka's ThreadCache,
        shared by the cached stores of its tasks); with caching enabled and a budget above 0, a caching
        layer is built over it, else none.
        """
        supplier = self.supplier
        if dsl_store == "rocksdb" and isinstance(supplier, InMemoryKeyValueStoreSupplier):
            supplier = RocksDBKeyValueStoreSupplier(supplier.name)
        store = supplier.get()
        key_serde = serde_from(_first(self.key_serde, default_key_serde, "json"))
        value_serde = serde_from(_first(self.value_serde, default_value_serde, "json"))
        use_serdes = getattr(store, "use_serdes", None)
        if use_serdes is not None:
            use_serdes(key_serde, value_serde, self.timestamped)
        if self._logging_enabled:
            store = ChangeLoggingKeyValueStore(store, key_serde, value_serde, timestamped=self.timestamped)
        if self._caching_enabled and cache_max_bytes > 0:
            # a persistent backend scans in serialized-key order: the cache merges its entries in that order
            name = supplier.name
            order = (lambda key: key_serde.serialize(name, key)) if store.persistent else None
            store = CachingKeyValueStore(store, thread_cache(cache_max_bytes), order)
        return MeteredKeyValueStore(store, supplier.metrics_scope)

    def __repr__(self) -> str:
        return (
            f"KeyValueStoreBuilder({self._name!r}, logging={self._logging_enabled}, "
            f"caching={self._caching_enabled})"
        )


def _first(*specs: SerdeSpec | None) -> SerdeSpec:
    return next(spec for spec in specs if spec is not None)


class Stores:
    """Factory of store suppliers and builders, named as Kafka Streams' ``Stores`` in snake_case."""

    @staticmethod
    def in_memory_key_value_store(name: str) -> KeyValueStoreSupplier:
        """A supplier of in-memory key-value stores (restored from the changelog after a restart)."""
        return InMemoryKeyValueStoreSupplier(name)

    @staticmethod
    def persistent_key_value_store(name: str) -> KeyValueStoreSupplier:
        """A supplier of RocksDB key-value stores: data on disk, only the changelog's tail restored."""
        return RocksDBKeyValueStoreSupplier(name)

    @staticmethod
    def key_value_store_builder(
        supplier: KeyValueStoreSupplier,
        key_serde: SerdeSpec | None = None,
        value_serde: SerdeSpec | None = None,
    ) -> KeyValueStoreBuilder:
        """A builder of key-value store stacks; logging is enabled and caching disabled by default."""
        return KeyValueStoreBuilder(supplier, key_serde, value_serde)

    @staticmethod
    def persistent_versioned_key_value_store(
        name: str, history_retention: Duration, segment_interval: Duration | None = None
    ) -> VersionedKeyValueStoreSupplier:
        """A supplier of RocksDB versioned stores (KIP-889): every version of a key for ``history_retention``
        behind stream time, which is also the grace period of writes; ``segment_interval`` only tunes
        performance (Kafka's default when None)."""
        return VersionedKeyValueStoreSupplier(name, history_retention, segment_interval)

    @staticmethod
    def in_memory_versioned_key_value_store(
        name: str, history_retention: Duration
    ) -> VersionedKeyValueStoreSupplier:
        """A kstream_nb extension (Kafka Streams has only the persistent one): the same versioned store in
        memory, restored in full from its changelog after a restart."""
        return VersionedKeyValueStoreSupplier(name, history_retention, persistent=False)

    @staticmethod
    def versioned_key_value_store_builder(
        supplier: VersionedKeyValueStoreSupplier,
        key_serde: SerdeSpec | None = None,
        value_serde: SerdeSpec | None = None,
    ) -> VersionedKeyValueStoreBuilder:
        """A builder of versioned store stacks (logging enabled; versioned stores have no cache)."""
        return VersionedKeyValueStoreBuilder(supplier, key_serde, value_serde)

    @staticmethod
    def in_memory_window_store(
        name: str, retention: Duration, window_size: Duration, retain_duplicates: bool = False
    ) -> WindowStoreSupplier:
        """A supplier of in-memory window stores keeping windows ``retention`` behind stream time."""
        return WindowStoreSupplier(name, retention, window_size, retain_duplicates, persistent=False)

    @staticmethod
    def persistent_window_store(
        name: str, retention: Duration, window_size: Duration, retain_duplicates: bool = False
    ) -> WindowStoreSupplier:
        """A supplier of RocksDB window stores: data on disk, only the changelog's tail restored."""
        return WindowStoreSupplier(name, retention, window_size, retain_duplicates, persistent=True)

    @staticmethod
    def in_memory_session_store(name: str, retention: Duration) -> SessionStoreSupplier:
        """A supplier of in-memory session stores keeping sessions ``retention`` behind stream time."""
        return SessionStoreSupplier(name, retention, persistent=False)

    @staticmethod
    def persistent_session_store(name: str, retention: Duration) -> SessionStoreSupplier:
        """A supplier of RocksDB session stores: data on disk, only the changelog's tail restored."""
        return SessionStoreSupplier(name, retention, persistent=True)

    @staticmethod
    def window_store_builder(
        supplier: WindowStoreSupplier, key_serde: SerdeSpec | None = None, value_serde: SerdeSpec | None = None
    ) -> WindowStoreBuilder:
        """A builder of window store stacks holding plain values; logging is enabled by default."""
        return WindowStoreBuilder(supplier.name, supplier.get, key_serde, value_serde, timestamped=False,
                                  follows_dsl_store=False)  # fmt: skip

    @staticmethod
    def timestamped_window_store_builder(
        supplier: WindowStoreSupplier, key_serde: SerdeSpec | None = None, value_serde: SerdeSpec | None = None
    ) -> WindowStoreBuilder:
        """A builder of window store stacks holding ``ValueAndTimestamp`` values (as DSL aggregations)."""
        return WindowStoreBuilder(supplier.name, supplier.get, key_serde, value_serde, timestamped=True,
                                  follows_dsl_store=False)  # fmt: skip

    @staticmethod
    def session_store_builder(
        supplier: SessionStoreSupplier, key_serde: SerdeSpec | None = None, value_serde: SerdeSpec | None = None
    ) -> WindowStoreBuilder:
        """A builder of session store stacks; logging is enabled by default."""
        return WindowStoreBuilder(supplier.name, supplier.get, key_serde, value_serde, timestamped=False,
                                  follows_dsl_store=False)  # fmt: skip


class WindowStoreBuilder:
    """Builds a window or session store stack for each task: metered, cached when enabled, change-logged
    unless disabled.

    ``make`` supplies the backend. Builders made by the DSL (``follows_dsl_store``) swap their in-memory
    backend for RocksDB when the app's ``default_dsl_store`` is ``"rocksdb"``; builders made from a
    ``Stores`` supplier keep the backend the supplier names.
    """

    def __init__(self, name: str, make: Callable[[], WindowStore | SessionStore],
                 key_serde: SerdeSpec | None = None, value_serde: SerdeSpec | None = None,
                 timestamped: bool = True, follows_dsl_store: bool = True) -> None:  # fmt: skip
        self.name = name
        self.timestamped = timestamped
        self._make = make
        self.key_serde = key_serde
        self.value_serde = value_serde
        self.follows_dsl_store = follows_dsl_store
        self.logging_enabled = True
        self.log_config: dict[str, str] = {}
        self.caching_enabled = False

    @property
    def retention_ms(self) -> int:
        """How long the store keeps windows or sessions behind stream time (its backend's retention)."""
        return int(self._make().retention_ms)

    def with_logging_enabled(self, config: dict[str, str] | None = None) -> WindowStoreBuilder:
        """Logs changes to the changelog, created with the given topic configs."""
        self.logging_enabled = True
        self.log_config = dict(config or {})
        return self

    def with_logging_disabled(self) -> WindowStoreBuilder:
        """No changelog: the store starts empty after a task move (a RocksDB store keeps its disk data)."""
        self.logging_enabled = False
        self.log_config = {}
        return self

    def with_caching_enabled(self) -> WindowStoreBuilder:
        """A record cache in front of a window or session store when the app's ``statestore_cache_max_bytes`` is
        above 0 (stores keeping duplicates are not cached)."""
        self.caching_enabled = True
        return self

    def with_caching_disabled(self) -> WindowStoreBuilder:
        """Every write goes straight through to the store and its changelog."""
        self.caching_enabled = False
        return self

    def build(
        self,
        default_key_serde: SerdeSpec | None = None,
        default_value_serde: SerdeSpec | None = None,
        dsl_store: str | None = None,
        cache_max_bytes: int = 0,
    ) -> Any:
        """A new store stack: metered -> caching (if enabled and ``cache_max_bytes`` > 0) -> change-logging (if
        enabled) -> backend; ``dsl_store="rocksdb"`` makes a DSL store persistent (``default_dsl_store``)."""
        store: Any = self._make()
        if dsl_store == "rocksdb" and self.follows_dsl_store:
            from kstream_nb.state.rocksdb_window import persistent_equivalent

            store = persistent_equivalent(store)
        backend = store
        key_serde = serde_from(self.key_serde if self.key_serde is not None else default_key_serde or "json")
        value = serde_from(self.value_serde if self.value_serde is not None else default_value_serde or "json")
        use_serdes = getattr(store, "use_serdes", None)
        if use_serdes is not None:
            use_serdes(key_serde, value, self.timestamped)
        cached = (
            self.caching_enabled
            and cache_max_bytes > 0
            and (
                isinstance(store, SessionStore) or (isinstance(store, WindowStore) and not store.retain_duplicates)
            )
        )
        if self.logging_enabled:
            if isinstance(store, SessionStore):
                store = ChangeLoggingSessionStore(store, key_serde, value)
            else:
                store = ChangeLoggingWindowStore(store, key_serde, value, self.timestamped)
        if cached:
            layer = CachingSessionStore if isinstance(backend, SessionStore) else CachingWindowStore
            store = layer(store, thread_cache(cache_max_bytes))
        scope = "rocksdb" if backend.persistent else "in-memory"
        if isinstance(backend, SessionStore):
            return MeteredSessionStore(store, f"{scope}-session")
        return MeteredWindowStore(store, f"{scope}-window")

    def __repr__(self) -> str:
        return f"WindowStoreBuilder({self.name!r}, logging={self.logging_enabled}, caching={self.caching_enabled})"
