"""A stream thread's fetch consumer on Kafka, where the assignment leader assigns the tasks.

It has the group's id (so a partition it takes starts at the group's committed offset, under exactly-once
the *stable* one: a transaction the previous owner left open is settled first) but never subscribes and
never commits: membership, commits and the transactional metadata belong to the thread's group member
(``kafka_group_member.py``), to which it delegates them. Its partitions are those of the thread's active
tasks, changed with ``incremental_assign``/``incremental_unassign``, so a task that moves never stops the
fetching of the others, and a group rebalance does not touch it at all.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from confluent_kafka import OFFSET_INVALID, KafkaError
from confluent_kafka import TopicPartition as CKTopicPartition

from kstream_nb.cluster.base import Cluster, GroupAssignor, RebalanceListener
from kstream_nb.cluster.kafka_config import CONSUMER_DEFAULTS, config_for
from kstream_nb.cluster.kafka_consumer import KafkaConsumer
from kstream_nb.cluster.kafka_group_member import KafkaGroupMember
from kstream_nb.cluster.records import TopicPartition, as_tp
from kstream_nb.errors import IllegalStateError, TransactionError

if TYPE_CHECKING:
    from collections.abc import Callable

    from kstream_nb.cluster.kafka import KafkaCluster


class KafkaFetchConsumer(KafkaConsumer):
    """Reads the partitions of the thread's tasks; commits and group metadata go through ``member``."""

    def __init__(
        self, cluster: KafkaCluster, group_id: str, config: Mapping[str, Any], member: KafkaGroupMember
    ) -> None:
        super().__init__(cluster, group_id, config)
        self.member = member
        self._manual = True

    def __repr__(self) -> str:
        return f"KafkaFetchConsumer({self.cluster.bootstrap_servers!r}, group={self.group_id!r})"

    def subscribe(
        self,
        topics: Iterable[str],
        listener: RebalanceListener | None = None,
        assignor: GroupAssignor | None = None,
        userdata: Callable[[], Any] | None = None,
    ) -> None:
        raise IllegalStateError("a fetch consumer never subscribes: its group member does (KafkaGroupMember)")

    @staticmethod
    def _ck(tps: Iterable[TopicPartition], offsets: Mapping[TopicPartition, int] | None = None) -> list[Any]:
        return [CKTopicPartition(tp.topic, tp.partition, (offsets or {}).get(tp, OFFSET_INVALID)) for tp in tps]

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Starts fetching the new partitions (from the group's committed offsets, or the positions sought)
        and stops the ones no longer wanted; the others go on untouched."""
        self._check_open()
        wanted = {as_tp(tp) for tp in partitions}
        removed, added = sorted(self._assigned - wanted), sorted(wanted - self._assigned)
        if removed:
            self._consumer.incremental_unassign(self._ck(removed))
            for tp in removed:
                self._positions.pop(tp, None)
                self._ends.pop(tp, None)
                self._paused.discard(tp)
        self._assigned = wanted
        if added:
            self._consumer.incremental_assign(self._ck(added, self._positions))
            self._consumer.resume(self._ck(added))  # (librdkafka keeps a pause across assignments)

    def seek(self, partition: TopicPartition, offset: int) -> None:
        """Fetches ``partition`` again from ``offset`` (unassigned, then assigned there)."""
        tp = self._seek_position(partition, offset)
        if tp in self._assigned:
            self._consumer.incremental_unassign(self._ck([tp]))
            self._consumer.incremental_assign(self._ck([tp], {tp: int(offset)}))
            if tp in self._paused:
                self._consumer.pause(self._ck([tp]))

    def commit(
        self, offsets: Mapping[TopicPartition, int], metadata: Mapping[TopicPartition, str] | None = None
    ) -> None:
        self.member.commit({as_tp(tp): off for tp, off in offsets.items()}, metadata)

    def commit_async(
        self, offsets: Mapping[TopicPartition, int], metadata: Mapping[TopicPartition, str] | None = None
    ) -> None:
        """Synchronous here: a task is released only once its offsets are acknowledged."""
        self.commit(offsets, metadata)

    def group_metadata(self) -> Any:
        """The group member's metadata; refused before its first join or after an eviction (generation -1 or
        no member id would commit unfenced)."""
        meta = self.member.metadata()
        if meta.generation < 0 or not meta.member_id:
            raise TransactionError(
                f"{self}: no group membership to fence the transaction with (generation {meta.generation}, "
                f"member {meta.member_id!r})",
                abortable=True,
                code=KafkaError.UNKNOWN_MEMBER_ID,
            )
        return self.member.group_metadata()

    @property
    def member_id(self) -> str | None:
        return self.member.metadata().member_id or None

    def request_rebalance(self) -> None:
        """Nothing to do: the assignment leader recomputes without a group rebalance."""

    def close(self, timeout: float | None = None) -> None:
        """Closes both consumers; with the broker away each close goes on in the background after ``timeout``."""
        if self._closed:
            return
        wait = 30.0 if timeout is None else timeout
        self._closed = True
        self._assigned, self._positions = set(), {}
        try:
            closing = threading.Thread(target=self._consumer.close, name=f"{self}-close", daemon=True)
            closing.start()
            closing.join(wait)
        finally:
            self.member.close(wait)


def fetch_consumer(cluster: Cluster, group_id: str, config: Mapping[str, Any]) -> KafkaFetchConsumer:
    """A stream thread's fetch consumer on Kafka, with its group member (client id ``<client.id>-group``)."""
    from kstream_nb.cluster.kafka import KafkaCluster

    if not isinstance(cluster, KafkaCluster):
        raise IllegalStateError(f"leader-assigned tasks need a Kafka cluster, not {cluster!r}")
    member = KafkaGroupMember(cluster, group_id, {**config, "client.id": f"{config.get('client.id')}-group"})
    merged = config_for("consumer", dict(CONSUMER_DEFAULTS), cluster.config, config)
    return KafkaFetchConsumer(cluster, group_id, merged, member)
