"""Kafka Streams' ``Stores`` factory: store suppliers and builders that stack the store layers."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Protocol, TypeVar

from kstream_nb.cluster.serdes import SerdeSpec, serde_from
from kstream_nb.errors import StreamsError
from kstream_nb.state.changelogging import ChangeLoggingKeyValueStore, MeteredKeyValueStore
from kstream_nb.state.memory import InMemoryKeyValueStore
from kstream_nb.state.store import KeyValueStore, StateStore


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
        """Whether a record cache should sit in the stack (recorded; the caching layer is not built yet)."""
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
        """Asks for a record cache in front of the store (recorded only for now)."""
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
    """Builds metered -> change-logging (when enabled) -> supplied store.

    A new layer (the record cache, say) is one ``WrappedKeyValueStore`` subclass and one line here.
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
    ) -> KeyValueStore:
        """The stack metered -> change-logging (if enabled) -> backend.

        ``dsl_store="rocksdb"`` swaps an in-memory backend for RocksDB (the app's ``default_dsl_store``).
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
