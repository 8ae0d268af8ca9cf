"""The subscription store of a foreign-key join's right side (Kafka Streams' subscription store of
``SubscriptionReceiveProcessorSupplier``): ``(foreign key, primary key) -> (value hash, left partition)``,
change-logged, with an index from foreign key to its subscribers in primary-key byte order.
"""

from __future__ import annotations

import struct
from bisect import bisect_left, insort
from collections.abc import Callable, Mapping
from typing import Any

from kstream_nb.cluster.serde_specs import SerdeSpec, serde_from
from kstream_nb.cluster.serdes import Serde
from kstream_nb.errors import SerializationError
from kstream_nb.state.builders import KeyValueStoreBuilder
from kstream_nb.state.memory import InMemoryKeyValueStore
from kstream_nb.state.suppliers import InMemoryKeyValueStoreSupplier

#: the size of a left value's hash (``processor.fk_join.ValueHasher``)
_HASH_SIZE = 16
_INT = struct.Struct(">i")
_ABSENT = object()


class CombinedKeySerde(Serde):
    """``(foreign key, primary key)``: 4-byte length of the foreign key's bytes, them, the primary key's."""

    def __init__(self, foreign_key_serde: Serde, primary_key_serde: Serde) -> None:
        self.foreign_key_serde = foreign_key_serde
        self.primary_key_serde = primary_key_serde

    def configure(self, configs: Mapping[str, Any], is_key: bool) -> Serde:
        """Configures both key serdes inside (a registry serde binds its registry)."""
        fk = self.foreign_key_serde.configure(configs, True)
        pk = self.primary_key_serde.configure(configs, True)
        if fk is self.foreign_key_serde and pk is self.primary_key_serde:
            return self
        return CombinedKeySerde(fk, pk)

    def serialize(self, topic: str, data: Any) -> bytes | None:
        if data is None:
            return None
        fk = self.foreign_key_serde.serialize(topic, data[0]) or b""
        return _INT.pack(len(fk)) + fk + (self.primary_key_serde.serialize(topic, data[1]) or b"")

    def deserialize(self, topic: str, data: bytes | None) -> Any:
        if data is None:
            return None
        try:
            (n,) = _INT.unpack_from(data)
            fk = self.foreign_key_serde.deserialize(topic, data[4 : 4 + n])
            return fk, self.primary_key_serde.deserialize(topic, data[4 + n :])
        except struct.error as e:
            raise SerializationError(
                f"corrupt foreign-key join subscription key in topic {topic!r}: {data[:32]!r}: {e}"
            ) from e


class SubscriptionStateSerde(Serde):
    """A stored subscription: 16-byte value hash and the 4-byte left partition."""

    def serialize(self, topic: str, data: Any) -> bytes | None:
        return None if data is None else bytes(data[0]) + _INT.pack(data[1])

    def deserialize(self, topic: str, data: bytes | None) -> Any:
        if data is None:
            return None
        return bytes(data[:_HASH_SIZE]), _INT.unpack_from(data, _HASH_SIZE)[0]


class SubscriptionIndexStore(InMemoryKeyValueStore):
    """In-memory ``(fk, pk) -> ValueAndTimestamp((hash, partition))`` plus an index fk -> {pk: value}.

    The index answers "who subscribes to fk" in time proportional to the answer, in the order of
    ``primary_key_order`` (the left key's serialized bytes: Kafka prefix-scans a byte-ordered store of
    combined keys, so one right update fans out in primary-key byte order); restores go through ``put``
    and so rebuild it.
    """

    def __init__(self, name: str, primary_key_order: Callable[[Any], Any]) -> None:
        super().__init__(name)
        self._by_fk: dict[Any, dict[Any, Any]] = {}
        self._order = primary_key_order
        self._fk_order: dict[Any, list[tuple[Any, Any]]] = {}  # fk -> sorted (order key, pk) of its subscribers

    def put(self, key: Any, value: Any) -> None:
        if value is None:
            self.delete(key)
            return
        super().put(key, value)
        fk, pk = key
        subscribers = self._by_fk.get(fk)
        if subscribers is None:
            subscribers = self._by_fk[fk] = {}
            self._fk_order[fk] = []
        if pk not in subscribers:
            insort(self._fk_order[fk], (self._order(pk), pk))
        subscribers[pk] = value

    def put_if_absent(self, key: Any, value: Any) -> Any:
        old = self.get(key)
        if old is None:
            self.put(key, value)
        return old

    def delete(self, key: Any) -> Any:
        old = super().delete(key)
        fk, pk = key
        subscribers = self._by_fk.get(fk)
        if subscribers is not None and subscribers.pop(pk, _ABSENT) is not _ABSENT:
            if subscribers:
                order = self._fk_order[fk]
                at = bisect_left(order, (self._order(pk),))
                while order[at][1] != pk:  # equal order keys (only for keys the serde cannot tell apart)
                    at += 1
                del order[at]
            else:
                del self._by_fk[fk], self._fk_order[fk]
        return old

    def close(self) -> None:
        super().close()
        self._by_fk.clear()
        self._fk_order.clear()

    def subscribers(self, foreign_key: Any) -> list[tuple[Any, Any]]:
        """``(primary key, ValueAndTimestamp((hash, partition)))`` of every subscription to ``foreign_key``."""
        found = self._by_fk.get(foreign_key)
        if not found:
            return []
        return [(pk, found[pk]) for _, pk in self._fk_order[foreign_key]]


class SubscriptionStoreBuilder(KeyValueStoreBuilder):
    """Builds metered -> change-logging -> :class:`SubscriptionIndexStore`; key serdes default to the app's."""

    #: the changelog holds (hash, partition) with the subscription's timestamp on the record
    timestamped = True

    def __init__(
        self, name: str, foreign_key_serde: SerdeSpec | None, primary_key_serde: SerdeSpec | None
    ) -> None:
        super().__init__(InMemoryKeyValueStoreSupplier(name))
        self.foreign_key_serde = foreign_key_serde
        self.primary_key_serde = primary_key_serde

    def _serdes(
        self, default_key_serde: SerdeSpec | None, default_value_serde: SerdeSpec | None
    ) -> tuple[Serde, Serde]:
        """The changelog's serdes: combined ``(fk, pk)`` keys and ``(hash, partition)`` values."""
        default = default_key_serde if default_key_serde is not None else "string_or_json"
        fk = serde_from(self.foreign_key_serde if self.foreign_key_serde is not None else default)
        pk = serde_from(self.primary_key_serde if self.primary_key_serde is not None else default)
        return CombinedKeySerde(fk, pk), SubscriptionStateSerde()

    def _backend(self, dsl_store: str | None, key_serde: Serde, value_serde: Serde) -> tuple[Any, str]:
        name, pk = self.name, key_serde.primary_key_serde  # type: ignore[attr-defined]

        def primary_key_order(key: Any) -> bytes:
            return pk.serialize(name, key) or b""

        return SubscriptionIndexStore(name, primary_key_order), "in-memory"


def subscription_index(store: Any) -> SubscriptionIndexStore:
    """The index store at the bottom of a subscription store stack."""
    while not isinstance(store, SubscriptionIndexStore):
        store = store.inner
    return store
