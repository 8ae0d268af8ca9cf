"""Consumer groups of the embedded cluster: committed offsets, membership and eager rebalancing.

A rebalance is a barrier: every member revokes all its partitions (in its own ``poll()``), then the
assignor runs once and each member receives its new partitions, so no partition has two owners.
All state is guarded by the cluster's condition; callbacks and the assignor run without it.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kstream_nb.cluster.base import Assignment, GroupAssignor, RebalanceListener, Subscription
from kstream_nb.cluster.records import TopicPartition


class RangeAssignor:
    """Kafka's range assignor: per topic, members sorted by id get consecutive partition ranges."""

    def assign(
        self, partition_counts: Mapping[str, int], subscriptions: Mapping[str, Subscription]
    ) -> dict[str, Assignment]:
        owned: dict[str, set[TopicPartition]] = {m: set() for m in subscriptions}
        for topic in sorted(partition_counts):
            members = sorted(m for m, s in subscriptions.items() if topic in s.topics)
            if not members:
                continue
            count = partition_counts[topic]
            per, extra = divmod(count, len(members))
            start = 0
            for i, member in enumerate(members):
                n = per + (1 if i < extra else 0)
                owned[member].update(TopicPartition(topic, p) for p in range(start, start + n))
                start += n
        return {m: Assignment(frozenset(tps)) for m, tps in owned.items()}


@dataclass(eq=False)
class GroupMember:
    """One subscribed consumer as the group sees it."""

    member_id: str
    topics: frozenset[str]
    listener: RebalanceListener | None
    userdata: Callable[[], Any] | None
    last_poll: float = field(default_factory=time.monotonic)
    owned: frozenset[TopicPartition] = frozenset()
    pending: Assignment | None = None
    joined: bool = False
    active: bool = True
    #: the member's own assignor, as Kafka's ConsumerPartitionAssignor on each member: its optional
    #: ``subscription_userdata()`` joins the subscription, its optional ``on_assignment(a)`` sees the result
    assignor: GroupAssignor | None = None


@dataclass(frozen=True)
class GroupTimeouts:
    """How long a member may go without polling before the group removes it."""

    max_poll_interval_s: float = 300.0
    session_timeout_s: float = 10.0


class ConsumerGroup:
    """Committed offsets and membership of one group id."""

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.offsets: dict[TopicPartition, int] = {}
        self.offset_metadata: dict[TopicPartition, str] = {}
        self.members: dict[str, GroupMember] = {}
        self.timeouts: dict[str, GroupTimeouts] = {}
        self.assignor: GroupAssignor | None = None
        self.generation = 0
        self.rebalancing = False
        self.rebalance_started = 0.0
        self.assigning = False
        self.restart = False
        self.subscriptions: dict[str, Subscription] = {}
        self._ids = itertools.count(1)

    def new_member_id(self, client_id: str) -> str:
        return f"{client_id}-{next(self._ids):06d}"

    @property
    def topics(self) -> frozenset[str]:
        """Union of the members' subscribed topics."""
        return frozenset().union(*(m.topics for m in self.members.values()))

    def add(self, member: GroupMember, assignor: GroupAssignor | None, timeouts: GroupTimeouts) -> None:
        if not self.members:
            self.assignor = assignor or RangeAssignor()
        self.members[member.member_id] = member
        self.timeouts[member.member_id] = timeouts
        member.assignor = assignor
        member.active = True
        member.last_poll = time.monotonic()
        self.trigger()

    def remove(self, member_id: str) -> None:
        member = self.members.pop(member_id, None)
        self.timeouts.pop(member_id, None)
        self.subscriptions.pop(member_id, None)
        if member is None:
            return
        member.active = False
        member.joined = False
        member.pending = None
        if self.members:
            self.trigger()
        else:
            self.rebalancing = self.assigning = self.restart = False
            self.subscriptions.clear()
            self.assignor = None

    def trigger(self) -> None:
        """Starts a rebalance (or restarts the one whose assignment is being computed)."""
        if self.assigning:
            self.restart = True
        if self.rebalancing:
            return
        self.rebalancing = True
        self.rebalance_started = time.monotonic()
        self.subscriptions.clear()
        for member in self.members.values():
            member.joined = False
            member.pending = None

    def expire(self, now: float) -> list[str]:
        """Removes members that stopped polling; returns their ids."""
        gone = []
        for member_id, member in self.members.items():
            limits = self.timeouts[member_id]
            idle = now - member.last_poll
            waited = now - self.rebalance_started
            if idle > limits.max_poll_interval_s or (
                self.rebalancing
                and not member.joined
                and idle > limits.session_timeout_s
                and waited > limits.session_timeout_s
            ):
                gone.append(member_id)
        for member_id in gone:
            self.remove(member_id)
        return gone

    def join(self, member: GroupMember, userdata: Any) -> None:
        """Records that ``member`` revoked everything and joined the current rebalance."""
        member.owned = frozenset()
        member.joined = True
        extra = getattr(member.assignor, "subscription_userdata", None)
        if extra is not None and isinstance(userdata, dict):
            userdata = {**userdata, **extra()}
        self.subscriptions[member.member_id] = Subscription(member.topics, userdata)

    def barrier_complete(self) -> bool:
        return (
            self.rebalancing
            and not self.assigning
            and bool(self.members)
            and all(m.joined for m in self.members.values())
        )

    def finish(self, result: Mapping[str, Assignment], expected: set[str]) -> bool:
        """Installs the assignor's result unless the rebalance must restart; returns True if installed."""
        self.assigning = False
        if self.restart or set(self.members) != expected:
            self.restart = False
            for member_id in list(self.subscriptions):
                if member_id not in self.members:
                    del self.subscriptions[member_id]
            return False
        seen: set[TopicPartition] = set()
        for member_id, member in self.members.items():
            assignment = result.get(member_id) or Assignment(frozenset())
            partitions = frozenset(assignment.partitions) - seen
            seen |= partitions
            member.pending = Assignment(partitions, assignment.userdata)
            member.joined = False
            on_assignment = getattr(member.assignor, "on_assignment", None)
            if on_assignment is not None:
                on_assignment(member.pending)
        self.generation += 1
        self.rebalancing = False
        self.subscriptions.clear()
        return True

    def assignments(self) -> dict[str, frozenset[TopicPartition]]:
        """Current owners (members that received their partitions)."""
        return {member_id: m.owned for member_id, m in self.members.items()}
