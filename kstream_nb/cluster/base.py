"""The contract between the runtime and a cluster: admin, producer, consumer and group membership.

The embedded cluster (``memory://``) and the Kafka adapter (confluent-kafka) both implement it; the
runtime only talks to these interfaces.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from kstream_nb.cluster.records import ColumnarBatch, FetchedBatch, Headers, TopicPartition, as_tp
from kstream_nb.errors import IllegalStateError, StreamsError


@dataclass(frozen=True)
class TopicSpec:
    """What a topic should look like when created."""

    name: str
    partitions: int = 1
    config: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class TopicDescription:
    """A topic as the cluster describes it."""

    name: str
    partitions: int
    config: Mapping[str, str]
    beginning_offsets: tuple[int, ...]
    end_offsets: tuple[int, ...]


@dataclass(frozen=True)
class RecordMetadata:
    """Where a produced record landed."""

    topic: str
    partition: int
    offset: int
    timestamp: int


@dataclass(frozen=True)
class Subscription:
    """What a group member asks for when it joins: topics and opaque data for the assignor."""

    topics: frozenset[str]
    userdata: Any = None


@dataclass(frozen=True)
class Assignment:
    """What a group member gets: partitions and opaque data from the assignor."""

    partitions: frozenset[TopicPartition]
    userdata: Any = None


class GroupAssignor(Protocol):
    """Decides which member of a group gets which partitions (runs once per rebalance)."""

    def assign(
        self, partition_counts: Mapping[str, int], subscriptions: Mapping[str, Subscription]
    ) -> dict[str, Assignment]: ...


class RebalanceListener(Protocol):
    """Callbacks run inside ``poll()`` of the member's own thread, as in Kafka."""

    def on_partitions_revoked(self, partitions: set[TopicPartition]) -> None: ...

    def on_partitions_assigned(self, partitions: set[TopicPartition], userdata: Any) -> None: ...


class TopicExistsError(StreamsError):
    """A topic to create already exists."""

    def __init__(self, topic: str) -> None:
        super().__init__(f"topic {topic!r} already exists")
        self.topic = topic


class Admin(ABC):
    """Topic administration."""

    @abstractmethod
    def create_topics(self, specs: Iterable[TopicSpec], exist_ok: bool = False) -> None: ...

    @abstractmethod
    def list_topics(self) -> list[str]: ...

    @abstractmethod
    def describe_topic(self, name: str) -> TopicDescription:
        """Raises ``UnknownTopicError`` naming the topic when it does not exist."""

    @abstractmethod
    def delete_topics(self, names: Iterable[str]) -> None: ...

    @abstractmethod
    def partition_count(self, name: str) -> int | None:
        """Number of partitions, or None when the topic does not exist."""

    @abstractmethod
    def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]: ...

    def committed_end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """Where a read_committed consumer stops: before the first record of a transaction still open
        (Kafka's last stable offset); the end offset on a cluster without transactions."""
        return self.end_offsets(partitions)

    @abstractmethod
    def beginning_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]: ...

    def offsets_for_time(
        self, partitions: Iterable[TopicPartition], timestamp_ms: int
    ) -> dict[TopicPartition, int]:
        """Per partition, the earliest offset whose record timestamp is >= ``timestamp_ms`` (the end offset
        when there is none): every record before it is older."""
        raise NotImplementedError(f"{type(self).__name__} cannot look offsets up by time")

    def create_partitions(self, name: str, new_total: int) -> None:
        """Grows a topic to ``new_total`` partitions (Kafka never shrinks a topic)."""
        raise NotImplementedError(f"{type(self).__name__} cannot add partitions")

    def group_offsets(self, group_id: str) -> dict[TopicPartition, int]:
        """The committed offsets of a consumer group (empty when it has none)."""
        raise NotImplementedError(f"{type(self).__name__} cannot list a group's offsets")

    def group_members(self, group_id: str) -> dict[str, frozenset[TopicPartition]]:
        """The members of a consumer group now (member id -> partitions it owns); empty when it has none."""
        raise NotImplementedError(f"{type(self).__name__} cannot describe a group")


#: ``send(topic, key, value, timestamp, headers, partition)`` for one record (see ``Producer.sender``)
Sender = Callable[[str, "bytes | None", "bytes | None", "int | None", Headers, "int | None"], None]


class Producer(ABC):
    """Writes records; ``partition=None`` means Kafka's default partitioner on the key bytes."""

    @abstractmethod
    def send(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        timestamp: int | None = None,
        headers: Headers = (),
        partition: int | None = None,
    ) -> RecordMetadata | None:
        """Returns the metadata when known synchronously (embedded cluster), else None."""

    def send_batch(
        self, topic: str, records: list[tuple[bytes | None, bytes | None, int | None, Headers, int | None]]
    ) -> None:
        """Writes (key, value, timestamp, headers, partition) records in order; clusters may do it at once."""
        for key, value, timestamp, headers, partition in records:
            self.send(topic, key, value, timestamp, headers, partition)

    def sender(self) -> Sender | None:
        """``send`` as a function to call once per record when the producer copies and batches records itself
        (Kafka); None when records are best collected and written with ``send_batch`` (embedded cluster)."""
        return None

    def send_columnar(self, topic: str, batch: ColumnarBatch, partition: int) -> None:
        """Writes decoded records to one partition; clusters that store bytes serialize them."""
        for key, value, timestamp, headers, p in batch.serialized(topic, partition):
            self.send(topic, key, value, timestamp, headers, p)

    #: called while ``send`` waits for room in a full local queue (the broker is slow or away), with the
    #: seconds waited so far; it may raise to stop waiting
    on_queue_full: Callable[[float], None] | None = None

    @abstractmethod
    def flush(self, timeout: float = 30.0) -> None: ...

    def purge(self) -> None:
        """Drops the records not yet delivered (a cluster that delivers at once has none)."""

    @abstractmethod
    def close(self, timeout: float = 30.0) -> None:
        """Aborts an open transaction and waits up to ``timeout`` s for the records sent to be delivered."""

    # ---- transactions (exactly_once_v2) ----------------------------------------------------------
    # A cluster without transactions (the embedded one) keeps these no-ops: there the stream thread
    # holds a transaction's records back until commit and drops them on failure instead.

    #: True when the producer writes in Kafka transactions (it was created with a ``transactional.id``)
    transactional: bool = False

    def init_transactions(self, timeout: float = 30.0) -> None:
        """Registers the transactional id with the cluster, fencing older producers that used it."""

    def begin_transaction(self) -> None:
        """Starts a transaction (transactional producers also start one at the first send)."""

    def send_offsets_to_transaction(
        self,
        offsets: Mapping[TopicPartition, int],
        consumer: Consumer,
        metadata: Mapping[TopicPartition, str] | None = None,
        timeout: float | None = None,
    ) -> None:
        """Adds the consumer group's offsets (next record to read per partition) to the transaction, each
        with its ``metadata`` string when given (kept with the offset, as ``commit`` does). A call that
        times out (``timeout`` s, the cluster's default when None) can be retried."""

    def commit_transaction(self, timeout: float | None = None) -> None:
        """Makes the transaction's records and offsets visible together (nothing open: no-op); a call that
        times out can be retried."""

    def abort_transaction(self, timeout: float | None = None) -> None:
        """Discards the open transaction's records and offsets (nothing open: no-op)."""


class Consumer(ABC):
    """Reads records, either by group subscription or by manual assignment."""

    group_id: str | None
    _closed: bool
    _assigned: Collection[TopicPartition]
    _positions: dict[TopicPartition, int]

    def _check_open(self) -> None:
        if self._closed:
            raise IllegalStateError("the consumer is closed")

    def _require_group(self) -> str:
        if self.group_id is None:
            raise IllegalStateError("this consumer has no group id; offsets cannot be committed or read")
        return self.group_id

    def _check_assigned(self, tp: TopicPartition) -> None:
        if tp not in self._assigned:
            raise IllegalStateError(f"partition {tp} is not assigned to this consumer")

    def _seek_position(self, partition: TopicPartition, offset: int) -> TopicPartition:
        """``seek``'s checks, then the partition's new position; returns the partition."""
        tp = as_tp(partition)
        self._check_assigned(tp)
        if offset < 0:
            raise StreamsError(f"cannot seek partition {tp} to negative offset {offset}")
        self._positions[tp] = int(offset)
        return tp

    @abstractmethod
    def subscribe(
        self,
        topics: Iterable[str],
        listener: RebalanceListener | None = None,
        assignor: GroupAssignor | None = None,
        userdata: Callable[[], Any] | None = None,
    ) -> None:
        """Joins the group; ``userdata`` is called at each rebalance to build this member's subscription."""

    @abstractmethod
    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Manual assignment (no group), e.g. for restoring a store from its changelog."""

    @abstractmethod
    def assignment(self) -> set[TopicPartition]: ...

    @abstractmethod
    def poll(self, timeout: float, max_records: int = 10_000) -> list[FetchedBatch]: ...

    @abstractmethod
    def seek(self, partition: TopicPartition, offset: int) -> None: ...

    @abstractmethod
    def position(self, partition: TopicPartition) -> int: ...

    @abstractmethod
    def pause(self, partitions: Iterable[TopicPartition]) -> None: ...

    @abstractmethod
    def resume(self, partitions: Iterable[TopicPartition]) -> None: ...

    @abstractmethod
    def paused(self) -> set[TopicPartition]:
        """The partitions paused with ``pause`` (and not resumed since)."""

    def fetched_to_end(self, partition: TopicPartition) -> bool:
        """Whether fetching reached ``partition``'s end as last seen and nothing newer was fetched since (no
        request to the broker): a task waits while one of its empty partitions has not (KIP-695)."""
        return True

    @abstractmethod
    def commit(
        self, offsets: Mapping[TopicPartition, int], metadata: Mapping[TopicPartition, str] | None = None
    ) -> None:
        """Synchronously commits, for each partition, the offset of the next record to read, with its
        ``metadata`` string when given (Kafka's offset commit metadata)."""

    def commit_async(
        self, offsets: Mapping[TopicPartition, int], metadata: Mapping[TopicPartition, str] | None = None
    ) -> None:
        """Commits without waiting for the broker's answer; a failure shows in a later ``poll``. Called even
        with nothing new, so that offsets a broker away did not take are sent again. Synchronous here: a
        cluster whose commits cannot wait on a broker has nothing to defer."""
        self.commit(offsets, metadata)

    @abstractmethod
    def committed(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int | None]: ...

    def committed_metadata(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, str]:
        """The metadata committed with each partition's offset (partitions without any are left out; a
        broker that does not keep it gives none)."""
        return {}

    def take_broker_error(self) -> str | None:
        """The last "broker away" error seen since the previous call (the client reconnects by itself)."""
        return None

    @property
    def member_id(self) -> str | None:
        """The id the group gave this member (None when not in a group or not known)."""
        return None

    @abstractmethod
    def request_rebalance(self) -> None:
        """Asks the group to rebalance (e.g. after the subscription userdata changed)."""

    @abstractmethod
    def close(self, timeout: float | None = None) -> None:
        """Leaves the group (its partitions are reassigned to the remaining members), waiting at most
        ``timeout`` s (None: as long as it takes) for commits still in flight."""


class Cluster(ABC):
    """A place where topics live: hands out admin, producers and consumers."""

    bootstrap_servers: str
    #: producers created with a ``transactional.id`` write in transactions (Kafka); False: embedded cluster
    supports_transactions: bool = False
    #: the group leader runs the streams assignor (embedded cluster); False: each member derives its tasks
    #: from librdkafka's range assignment and members share what they hold on a topic (Kafka)
    runs_group_assignor: bool = True

    def reachable(self, timeout: float = 2.0) -> bool:
        """Whether the cluster answers now (an embedded cluster always does)."""
        return True

    @abstractmethod
    def admin(self) -> Admin: ...

    @abstractmethod
    def producer(self, config: Mapping[str, Any] | None = None) -> Producer: ...

    @abstractmethod
    def consumer(self, group_id: str | None, config: Mapping[str, Any] | None = None) -> Consumer:
        """``config`` keys follow Kafka's names where they apply (``auto.offset.reset``, ``client.id``)."""
