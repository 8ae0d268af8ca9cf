"""State stores: interfaces, in-memory backend, caching/change-logging/metering layers, builders, queries."""

from kstream_nb.state.builders import KeyValueStoreBuilder, StoreBuilder, Stores, VersionedKeyValueStoreBuilder
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
from kstream_nb.state.suppliers import (
    InMemoryKeyValueStoreSupplier,
    KeyValueStoreSupplier,
    VersionedKeyValueStoreSupplier,
)
from kstream_nb.state.versioned import (
    PUT_RETURN_CODE_NOT_PUT,
    PUT_RETURN_CODE_VALID_TO_UNDEFINED,
    VersionedKeyValueStore,
    VersionedRecord,
)

__all__ = [
    "PUT_RETURN_CODE_NOT_PUT",
    "PUT_RETURN_CODE_VALID_TO_UNDEFINED",
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
    "VersionedKeyValueStore",
    "VersionedKeyValueStoreBuilder",
    "VersionedKeyValueStoreSupplier",
    "VersionedRecord",
    "WrappedKeyValueStore",
]
