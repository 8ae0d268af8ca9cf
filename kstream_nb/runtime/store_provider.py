"""Interactive queries: a read-only view of a store over a client's active tasks (or its global store), as
Kafka Streams' ``QueryableStoreProvider`` over its ``StreamThreadStateStoreProvider``s.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kstream_nb.errors import InvalidStateStoreError
from kstream_nb.state.builders import WindowStoreBuilder
from kstream_nb.state.query import (
    CompositeReadOnlyKeyValueStore,
    CompositeVersionedKeyValueStore,
    CompositeWindowStore,
)
from kstream_nb.state.timestamped import PlainValueView, TimestampedKeyValueStoreBuilder
from kstream_nb.topology.topology import Topology

if TYPE_CHECKING:
    from kstream_nb.runtime.app import KafkaStreams


def queryable_store(app: KafkaStreams, name: str) -> Any:
    """What ``KafkaStreams.store(name)`` returns (see there)."""
    from kstream_nb.runtime.app import State

    builder = app.topology.store_builders.get(name)
    is_global = name in app.topology.global_stores
    if builder is None and not is_global:
        known = sorted([*app.topology.store_builders, *app.topology.global_stores])
        raise InvalidStateStoreError(f"no state store named {name!r} in this topology (stores: {known})")

    def stores() -> list[Any]:
        if app.state not in (State.RUNNING, State.REBALANCING):
            return []
        if is_global:
            return [app._global_stores.stores[name]] if app._global_stores else []
        return [t.stores[name].store for th in app.threads for t in list(th.tasks.values()) if name in t.stores]

    return composite_view(app.topology, name, stores)


def composite_view(topology: Topology, name: str, stores: Callable[[], list[Any]]) -> Any:
    """The read-only view of store ``name`` over the store instances ``stores()`` returns: the one rule for
    which view a store kind gets (the local view above; the query server's view of chosen tasks)."""
    builder = topology.store_builders.get(name)
    if isinstance(builder, WindowStoreBuilder):
        return CompositeWindowStore(name, stores)
    if getattr(builder, "versioned", False):  # get(key) and get(key, as_of_timestamp)
        return CompositeVersionedKeyValueStore(name, stores)
    if name in topology.global_stores or isinstance(builder, TimestampedKeyValueStoreBuilder):
        return CompositeReadOnlyKeyValueStore(name, lambda: [PlainValueView(s) for s in stores()])
    return CompositeReadOnlyKeyValueStore(name, stores)
