"""Foreign-key table-table joins (Kafka's KIP-213): subscriptions out, responses back, stale ones dropped.

A left row ``(k, v)`` points at right row ``fk = extractor(v)``. The two tables may be partitioned
differently, so the join runs in two sub-topologies that talk through two internal topics:

- left side: :class:`SubscriptionSend` turns every left change into subscription instructions keyed by
  ``fk`` (registration topic, partitioned like the right table); :class:`ResponseJoin` reads the
  responses (response topic, partitioned like the left table), drops those whose value hash no longer
  matches the left row's current value, and emits the joined row keyed by ``k``;
- right side: :class:`SubscriptionReceive` keeps one subscription per ``(fk, k)`` in a subscription store
  and answers with the right row; :class:`ForeignTableJoin` answers every subscriber of a right key when
  that row changes.

Responses carry the left partition the subscription came from, so they go back to the task that owns
``k`` whatever partitioner wrote the left topic (as Kafka's ``primaryPartition``).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Mapping
from hashlib import blake2b
from typing import Any, NamedTuple

import orjson

from kstream_nb.cluster.serdes import Serde
from kstream_nb.errors import SerializationError
from kstream_nb.processor.api import Change, Processor, Record, ValueAndTimestamp
from kstream_nb.processor.node import NodeContext
from kstream_nb.processor.table_joins import TableGetter, connect
from kstream_nb.processor.table_ops import is_latest
from kstream_nb.state.subscription_store import subscription_index

# Subscription instructions, as Kafka's ``SubscriptionWrapper.Instruction``.
DELETE_KEY_NO_PROPAGATE = 0
DELETE_KEY_AND_PROPAGATE = 1
PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE = 2
PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE = 3
_INSTRUCTIONS = range(4)

_HASH_SIZE = 16
_VERSION = 0
_INT = struct.Struct(">i")
_HEAD = struct.Struct(">BBB")  # version, instruction / flags, hash present


class SubscriptionWrapper(NamedTuple):
    """What a left row sends to its foreign key: its value hash (None = deleted), what to do, who it is."""

    hash: bytes | None
    instruction: int
    primary_key: Any
    primary_partition: int


class SubscriptionResponse(NamedTuple):
    """What the right side answers: the hash it was asked with and the right value (None = no row)."""

    hash: bytes | None
    foreign_value: Any
    primary_partition: int


class ValueHasher:
    """128-bit hash of a left value: of its serialized bytes (the table's value serde), else canonical JSON.

    Only the left sub-topology hashes, so the hash just has to be stable for equal values in one app.
    """

    def __init__(self, serde: Serde | None) -> None:
        self.serde = serde

    def __call__(self, value: Any) -> bytes | None:
        if value is None:
            return None
        if self.serde is not None:
            data = self.serde.serialize("fk-join-value-hash", value) or b""
        else:
            data = orjson.dumps(
                value,
                default=repr,
                option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY,
            )
        return blake2b(data, digest_size=_HASH_SIZE).digest()


def _corrupt(what: str, topic: str, data: bytes, e: Exception) -> SerializationError:
    return SerializationError(f"corrupt {what} in topic {topic!r}: {data[:32]!r}: {e}")


def _hash_bytes(h: bytes | None) -> bytes:
    if h is None:
        return b"\x00"
    if len(h) != _HASH_SIZE:
        raise ValueError(f"a value hash has {_HASH_SIZE} bytes, got {len(h)}")
    return b"\x01" + h


class SubscriptionWrapperSerde(Serde):
    """version, instruction, hash flag (+16 bytes), 4-byte left partition, then the left key's bytes."""

    def __init__(self, primary_key_serde: Serde) -> None:
        self.primary_key_serde = primary_key_serde

    def configure(self, configs: Mapping[str, Any], is_key: bool) -> Serde:
        """Configures the left key serde inside, as a key serde (a registry serde binds its registry)."""
        inner = self.primary_key_serde.configure(configs, True)
        return self if inner is self.primary_key_serde else SubscriptionWrapperSerde(inner)

    def serialize(self, topic: str, data: Any) -> bytes | None:
        if data is None:
            return None
        key = self.primary_key_serde.serialize(topic, data.primary_key) or b""
        return (
            bytes((_VERSION, data.instruction)) + _hash_bytes(data.hash) + _INT.pack(data.primary_partition) + key
        )

    def deserialize(self, topic: str, data: bytes | None) -> Any:
        if data is None:
            return None
        try:
            version, instruction, has_hash = _HEAD.unpack_from(data)
            if version != _VERSION or instruction not in _INSTRUCTIONS:
                raise ValueError(f"unknown subscription version {version} / instruction {instruction}")
            pos = 3 + (_HASH_SIZE if has_hash else 0)
            digest = data[3:pos] if has_hash else None
            (partition,) = _INT.unpack_from(data, pos)
            key = self.primary_key_serde.deserialize(topic, data[pos + 4 :])
        except (struct.error, ValueError) as e:
            raise _corrupt("foreign-key join subscription", topic, data, e) from e
        return SubscriptionWrapper(digest, instruction, key, partition)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SubscriptionWrapperSerde) and other.primary_key_serde == self.primary_key_serde

    def __hash__(self) -> int:
        return hash(("fk-subscription", self.primary_key_serde))


class SubscriptionResponseSerde(Serde):
    """version, hash flag (+16 bytes), 4-byte left partition, value flag, then the right value's bytes."""

    def __init__(self, foreign_value_serde: Serde) -> None:
        self.foreign_value_serde = foreign_value_serde

    def configure(self, configs: Mapping[str, Any], is_key: bool) -> Serde:
        """Configures the right value serde inside (a registry serde binds its registry)."""
        inner = self.foreign_value_serde.configure(configs, False)
        return self if inner is self.foreign_value_serde else SubscriptionResponseSerde(inner)

    def serialize(self, topic: str, data: Any) -> bytes | None:
        if data is None:
            return None
        value = (
            None if data.foreign_value is None else self.foreign_value_serde.serialize(topic, data.foreign_value)
        )
        return (
            bytes((_VERSION,))
            + _hash_bytes(data.hash)
            + _INT.pack(data.primary_partition)
            + (b"\x00" if value is None else b"\x01" + value)
        )

    def deserialize(self, topic: str, data: bytes | None) -> Any:
        if data is None:
            return None
        try:
            if data[0] != _VERSION:
                raise ValueError(f"unknown response version {data[0]}")
            pos = 2 + (_HASH_SIZE if data[1] else 0)
            digest = data[2:pos] if data[1] else None
            (partition,) = _INT.unpack_from(data, pos)
            pos += 4
            value = self.foreign_value_serde.deserialize(topic, data[pos + 1 :]) if data[pos] else None
        except (struct.error, ValueError, IndexError) as e:
            raise _corrupt("foreign-key join response", topic, data, e) from e
        return SubscriptionResponse(digest, value, partition)

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, SubscriptionResponseSerde) and other.foreign_value_serde == self.foreign_value_serde
        )

    def __hash__(self) -> int:
        return hash(("fk-response", self.foreign_value_serde))


# ---- left side -----------------------------------------------------------------------------------


class SubscriptionSend(Processor):
    """Left change -> subscription instructions keyed by foreign key (Kafka's SubscriptionSendProcessor).

    Inner: insert subscribes (answer only if the right row exists); an update keeping the fk re-subscribes
    the same way; an fk change unsubscribes the old fk and subscribes the new one asking for an answer in
    any case (to delete the old result); a delete or a null fk unsubscribes with an answer (a tombstone).
    Left: every change also asks for an answer in any case; a null fk (or a delete) asks the "null" key.
    """

    context: NodeContext

    def __init__(
        self, extractor: Callable[..., Any], with_key: bool, left_join: bool, hasher: ValueHasher
    ) -> None:
        self.extractor = extractor
        self.with_key = with_key
        self.left_join = left_join
        self.hasher = hasher

    def _fk(self, key: Any, value: Any) -> Any:
        if value is None:
            return None
        return self.extractor(key, value) if self.with_key else self.extractor(value)

    def process(self, record: Record) -> None:
        key = record.key
        change: Change = record.value
        if not is_latest(change):  # Kafka drops out-of-order updates of a versioned table (KIP-914)
            self.context.record_dropped("out-of-order record from versioned table in foreign-key join")
            return
        old, new = change.old_value, change.new_value
        if old is None and new is None:
            return  # deleting a row that does not exist
        old_fk = self._fk(key, old)
        new_fk = self._fk(key, new)
        digest = self.hasher(new)
        partition = self.context.partition

        def send(fk: Any, instruction: int) -> None:
            wrapper = SubscriptionWrapper(digest, instruction, key, partition)
            self.context.forward(Record(fk, wrapper, record.timestamp, record.headers))

        if self.left_join:
            if old_fk is not None and old_fk != new_fk:
                send(old_fk, DELETE_KEY_NO_PROPAGATE)
            send(new_fk, PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE)
            return
        if new is None:
            if old_fk is not None:
                send(old_fk, DELETE_KEY_AND_PROPAGATE)
            return
        if new_fk is None:
            self.context.record_dropped("null foreign key in foreign-key join")
            if old_fk is not None:
                send(old_fk, DELETE_KEY_AND_PROPAGATE)
            return
        if old_fk is not None and old_fk != new_fk:
            send(old_fk, DELETE_KEY_NO_PROPAGATE)
            send(new_fk, PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE)
        else:
            send(new_fk, PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE)


class ResponseJoin(Processor):
    """Response -> joined value for the left key, unless the left row changed since it subscribed.

    As Kafka's ResponseJoinProcessorSupplier: a response whose value hash no longer matches the left row is
    stale and counted as dropped; a right value of None gives a tombstone (inner join, or a deleted left row)
    or ``joiner(left, None)`` (left join). It forwards plain values: the result table's source (Kafka's
    KTableSource, materialized when named or needed) turns them into changes.
    """

    context: NodeContext

    def __init__(self, left_store: TableGetter, joiner: Callable[[Any, Any], Any], left_join: bool,
                 hasher: ValueHasher) -> None:  # fmt: skip
        self.left_store = left_store
        self.joiner = joiner
        self.left_join = left_join
        self.hasher = hasher

    def init(self, context: Any) -> None:
        super().init(context)
        self.left = connect(context, self.left_store)

    def process(self, record: Record) -> None:
        key = record.key
        response: SubscriptionResponse = record.value
        current = self.left.get(key)
        left_value = None if current is None else current.value
        if response.hash != self.hasher(left_value):
            # stale: the left row changed after this subscription was sent
            self.context.record_dropped("stale foreign-key join response (left row changed since)")
            return
        foreign = response.foreign_value
        if foreign is None and (not self.left_join or left_value is None):
            result = None
        else:
            result = self.joiner(left_value, foreign)
        self.context.forward(Record(key, result, record.timestamp, record.headers))


# ---- right side ----------------------------------------------------------------------------------


class SubscriptionReceive(Processor):
    """Subscription -> stored (or removed) under ``(fk, pk)``, answered with the right row as instructed.

    The answer's timestamp is the later of the subscription's and the right row's.
    """

    context: NodeContext

    def __init__(self, subscription_store: str, right_store: TableGetter) -> None:
        self.subscription_store = subscription_store
        self.right_store = right_store

    def init(self, context: Any) -> None:
        super().init(context)
        self.subscriptions = context.get_state_store(self.subscription_store)
        self.right = connect(context, self.right_store)

    def process(self, record: Record) -> None:
        fk = record.key
        sub: SubscriptionWrapper = record.value
        instruction = sub.instruction
        if fk is None and instruction != PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE:
            self.context.record_dropped("null foreign key in foreign-key join subscription")
            return
        timestamp = record.timestamp
        if fk is not None:
            store_key = (fk, sub.primary_key)
            if instruction in (DELETE_KEY_NO_PROPAGATE, DELETE_KEY_AND_PROPAGATE):
                self.subscriptions.delete(store_key)
            else:
                self.subscriptions.put(store_key, ValueAndTimestamp((sub.hash, sub.primary_partition), timestamp))
        if instruction == DELETE_KEY_NO_PROPAGATE:
            return
        found = None if fk is None else self.right.get(fk)
        if found is None and instruction == PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE:
            return
        foreign = None if found is None or instruction == DELETE_KEY_AND_PROPAGATE else found.value
        result_ts = timestamp if found is None else max(timestamp, found.timestamp)
        response = SubscriptionResponse(sub.hash, foreign, sub.primary_partition)
        self.context.forward(Record(sub.primary_key, response, result_ts, record.headers))


class ForeignTableJoin(Processor):
    """Right change -> a response with the new right value to every left row subscribed to that key."""

    context: NodeContext

    def __init__(self, subscription_store: str) -> None:
        self.subscription_store = subscription_store

    def init(self, context: Any) -> None:
        super().init(context)
        self.index = subscription_index(context.get_state_store(self.subscription_store))

    def process(self, record: Record) -> None:
        fk = record.key
        if fk is None:
            self.context.record_dropped("null key in foreign-key join (right table)")
            return
        if not is_latest(record.value):  # as SubscriptionSend
            self.context.record_dropped("out-of-order record from versioned table in foreign-key join")
            return
        new = record.value.new_value
        forward = self.context.forward
        for primary_key, stored in self.index.subscribers(fk):
            digest, partition = stored.value
            forward(
                Record(primary_key, SubscriptionResponse(digest, new, partition), record.timestamp, record.headers)
            )


def response_partitioner(key: Any, value: Any, num_partitions: int) -> int:
    """Responses go back to the left partition their subscription came from."""
    partition: int = value.primary_partition
    if partition >= num_partitions:
        raise ValueError(
            f"foreign-key join response for key {key!r} belongs to left partition {partition}, but the "
            f"response topic has only {num_partitions} partitions (it must match the left table's topic)"
        )
    return partition


def subscribers_of(store: Any, foreign_key: Any) -> Iterable[tuple[Any, Any]]:
    """The subscriptions to ``foreign_key`` in a subscription store stack (for tests and inspection)."""
    return subscription_index(store).subscribers(foreign_key)


__all__ = [
    "ForeignTableJoin",
    "ResponseJoin",
    "SubscriptionReceive",
    "SubscriptionResponse",
    "SubscriptionSend",
    "SubscriptionWrapper",
    "ValueHasher",
]
