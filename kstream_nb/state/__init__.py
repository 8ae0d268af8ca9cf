"""State stores: interfaces, in-memory backend, caching/change-logging/metering layers, builders, queries."""

from kstream_nb.state.builders import (
    InMemoryKeyValueStoreSupplier,
    KeyValueStoreBuilder,
    KeyValueStoreSupplier,
    StoreBuilder,
    Stores,
)
from kstream_nb.state.caching import CachingKeyValueStore, ThreadCache
from kstream_nb.state.changelogging import ChangeLoggingKeyValueStore, MeteredKeyValueStore
from kstream_nb.state.memory import InMemoryKeyValueStore
from kstream_nb.state.query import CompositeReadOnlyKeyValueStore
from kstream_nb.state.store import (
    KeyValue,
    KeyValueStore,
    ReadOnlyKeyValueStore,
    StateStore,
    StateStoreContext,
    WrappedKeyValueStore,
)

__all__ = [
    "CachingKeyValueStore",
    "ChangeLoggingKeyValueStore",
    "CompositeReadOnlyKeyValueStore",
    "InMemoryKeyValueStore",
    "InMemoryKeyValueStoreSupplier",
    "KeyValue",
    "KeyValueStore",
    "KeyValueStoreBuilder",
    "KeyValueStoreSupplier",
    "MeteredKeyValueStore",
    "ReadOnlyKeyValueStore",
    "StateStore",
    "StateStoreContext",
    "StoreBuilder",
    "Stores",
    "ThreadCache",
    "WrappedKeyValueStore",
]
