"""The assignment leader's round on Kafka: the member that got partition 0 of the control topic computes who
runs which task and publishes it (``control_topic.py``).

A round: the group members of the current generation (``describe_consumer_groups``) must each have published
a status of that generation (waited for at most ``STATUS_WAIT_S``; who has not by then is left out); their
statuses become the subscriptions of kstream_nb's own ``StreamsPartitionAssignor.assign`` (Kafka Streams'
HighAvailabilityTaskAssignor: balanced over threads, sticky, lag-aware with warm-ups, standbys, racks).
Its target then goes through the **handover invariant**: a task is listed as active for at most one member,
and for a new owner only once no other live member holds it (its status lists it, or the last assignment gave
it to a member that has not applied that assignment yet). A task moving from X to Y is listed for nobody and
noted *in transit* to Y; X commits and releases it (its next status lacks it), and the next round gives it
to Y. Members that left the group hold nothing: their tasks go at once. The target is computed once per
membership (generation and the members with statuses), when a source topic missing at the last round
appears, and, once nothing is in transit, at the probing rebalance a target with warm-ups asks for
(``probing_rebalance_interval_ms`` after it: KIP-441; the warm-ups that caught up become actives). The
rounds in between, run when a status changes what a member holds or applied, only complete the handovers,
so that a round amid them moves nothing else. The leader publishes only a plan that differs from the one
in force.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

from kstream_nb.cluster.base import Admin, Cluster, Subscription
from kstream_nb.runtime.assignor import StreamsPartitionAssignor
from kstream_nb.runtime.control_topic import ControlTopic, LeaderWriter, MemberStatus, TaskAssignment

log = logging.getLogger("kstream_nb.assignment")

#: how long a new generation's leader waits for every member's status of that generation
STATUS_WAIT_S = 10.0
#: how often the leader looks for source topics missing at the last round (their tasks are assigned at once)
MISSING_TOPICS_S = 0.5


class AssignmentLeader:
    """Runs the rounds while one of this instance's threads leads the group."""

    def __init__(
        self, cluster: Cluster, admin: Admin, assignor: StreamsPartitionAssignor, control: ControlTopic
    ) -> None:
        self.cluster = cluster
        self.admin = admin
        self.assignor = assignor
        self.control = control
        self._writer: LeaderWriter | None = None
        self._generation = -1
        self._members: set[str] = set()
        self._since = 0.0
        self._fingerprint: Any = None
        #: the assignor's target (member -> its assignment's userdata) and the membership it was computed for:
        #: kept while handovers complete, so that a round in the middle of them moves nothing else
        self._target: dict[str, Any] = {}
        self._target_for: Any = None
        #: when the probing rebalance the target asked for is due (monotonic seconds), if it asked for one
        self._probe_at: float | None = None
        self._end: int | None = None
        self._published: TaskAssignment | None = None
        self._missing_checked_at = 0.0
        #: the missing topics of the last round seen to exist at the previous look
        self._appeared: set[str] = set()

    def lead(self, member_id: str, generation: int) -> None:
        """One step of the leader's duties (called from the leading thread's loop; never blocks long)."""
        now = time.monotonic()
        if generation != self._generation:
            if self._writer is None:  # fences a previous leader, whose open transaction is aborted
                self._writer = LeaderWriter(self.cluster, self.assignor.application_id, self.control.client_config)
            self._generation, self._since, self._fingerprint = generation, now, None
            self._members = set(self.admin.group_members(self.assignor.application_id))
            self._end = self.control.end_offset()
            log.info("leading generation %d of %d member(s)", generation, len(self._members))
        if self._end is not None:  # the log read to its end first: the next epoch follows the last one
            if not self.control.read_up_to(self._end):
                return
            self._end = None
        previous = self.control.assignment
        if self._published is not None and (previous is None or previous.epoch < self._published.epoch):
            return  # (this leader's last record is not read back yet)
        statuses = {m: s for m, s in self.control.statuses.items() if m in self._members}
        current = {m for m, s in statuses.items() if s.generation >= generation}
        if current != self._members and now - self._since < STATUS_WAIT_S:
            return
        live = {m: statuses[m] for m in current}
        fingerprint = sorted((m, s.generation, s.applied_epoch, s.active, s.standby) for m, s in live.items())
        settled = previous is None or not previous.in_transit
        probe = settled and self._probe_at is not None and now >= self._probe_at
        if self._missing_topic_appeared(now) or probe:
            self._target_for = None
        elif fingerprint == self._fingerprint:
            return
        self._fingerprint = fingerprint
        if not live:
            return
        if self._target_for != (generation, frozenset(live)):
            self._target = self.target(live, previous)
            self._target_for = (generation, frozenset(live))
            probing = [d["probing_rebalance_ms"] for d in self._target.values() if "probing_rebalance_ms" in d]
            self._probe_at = now + probing[0] / 1000 if probing else None
            if probing:
                log.info("warm-up replicas are catching up: a probing round in %d ms", probing[0])
        target = self.handover(member_id, generation, live, previous)
        if target.same_plan(previous) and previous is not None and previous.generation == generation:
            return
        if self._writer is None:
            self._writer = LeaderWriter(self.cluster, self.assignor.application_id, self.control.client_config)
        self._writer.publish(target)
        self._published = target
        log.info("assignment epoch %d (generation %d): %s; in transit %s", target.epoch, generation,
                 {m: sorted(a["active"]) for m, a in target.members.items()}, dict(target.in_transit))  # fmt: skip

    def _missing_topic_appeared(self, now: float) -> bool:
        """Whether a source topic the last round lacked exists now and did not at the previous look (checked
        every ``MISSING_TOPICS_S``)."""
        missing = self._published.missing_topics if self._published is not None else ()
        if not missing or now - self._missing_checked_at < MISSING_TOPICS_S:
            return False
        self._missing_checked_at = now
        appeared = {t for t in missing if self.admin.partition_count(t) is not None}
        new, self._appeared = appeared - self._appeared, appeared
        return bool(new)

    def target(self, live: Mapping[str, MemberStatus], previous: TaskAssignment | None) -> dict[str, Any]:
        """Member -> what the assignor gives it (``StreamsPartitionAssignor.assign`` over the statuses)."""
        topics = self.assignor.source_topics()
        in_transit = dict(previous.in_transit) if previous is not None else {}
        subscriptions = {
            m: Subscription(
                frozenset(topics),
                {
                    "process_id": s.process_id,
                    "thread": s.thread,
                    # a task in transit counts as the target's already: the next round keeps it there
                    "prev_tasks": sorted({*s.active, *(t for t, to in in_transit.items() if to == m)}),
                    "prev_standbys": list(s.standby),
                    "task_offset_sums": dict(s.offset_sums),
                    "rack": s.rack,
                    "endpoint": s.endpoint,
                },
            )
            for m, s in live.items()
        }
        counts = {t: n for t in topics if (n := self.admin.partition_count(t)) is not None}
        result = self.assignor.assign(counts, subscriptions)
        return {m: assignment.userdata or {} for m, assignment in result.items()}

    def handover(
        self, leader: str, generation: int, live: Mapping[str, MemberStatus], previous: TaskAssignment | None
    ) -> TaskAssignment:
        """The next assignment: the target, with each moved task listed for nobody until its holder released it."""
        holders: dict[str, set[str]] = {}
        for m, s in live.items():
            given = previous.active_of(m) if previous is not None and s.applied_epoch < previous.epoch else {}
            for task_id in {*s.active, *given}:
                holders.setdefault(task_id, set()).add(m)
        members: dict[str, dict[str, Any]] = {}
        moving: dict[str, str] = {}
        view: dict[str, Any] = {}
        for m, data in sorted(self._target.items()):
            view = data
            active = {}
            standby = set(data.get("standby", ()))
            for task_id, tps in sorted(data.get("active", {}).items()):
                if holders.get(task_id, set()) - {m}:
                    moving[task_id] = m  # its holder releases it first
                    if m in live and task_id in live[m].standby:
                        standby.add(task_id)  # the warm copy stays until the task comes
                else:
                    active[task_id] = [[tp.topic, tp.partition] for tp in tps]
            members[m] = {"active": active, "standby": sorted(standby), "warmup": list(data.get("warmup", ()))}
        return TaskAssignment(
            epoch=(previous.epoch + 1) if previous is not None else 1,
            generation=generation,
            leader=leader,
            members=members,
            in_transit=moving,
            group={tid: list(entry) for tid, entry in view.get("all", {}).items()},
            endpoints=dict(view.get("endpoints", {})),
            warmups=dict(view.get("warmups", {})),
            lags=dict(view.get("lags", {})),
            moved=dict(view.get("moved", {})),
            missing_topics=tuple(view.get("missing_topics", ())),
        )

    def close(self) -> None:
        """Drops the transactional producer (fenced, or no longer leading); the next round starts afresh."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        self._generation, self._published = -1, None
