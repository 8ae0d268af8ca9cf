"""A stream thread's group consumer on Kafka, where the assignment leader assigns the tasks.

It gives the thread what the classic group is good at: membership, a generation, failure detection
(session timeout, ``max.poll.interval.ms``) and commit fencing. It subscribes to the source topics (so the
group keeps their committed offsets) and to the control topic, whose only partition makes one member the
assignment leader; in ``on_assign`` it assigns itself nothing (``assign([])``), so it never fetches and a
group rebalance never touches the thread's fetching, which the separate fetch consumer does
(``kafka_fetch_consumer.py``). Commits of any task partition go through it (a classic group checks member
and generation, not partitions), and its ``consumer_group_metadata()`` fences exactly-once transactions.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from confluent_kafka import Consumer as CKConsumer
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka import TopicPartition as CKTopicPartition

from kstream_nb.cluster.kafka_config import CONSUMER_DEFAULTS, config_for, with_metadata
from kstream_nb.cluster.kafka_errors import BROKER_UNAVAILABLE_ERRORS, kafka_error
from kstream_nb.cluster.records import TopicPartition
from kstream_nb.errors import BrokerUnavailableError, StreamsError

if TYPE_CHECKING:
    from kstream_nb.cluster.kafka import KafkaCluster

log = logging.getLogger("kstream_nb.kafka")

#: commit answers that mean this member no longer owns what it commits: its tasks are lost (Kafka Streams'
#: TaskMigratedException); outside a rebalance an ILLEGAL_GENERATION means stale, not "rebalancing"
TASK_MIGRATED_ERRORS = frozenset(
    {KafkaError.ILLEGAL_GENERATION, KafkaError.UNKNOWN_MEMBER_ID, KafkaError.FENCED_INSTANCE_ID}
)

_CGMD_MAGIC = b"CGMDv2:"
#: how long a commit waits for the coordinator's answer before the thread counts the broker away
COMMIT_WAIT_S = 5.0


@dataclass(frozen=True)
class GroupMetadata:
    """What ``consumer_group_metadata()`` carries: generation (-1 before the first join) and member id."""

    generation: int
    member_id: str


def parse_group_metadata(data: bytes) -> GroupMetadata:
    """librdkafka's serialized group metadata: ``CGMDv2:``, the generation as the host's int32, then group id,
    member id (NUL-terminated). Other formats are refused (the generation cannot be read out of them)."""
    if not isinstance(data, bytes) or not data.startswith(_CGMD_MAGIC) or len(data) < len(_CGMD_MAGIC) + 4:
        raise StreamsError(f"unknown consumer group metadata format {data[:12]!r} (expected {_CGMD_MAGIC!r})")
    at = len(_CGMD_MAGIC)
    generation = int.from_bytes(data[at : at + 4], sys.byteorder, signed=True)
    fields = data[at + 4 :].split(b"\0")
    member = fields[1].decode() if len(fields) > 1 else ""
    return GroupMetadata(generation, member)


class KafkaGroupMember:
    """The group consumer of one stream thread: joins, rebalances, commits; fetches nothing."""

    def __init__(self, cluster: KafkaCluster, group_id: str, config: Mapping[str, Any]) -> None:
        self.cluster = cluster
        self.group_id = group_id
        conf = config_for("consumer", dict(CONSUMER_DEFAULTS), cluster.config, config)
        conf.pop("isolation.level", None)
        conf.update(
            {
                "group.id": group_id,
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "partition.assignment.strategy": "range",
                "topic.metadata.refresh.interval.ms": conf.get("topic.metadata.refresh.interval.ms", 10_000),
            }
        )
        conf.setdefault("error_cb", lambda err: log.debug("%s: %s", self, err.str()))
        conf["on_commit"] = self._on_commit
        self._answers: list[tuple[KafkaError | None, list[CKTopicPartition]]] = []
        self._consumer = CKConsumer(conf)
        self._control: TopicPartition | None = None
        #: between on_revoke and on_assign: nothing is committed (the outcome would be arbitrary)
        self.rebalancing = False
        #: this member led (got the control partition) in the generation of its last on_assign
        self.leader = False
        #: bumped at each on_assign: the thread publishes its status with the new generation
        self.assignments = 0
        #: set when the member learns it was thrown out (eviction, a stale commit); the caller resets it
        self.lost = False
        self._closed = False

    def __repr__(self) -> str:
        return f"KafkaGroupMember(group={self.group_id!r})"

    def join(self, topics: Iterable[str], control_topic: str) -> None:
        self._control = TopicPartition(control_topic, 0)
        self._consumer.subscribe(
            sorted({*topics, control_topic}), on_assign=self._on_assign, on_revoke=self._on_revoke,
            on_lost=self._on_lost,
        )  # fmt: skip

    def _on_assign(self, consumer: Any, partitions: list[CKTopicPartition]) -> None:
        self.leader = any(p.topic == self._control.topic and p.partition == 0 for p in partitions if self._control)
        consumer.assign([])  # fetches nothing: the fetch consumer reads the tasks' partitions
        self.rebalancing = False
        self.assignments += 1
        log.info("%s: generation %d, member %s%s", self, self.metadata().generation, self.metadata().member_id,
                 " (assignment leader)" if self.leader else "")  # fmt: skip

    def _on_revoke(self, consumer: Any, partitions: list[CKTopicPartition]) -> None:
        self.rebalancing = True
        self.leader = False

    def _on_lost(self, consumer: Any, partitions: list[CKTopicPartition]) -> None:
        self.lost = True
        self._on_revoke(consumer, partitions)

    def poll(self, timeout: float = 0.0) -> None:
        """Serves the group (callbacks, heartbeats' outcome, commit answers) for up to ``timeout`` s; an eviction
        for not polling marks the tasks lost."""
        for msg in self._consumer.consume(100, timeout):
            err = msg.error()
            if err is None:
                continue
            if err.code() == KafkaError._MAX_POLL_EXCEEDED:
                log.warning("%s was evicted (max.poll.interval.ms exceeded): its tasks are lost", self)
                self.lost = True
            elif err.fatal():
                raise StreamsError(f"{self} failed: {err.str()}")
            elif err.code() != KafkaError._PARTITION_EOF:
                log.debug("%s: %s", self, err.str())

    def metadata(self) -> GroupMetadata:
        return parse_group_metadata(self._consumer.consumer_group_metadata())

    def group_metadata(self) -> Any:
        """The bytes for ``send_offsets_to_transaction``."""
        return self._consumer.consumer_group_metadata()

    def commit(
        self,
        offsets: Mapping[TopicPartition, int],
        metadata: Mapping[TopicPartition, str] | None,
        timeout: float = COMMIT_WAIT_S,
    ) -> bool:
        """Commits and waits up to ``timeout`` for the answer, serving the group meanwhile (librdkafka's
        synchronous commit cannot be bounded: it would hold the thread while the coordinator is away). False
        (and ``lost`` set) when the group says the member no longer owns the offsets; ``BrokerUnavailableError``
        without an answer in time."""
        if not offsets:
            return True
        checked = [with_metadata(tp, off, metadata) for tp, off in offsets.items()]
        key = sorted((p.topic, p.partition, p.offset) for p in checked)
        try:
            self._consumer.commit(offsets=checked, asynchronous=True)
        except KafkaException as e:
            return self._check([kafka_error(e) or e], offsets)
        deadline = time.monotonic() + timeout
        while True:
            for err, partitions in self._answers:  # (an earlier commit's late answer is not this one's)
                if sorted((p.topic, p.partition, p.offset) for p in partitions) == key:
                    self._answers.clear()
                    return self._check([err, *(p.error for p in partitions)], offsets)
            left = deadline - time.monotonic()
            if left <= 0:
                raise BrokerUnavailableError(
                    f"{self}: no answer to the commit of {dict(offsets)} within {timeout}s"
                )
            self.poll(min(left, 0.05))

    def _on_commit(self, err: KafkaError | None, partitions: list[CKTopicPartition]) -> None:
        self._answers.append((err, partitions))

    def _check(self, errors: list[Any], offsets: Mapping[TopicPartition, int]) -> bool:
        for err in errors:
            if err is None:
                continue
            code = err.code() if isinstance(err, KafkaError) else None
            if code in TASK_MIGRATED_ERRORS:
                log.warning("%s: commit refused (%s): the tasks are lost", self, err)
                self.lost = True
                return False
            if code in BROKER_UNAVAILABLE_ERRORS or code == KafkaError.REBALANCE_IN_PROGRESS:
                # (a rebalance this member has not been told of yet: committed again once it is over)
                raise BrokerUnavailableError(f"cannot commit offsets {dict(offsets)} now: {err}")
            raise StreamsError(f"cannot commit offsets {dict(offsets)} of group {self.group_id!r}: {err}")
        return True

    def close(self, timeout: float = 30.0) -> None:
        """Leaves the group (a rebalance without this member follows at once); with the coordinator away the
        close goes on in the background after ``timeout`` (the group evicts the member after its session)."""
        if self._closed:
            return
        self._closed = True
        closing = threading.Thread(target=self._close, name=f"{self}-close", daemon=True)
        closing.start()
        closing.join(timeout)

    def _close(self) -> None:
        try:
            self._consumer.close()
        except Exception:
            log.exception("closing %s failed", self)
