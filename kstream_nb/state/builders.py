"""Kafka Streams' store builders and the ``Stores`` factory.

One ``StoreBuilder.build`` composes every stack as Kafka's ``KeyValueStoreBuilder``,
``TimestampedKeyValueStoreBuilder``, ``WindowStoreBuilder``, ``SessionStoreBuilder`` and
``VersionedKeyValueStoreBuilder`` do: metered(maybe-cached(maybe-logged(backend))); each kind says only
which backend and which layers it has.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from typing import Any, Protocol, TypeVar

from kstream_nb.cluster.schema_registry import configure_serde
from kstream_nb.cluster.serde_specs import SerdeSpec, serde_from
from kstream_nb.cluster.serdes import Serde
from kstream_nb.durations import Duration
from kstream_nb.errors import IllegalStateError
from kstream_nb.state.caching import CachingKeyValueStore
from kstream_nb.state.changelogging import ChangeLoggingKeyValueStore, MeteredKeyValueStore
from kstream_nb.state.session_caching import CachingSessionStore
from kstream_nb.state.store import KeyValueStore
from kstream_nb.state.suppliers import (
    InMemoryKeyValueStoreSupplier,
    KeyValueStoreSupplier,
    RocksDBKeyValueStoreSupplier,
    SessionStoreSupplier,
    VersionedKeyValueStoreSupplier,
    WindowStoreSupplier,
)
from kstream_nb.state.versioned_layers import ChangeLoggingVersionedKeyValueStore, MeteredVersionedKeyValueStore
from kstream_nb.state.window_caching import CachingWindowStore
from kstream_nb.state.window_store import (
    ChangeLoggingSessionStore,
    ChangeLoggingWindowStore,
    MeteredSessionStore,
    MeteredWindowStore,
    SessionStore,
    WindowStore,
)

#: Kafka's VERSIONED_STORE_CHANGE_LOG_ADDITIONAL_COMPACTION_LAG_MS
ADDITIONAL_COMPACTION_LAG_MS = 86_400_000

_B = TypeVar("_B", bound="StoreBuilder")


class StoreFactory(Protocol):
    """What a topology needs of any store builder (key-value, window, session, join buffer)."""

    @property
    def name(self) -> str: ...

    @property
    def logging_enabled(self) -> bool: ...

    @property
    def log_config(self) -> dict[str, str]: ...

    def build(
        self,
        default_key_serde: Any = None,
        default_value_serde: Any = None,
        dsl_store: str | None = None,
        caching: bool = False,
        serde_configs: Mapping[str, Any] | None = None,
    ) -> Any: ...


def changelog_topic_config(builder: StoreFactory, additional_retention_ms: int) -> dict[str, str]:
    """The configs a store's changelog topic is created with (``StoreBuilder.changelog_config``); a factory
    that is no ``StoreBuilder`` gets a compacted topic with its ``log_config``."""
    if isinstance(builder, StoreBuilder):
        return builder.changelog_config(additional_retention_ms)
    return {"cleanup.policy": "compact", **builder.log_config}


def _first(*specs: SerdeSpec | None) -> SerdeSpec:
    return next(spec for spec in specs if spec is not None)


class StoreBuilder(ABC):
    """Builds one store stack per task, with the logging and caching choices made on it.

    ``build`` is the same for every kind: ``metered(cached(logged(backend)))``, the caching layer only when
    enabled, cacheable and the task's thread has a record cache, the change-logging one only when enabled.
    Subclasses say which backend (``_backend``) and which layers (``_logged``, ``_cached``, ``_metered``); a
    buffer that logs and counts itself (suppression, time-ordered join buffer) is its own stack.
    """

    #: DSL-made stores follow the app's ``default_dsl_store``; those from a user's supplier keep their backend
    follows_dsl_store = False
    #: values are ValueAndTimestamp (KTable and aggregation stores)
    timestamped = False
    #: what ``app.store`` and the DSL check (a versioned table, a versioned join lookup)
    versioned = False

    def __init__(
        self, name: str, key_serde: SerdeSpec | None = None, value_serde: SerdeSpec | None = None
    ) -> None:
        self._name = name
        self.key_serde = key_serde
        self.value_serde = value_serde
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

    def changelog_config(self, additional_retention_ms: int) -> dict[str, str]:
        """The configs the changelog topic is created with, as Kafka Streams sets them: compacted, and the
        store's ``log_config``. (``additional_retention_ms`` is for window and session stores.)"""
        return {"cleanup.policy": "compact", **self.log_config}

    def with_logging_enabled(self: _B, config: dict[str, str] | None = None) -> _B:
        """Logs changes to the changelog, created with the given topic configs."""
        self._logging_enabled = True
        self._log_config = dict(config or {})
        return self

    def with_logging_disabled(self: _B) -> _B:
        """No changelog: the store starts empty after a task move (a RocksDB store keeps its disk data)."""
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

    def build(
        self,
        default_key_serde: SerdeSpec | None = None,
        default_value_serde: SerdeSpec | None = None,
        dsl_store: str | None = None,
        caching: bool = False,
        serde_configs: Mapping[str, Any] | None = None,
    ) -> Any:
        """A new stack: metered -> caching (if enabled) -> change-logging (if enabled) -> backend.

        Serdes left None on the builder fall back to the given defaults, then JSON; they are configured with
        ``serde_configs`` (the app's settings: its Schema Registry), as Kafka Streams configures a store's
        serdes with the app's configs. ``dsl_store="rocksdb"``
        makes a DSL store persistent (the app's ``default_dsl_store``). ``caching`` says whether the task's
        stream thread has a record cache (a budget above 0): with it and caching enabled, a caching layer is
        built, which takes its part of that cache from the context at ``init``; else none.
        """
        key_serde, value_serde = self._serdes(default_key_serde, default_value_serde)
        key_serde = configure_serde(key_serde, serde_configs, True)
        value_serde = configure_serde(value_serde, serde_configs, False)
        backend, metrics_scope = self._backend(
            dsl_store if self.follows_dsl_store else None, key_serde, value_serde
        )
        store: Any = backend
        if self._logging_enabled:
            store = self._logged(store, key_serde, value_serde)
        if self._caching_enabled and caching and self._cacheable(backend):
            store = self._cached(store, key_serde)
        return self._metered(store, metrics_scope)

    def _serdes(
        self, default_key_serde: SerdeSpec | None, default_value_serde: SerdeSpec | None
    ) -> tuple[Serde, Serde]:
        """The store's key and value serdes."""
        return (
            serde_from(_first(self.key_serde, default_key_serde, "string_or_json")),
            serde_from(_first(self.value_serde, default_value_serde, "json")),
        )

    def _use_serdes(self, backend: Any, key_serde: Serde, value_serde: Serde) -> Any:
        """Gives a backend that stores bytes (RocksDB) the serdes; returns it."""
        use_serdes = getattr(backend, "use_serdes", None)
        if use_serdes is not None:
            use_serdes(key_serde, value_serde, self.timestamped)
        use_key_serde = getattr(backend, "use_key_serde", None)
        if use_key_serde is not None:
            use_key_serde(key_serde)
        return backend

    @abstractmethod
    def _backend(self, dsl_store: str | None, key_serde: Serde, value_serde: Serde) -> tuple[Any, str]:
        """A new innermost store (persistent if ``dsl_store`` is ``"rocksdb"``) and its name in metrics."""

    def _logged(self, store: Any, key_serde: Serde, value_serde: Serde) -> Any:
        """The change-logging layer over ``store`` (none: a store that logs its own changes, as a buffer)."""
        return store

    def _cacheable(self, backend: Any) -> bool:
        """Whether the backend can have a record cache in front of it."""
        return True

    def _cached(self, store: Any, key_serde: Serde) -> Any:
        """The caching layer over ``store`` (the builders without one never enable caching)."""
        raise NotImplementedError(f"{type(self).__name__} builds no caching layer")

    def _metered(self, store: Any, metrics_scope: str) -> Any:
        """The outermost, metering layer (none: a store that counts its own operations, or none at all)."""
        return store

    def __repr__(self) -> str:
        kind, logging, caching = type(self).__name__, self._logging_enabled, self._caching_enabled
        return f"{kind}({self._name!r}, logging={logging}, caching={caching})"


class KeyValueStoreBuilder(StoreBuilder):
    """Builds metered -> caching (when enabled) -> change-logging (when enabled) -> supplied store."""

    def __init__(
        self,
        supplier: KeyValueStoreSupplier,
        key_serde: SerdeSpec | None = None,
        value_serde: SerdeSpec | None = None,
    ) -> None:
        super().__init__(supplier.name, key_serde, value_serde)
        self.supplier = supplier

    def _backend(self, dsl_store: str | None, key_serde: Serde, value_serde: Serde) -> tuple[Any, str]:
        supplier = self.supplier.for_dsl_store(dsl_store)
        return self._use_serdes(supplier.get(), key_serde, value_serde), supplier.metrics_scope

    def _logged(self, store: Any, key_serde: Serde, value_serde: Serde) -> Any:
        return ChangeLoggingKeyValueStore(store, key_serde, value_serde, timestamped=self.timestamped)

    def _cached(self, store: Any, key_serde: Serde) -> Any:
        # a persistent backend scans in serialized-key order: the cache merges its entries in that order
        name = self._name
        order = (lambda key: key_serde.serialize(name, key)) if store.persistent else None
        return CachingKeyValueStore(store, order)

    def _metered(self, store: Any, metrics_scope: str) -> KeyValueStore:
        return MeteredKeyValueStore(store, metrics_scope)


class WindowStoreBuilder(StoreBuilder):
    """Builds a window store stack for each task: metered, cached when enabled (unless it keeps duplicates),
    change-logged unless disabled.

    ``make`` supplies the backend. Builders made by the DSL (``follows_dsl_store``) swap their in-memory
    backend for RocksDB when the app's ``default_dsl_store`` is ``"rocksdb"``; builders made from a
    ``Stores`` supplier keep the backend the supplier names. A window store's changelog is also deleted
    after the retention (``changelog_config``), and ``app.store`` answers window queries for it.
    """

    #: what the metrics scope of the backend ends with
    _scope_suffix = "-window"

    def __init__(self, name: str, make: Callable[[], WindowStore | SessionStore],
                 key_serde: SerdeSpec | None = None, value_serde: SerdeSpec | None = None,
                 timestamped: bool = True, follows_dsl_store: bool = True) -> None:  # fmt: skip
        super().__init__(name, key_serde, value_serde)
        self.timestamped = timestamped
        self._make = make
        self.follows_dsl_store = follows_dsl_store

    @property
    def retention_ms(self) -> int:
        """How long the store keeps windows or sessions behind stream time (its backend's retention)."""
        return int(self._make().retention_ms)

    def changelog_config(self, additional_retention_ms: int) -> dict[str, str]:
        """Compacted and deleted after the retention plus ``additional_retention_ms`` (old windows never come
        back, so compaction alone would keep them for ever); the store's ``log_config`` wins."""
        config = {"cleanup.policy": "compact,delete", **self.log_config}
        config.setdefault("retention.ms", str(self.retention_ms + additional_retention_ms))
        return config

    def _backend(self, dsl_store: str | None, key_serde: Serde, value_serde: Serde) -> tuple[Any, str]:
        store: Any = self._make()
        if dsl_store == "rocksdb":
            from kstream_nb.state.rocksdb_window import persistent_equivalent

            store = persistent_equivalent(store)
        scope = ("rocksdb" if store.persistent else "in-memory") + self._scope_suffix
        return self._use_serdes(store, key_serde, value_serde), scope

    def _logged(self, store: Any, key_serde: Serde, value_serde: Serde) -> Any:
        return ChangeLoggingWindowStore(store, key_serde, value_serde, self.timestamped)

    def _cacheable(self, backend: Any) -> bool:
        return isinstance(backend, WindowStore) and not backend.retain_duplicates

    def _cached(self, store: Any, key_serde: Serde) -> Any:
        return CachingWindowStore(store)

    def _metered(self, store: Any, metrics_scope: str) -> Any:
        return MeteredWindowStore(store, metrics_scope)


class SessionStoreBuilder(WindowStoreBuilder):
    """Builds a session store stack for each task: metered, cached when enabled, change-logged unless
    disabled. (A ``WindowStoreBuilder`` too: a store with a retention, queried and change-logged alike.)"""

    _scope_suffix = "-session"

    def _logged(self, store: Any, key_serde: Serde, value_serde: Serde) -> Any:
        return ChangeLoggingSessionStore(store, key_serde, value_serde)

    def _cacheable(self, backend: Any) -> bool:
        return True

    def _cached(self, store: Any, key_serde: Serde) -> Any:
        return CachingSessionStore(store)

    def _metered(self, store: Any, metrics_scope: str) -> Any:
        return MeteredSessionStore(store, metrics_scope)


class VersionedKeyValueStoreBuilder(StoreBuilder):
    """Builds metered -> change-logging (unless disabled) -> versioned backend, one stack per task.

    Every write goes to the changelog at once; the topic is compacted with ``min.compaction.lag.ms`` =
    history retention plus one day (Kafka's ``VersionedChangelogTopicConfig``), so compaction keeps the
    history a restore needs. Versioned stores have no record cache.
    """

    versioned = True

    def __init__(self, supplier: VersionedKeyValueStoreSupplier, key_serde: SerdeSpec | None = None,
                 value_serde: SerdeSpec | None = None) -> None:  # fmt: skip
        super().__init__(supplier.name, key_serde, value_serde)
        self.supplier = supplier

    @property
    def history_retention_ms(self) -> int:
        return self.supplier.history_retention_ms

    @property
    def log_config(self) -> dict[str, str]:
        """The changelog's topic configs: ``min.compaction.lag.ms`` = history retention + 1 day unless given."""
        config = dict(self._log_config)
        config.setdefault(
            "min.compaction.lag.ms", str(self.supplier.history_retention_ms + ADDITIONAL_COMPACTION_LAG_MS)
        )
        return config

    def with_caching_enabled(self) -> VersionedKeyValueStoreBuilder:
        raise IllegalStateError(f"versioned store {self.name!r}: versioned stores do not support caching")

    def _use_serdes(self, backend: Any, key_serde: Serde, value_serde: Serde) -> Any:
        use_serdes = getattr(backend, "use_serdes", None)
        if use_serdes is not None:
            use_serdes(key_serde, value_serde)
        return backend

    def _backend(self, dsl_store: str | None, key_serde: Serde, value_serde: Serde) -> tuple[Any, str]:
        return self._use_serdes(self.supplier.get(), key_serde, value_serde), self.supplier.metrics_scope

    def _logged(self, store: Any, key_serde: Serde, value_serde: Serde) -> Any:
        return ChangeLoggingVersionedKeyValueStore(store, key_serde, value_serde)

    def _metered(self, store: Any, metrics_scope: str) -> Any:
        return MeteredVersionedKeyValueStore(store, metrics_scope)

    def __repr__(self) -> str:
        return f"VersionedKeyValueStoreBuilder({self.name!r}, logging={self._logging_enabled})"


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
    ) -> SessionStoreBuilder:
        """A builder of session store stacks; logging is enabled by default."""
        return SessionStoreBuilder(supplier.name, supplier.get, key_serde, value_serde, timestamped=False,
                                   follows_dsl_store=False)  # fmt: skip
