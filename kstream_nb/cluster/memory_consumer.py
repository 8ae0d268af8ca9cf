"""The embedded cluster's consumer: group member (``subscribe``) or manual reader (``assign``)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from kstream_nb.cluster.base import Consumer, GroupAssignor, RebalanceListener
from kstream_nb.cluster.memory_group import ConsumerGroup, GroupMember, GroupTimeouts
from kstream_nb.cluster.memory_log import PartitionLog
from kstream_nb.cluster.records import FetchedBatch, TopicPartition, as_tp
from kstream_nb.errors import IllegalStateError, StreamsError, UnknownTopicError

if TYPE_CHECKING:
    from kstream_nb.cluster.memory import MemoryCluster

_GROUP_WAIT_S = 0.05


class MemoryConsumer(Consumer):
    """Reads partition logs; joins its group on ``subscribe`` or reads manually ``assign``-ed partitions.

    Like Kafka's consumer it is meant for one thread; rebalance callbacks run inside its ``poll()``.
    """

    def __init__(self, cluster: MemoryCluster, group_id: str | None, config: Mapping[str, Any]) -> None:
        self.cluster = cluster
        self.group_id = group_id
        self.config = dict(config)
        self.client_id = str(self.config.get("client.id") or cluster.next_client_id())
        reset = str(self.config.get("auto.offset.reset", "earliest")).lower()
        if reset not in ("earliest", "latest", "none"):
            raise StreamsError(f"auto.offset.reset must be earliest, latest or none, got {reset!r}")
        self.auto_offset_reset = reset
        self.timeouts = GroupTimeouts(
            int(self.config.get("max.poll.interval.ms", 300_000)) / 1000,
            int(self.config.get("session.timeout.ms", 10_000)) / 1000,
        )
        self._assigned: list[TopicPartition] = []
        self._positions: dict[TopicPartition, int] = {}
        self._paused: set[TopicPartition] = set()
        self._member: GroupMember | None = None
        self._assignor: GroupAssignor | None = None
        self._listener: RebalanceListener | None = None
        self._manual = False
        self._closed = False
        self._next_start = 0

    @property
    def member_id(self) -> str | None:
        return self._member.member_id if self._member else None

    def subscribe(
        self,
        topics: Iterable[str],
        listener: RebalanceListener | None = None,
        assignor: GroupAssignor | None = None,
        userdata: Callable[[], Any] | None = None,
    ) -> None:
        self._check_open()
        group_id = self._require_group()
        if self._manual:
            raise IllegalStateError("cannot subscribe: partitions were assigned manually with assign()")
        topics = frozenset(topics)
        self._listener = listener
        with self.cluster.cond:
            group = self.cluster.group(group_id)
            if self._member is not None and self._member.active:
                self._member.topics = topics
                self._member.listener = listener
                self._member.userdata = userdata
                group.trigger()
            else:
                member_id = group.new_member_id(self.client_id)
                self._member = GroupMember(member_id, topics, listener, userdata)
                self._assignor = assignor
                group.add(self._member, assignor, self.timeouts)
            self.cluster.cond.notify_all()

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        self._check_open()
        if self._member is not None:
            raise IllegalStateError("cannot assign: the consumer is subscribed to a group")
        self._manual = True
        self._set_assignment(map(as_tp, partitions))

    def _set_assignment(self, partitions: Iterable[TopicPartition]) -> None:
        self._assigned = sorted(set(partitions))
        keep = set(self._assigned)
        self._positions = {tp: off for tp, off in self._positions.items() if tp in keep}
        self._paused &= keep

    def assignment(self) -> set[TopicPartition]:
        return set(self._assigned)

    def poll(self, timeout: float, max_records: int = 10_000) -> list[FetchedBatch]:
        self._check_open()
        deadline = time.monotonic() + max(0.0, timeout)
        cond = self.cluster.cond
        while True:
            if self._member is not None and not self._group_step(deadline):
                return []
            batches = self._fetch(max_records)
            if batches:
                return batches
            with cond:
                now = time.monotonic()
                if now >= deadline:
                    return []
                self.cluster.waiters += 1
                try:
                    if self._group_event() or self._has_data():
                        continue
                    wait = deadline - now
                    cond.wait(min(wait, _GROUP_WAIT_S) if self._member is not None else wait)
                finally:
                    self.cluster.waiters -= 1

    def _group_event(self) -> bool:
        member = self._member
        if member is None:
            return False
        group = self.cluster.group(self._require_group())
        return group.rebalancing or member.pending is not None or not member.active

    def fetched_to_end(self, partition: TopicPartition) -> bool:
        log = self.cluster.partition_log(as_tp(partition))
        return log is None or self._positions.get(as_tp(partition), -1) >= log.end_offset

    def _has_data(self) -> bool:
        for tp in self._assigned:
            log = None if tp in self._paused else self.cluster.partition_log(tp)
            if log is not None and self._positions.get(tp) != log.end_offset:
                return True
        return False

    def _group_step(self, deadline: float) -> bool:
        """Drives the member through a pending rebalance; True when it holds a stable assignment."""
        member = self._member
        assert member is not None
        cond = self.cluster.cond
        group = self.cluster.group(self._require_group())
        while True:
            with cond:
                now = time.monotonic()
                if group.expire(now):
                    cond.notify_all()
                lost: frozenset[TopicPartition] = frozenset()
                if not member.active:
                    lost, member.owned = member.owned, frozenset()
                    self._set_assignment(())
                    group.add(member, self._assignor, self.timeouts)
                    cond.notify_all()
                member.last_poll = now
                if lost:
                    action: tuple[Any, ...] = ("lost", lost)
                elif group.rebalancing and not member.joined:
                    action = ("join", member.owned)
                elif group.barrier_complete():
                    group.assigning = True
                    action = ("assign", dict(group.subscriptions), group.assignor, set(group.members))
                elif group.rebalancing:
                    if now >= deadline:
                        return False
                    cond.wait(min(deadline - now, _GROUP_WAIT_S))
                    continue
                elif member.pending is not None:
                    assignment, member.pending = member.pending, None
                    member.owned = assignment.partitions
                    self._set_assignment(assignment.partitions)
                    action = ("assigned", assignment)
                else:
                    return True
            self._run_group_action(group, member, action)

    def _run_group_action(self, group: ConsumerGroup, member: GroupMember, action: tuple[Any, ...]) -> None:
        kind = action[0]
        listener = self._listener
        cond = self.cluster.cond
        if kind == "lost":
            if listener is not None:
                listener.on_partitions_revoked(set(action[1]))
        elif kind == "join":
            if action[1] and listener is not None:
                listener.on_partitions_revoked(set(action[1]))
            userdata = member.userdata() if member.userdata is not None else None
            with cond:
                self._set_assignment(())
                member.owned = frozenset()
                if member.active and group.rebalancing and not member.joined:
                    group.join(member, userdata)
                    cond.notify_all()
        elif kind == "assign":
            _, subscriptions, assignor, expected = action
            topics = frozenset().union(*(s.topics for s in subscriptions.values()))
            try:
                result = assignor.assign(self.cluster.partition_counts(topics), subscriptions)
            except BaseException:
                with cond:
                    group.assigning = False
                    group.restart = False
                    cond.notify_all()
                raise
            with cond:
                group.finish(result, expected)
                cond.notify_all()
        elif kind == "assigned" and listener is not None:
            listener.on_partitions_assigned(set(action[1].partitions), action[1].userdata)

    def _fetch(self, max_records: int) -> list[FetchedBatch]:
        out: list[FetchedBatch] = []
        tps = [tp for tp in self._assigned if tp not in self._paused]
        if not tps:
            return out
        start = self._next_start % len(tps)
        self._next_start += 1
        for tp in tps[start:] + tps[:start]:
            if max_records <= 0:
                break
            log = self.cluster.partition_log(tp)
            if log is None:
                continue
            pos = self._valid_position(tp, log)
            batches, self._positions[tp] = log.fetch(pos, max_records)
            if batches:
                out.extend(batches)
                max_records -= sum(len(b) for b in batches)
        return out

    def _valid_position(self, tp: TopicPartition, log: PartitionLog) -> int:
        pos = self._positions.get(tp)
        if pos is None:
            committed = self._committed_offset(tp)
            pos = committed if committed is not None else self._reset(tp, log)
        if pos < log.start_offset or pos > log.end_offset:
            pos = self._reset(tp, log, pos)
        self._positions[tp] = pos
        return pos

    def _reset(self, tp: TopicPartition, log: PartitionLog, out_of_range: int | None = None) -> int:
        if self.auto_offset_reset == "none":
            why = "has no committed offset" if out_of_range is None else f"offset {out_of_range} is out of range"
            raise StreamsError(f"partition {tp} {why} and auto.offset.reset is 'none'")
        return log.start_offset if self.auto_offset_reset == "earliest" else log.end_offset

    def _committed_offset(self, tp: TopicPartition) -> int | None:
        if self.group_id is None:
            return None
        with self.cluster.cond:
            group = self.cluster._groups.get(self.group_id)
            return group.offsets.get(tp) if group else None

    def seek(self, partition: TopicPartition, offset: int) -> None:
        self._seek_position(partition, offset)

    def position(self, partition: TopicPartition) -> int:
        tp = as_tp(partition)
        self._check_assigned(tp)
        log = self.cluster.partition_log(tp)
        if log is None:
            raise UnknownTopicError(tp.topic, f"partition {tp} does not exist on {self.cluster.bootstrap_servers}")
        return self._valid_position(tp, log)

    def pause(self, partitions: Iterable[TopicPartition]) -> None:
        for tp in map(as_tp, partitions):
            self._check_assigned(tp)
            self._paused.add(tp)

    def resume(self, partitions: Iterable[TopicPartition]) -> None:
        for tp in map(as_tp, partitions):
            self._paused.discard(tp)

    def paused(self) -> set[TopicPartition]:
        return set(self._paused)

    def commit(
        self, offsets: Mapping[TopicPartition, int], metadata: Mapping[TopicPartition, str] | None = None
    ) -> None:
        self._check_open()
        group_id = self._require_group()
        checked = {}
        for tp, offset in offsets.items():
            if not isinstance(offset, int) or offset < 0:
                raise StreamsError(f"cannot commit offset {offset!r} for partition {as_tp(tp)}")
            checked[as_tp(tp)] = offset
        with self.cluster.cond:
            group = self.cluster.group(group_id)
            group.offsets.update(checked)
            for tp in checked:  # as Kafka: a commit replaces the metadata too (none given: empty)
                group.offset_metadata[tp] = (metadata or {}).get(tp, "")

    def committed(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int | None]:
        group_id = self._require_group()
        with self.cluster.cond:
            group = self.cluster._groups.get(group_id)
            return {tp: (group.offsets.get(tp) if group else None) for tp in map(as_tp, partitions)}

    def committed_metadata(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, str]:
        group_id = self._require_group()
        with self.cluster.cond:
            group = self.cluster._groups.get(group_id)
            saved = group.offset_metadata if group else {}
            return {tp: saved[tp] for tp in map(as_tp, partitions) if saved.get(tp)}

    def request_rebalance(self) -> None:
        self._check_open()
        if self._member is None:
            raise IllegalStateError("request_rebalance needs a group subscription")
        with self.cluster.cond:
            self.cluster.group(self._require_group()).trigger()
            self.cluster.cond.notify_all()

    def close(self, timeout: float | None = None) -> None:
        if self._closed:
            return
        member = self._member
        if member is not None:
            cond = self.cluster.cond
            with cond:
                owned = member.owned if member.active else frozenset()
            try:
                if owned and self._listener is not None:
                    self._listener.on_partitions_revoked(set(owned))
            finally:
                with cond:
                    member.owned = frozenset()
                    self.cluster.group(self._require_group()).remove(member.member_id)
                    cond.notify_all()
        self._closed = True
        self._set_assignment(())

    def __enter__(self) -> MemoryConsumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
