"""The member side of leader-assigned tasks on Kafka, one per stream thread.

Each loop iteration it serves the thread's group member (``cluster/kafka_group_member.py``), publishes the
thread's status to the control topic (``control_topic.py``) after each group assignment and each applied
assignment and every ``STATUS_S``, runs the leader's round while this member leads (``assignment_leader.py``),
and applies the newest assignment: the tasks no longer listed for it are **released** (committed first, an
acknowledged synchronous commit or a committed transaction, then closed and unassigned from the fetch
consumer; the next status, without them, lets the leader give them to their new owner), then the new tasks
are created and their partitions incrementally assigned (from the group's committed offsets).

Commits wait while the group rebalances (between the group member's ``on_revoke`` and ``on_assign`` the
broker's answer is arbitrary) and before the first join. When the member learns it was thrown out (an
eviction for not polling, a commit or transactional offsets refused with ``UNKNOWN_MEMBER_ID`` /
``ILLEGAL_GENERATION``), its tasks are **lost**: closed dirty, their open transaction aborted, nothing
committed (Kafka Streams' TaskMigrated path); the latest assignment is applied again for its new member id.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from kstream_nb.cluster.base import Assignment, Consumer
from kstream_nb.cluster.kafka_fetch_consumer import KafkaFetchConsumer
from kstream_nb.cluster.records import TopicPartition
from kstream_nb.errors import IllegalStateError
from kstream_nb.runtime.assignment_leader import AssignmentLeader
from kstream_nb.runtime.commit import TransactionState
from kstream_nb.runtime.control_topic import ControlTopic, MemberStatus
from kstream_nb.runtime.task_manager import wall_clock_ms
from kstream_nb.runtime.thread_state import ThreadState

if TYPE_CHECKING:
    from kstream_nb.runtime.stream_thread import StreamThread

log = logging.getLogger("kstream_nb.thread")

#: how often a member publishes its status when nothing changed (offset sums for the leader's lags)
STATUS_S = 1.0


class TaskHandover:
    """Drives one stream thread's tasks from the control topic's assignments."""

    def __init__(self, thread: StreamThread, control: ControlTopic, consumer: Consumer) -> None:
        if not isinstance(consumer, KafkaFetchConsumer):
            raise IllegalStateError(f"leader-assigned tasks need a KafkaFetchConsumer, not {consumer!r}")
        self.thread = thread
        self.control = control
        self.consumer = consumer
        self.member = consumer.member
        self.leader = AssignmentLeader(thread.cluster, thread.admin, thread.assignor, control)
        self.applied_epoch = 0
        self._applied_read = 0  # which assignment record of the control topic was applied last
        self._joins_seen = 0
        self._status_at = 0.0
        self._published_as: str | None = None

    def start(self) -> None:
        """Creates the internal topics the existing sources allow, then joins the group."""
        assignor = self.thread.assignor
        admin = self.thread.admin
        assignor.prepare({t: n for t in assignor.source_topics() if (n := admin.partition_count(t)) is not None})
        self.member.join(assignor.source_topics(), self.control.topic)

    def may_commit(self) -> bool:
        """Whether a commit may go out now: joined, not inside a group rebalance, not thrown out."""
        return self.member.assignments > 0 and not self.member.rebalancing and not self.member.lost

    def tick(self) -> None:
        """One loop iteration's share: group, status, leader round, assignment."""
        self.member.poll()
        if self.member.lost:
            self.tasks_lost("the group no longer counts this member in")
        if self.member.assignments != self._joins_seen and not self.member.rebalancing:
            self._joins_seen = self.member.assignments
            self.publish_status()
        self.control.refresh()
        thread = self.thread
        if self.member.leader and not self.member.rebalancing and thread.broker.unreachable_since is None:
            meta = self.member.metadata()
            try:
                self.leader.lead(meta.member_id, meta.generation)
            except Exception as e:  # (fenced by a newer leader, broker away): the next tick tries again
                log.warning("%s: the assignment round failed: %s", self.thread.name, e)
                self.leader.close()
        self._apply()
        if time.monotonic() - self._status_at >= STATUS_S and self.member.assignments > 0:
            self.publish_status()

    def _apply(self) -> None:
        assignment = self.control.assignment
        if assignment is None or self.control.assignments_read == self._applied_read or not self.may_commit():
            return
        meta = self.member.metadata()
        if assignment.generation < meta.generation:
            return  # computed before this member's generation formed: the leader's next one counts
        me = meta.member_id
        target = assignment.active_of(me)
        manager = self.thread.task_manager
        release = set(manager.tasks) - set(target)
        if release:
            self.thread._commit(force=True)
            done = self.thread.transaction is TransactionState.IDLE and not any(
                manager.tasks[t].offsets_to_commit() for t in release
            )
            if not done or self.member.lost:
                return  # tried again at the next iteration (or the tasks are lost)
            manager.release(release)
        take = {tid: tps for tid, tps in target.items() if tid not in manager.tasks}
        changing = bool(release or take) or self.thread.state is not ThreadState.RUNNING
        if changing:
            self.thread._set_state(ThreadState.PARTITIONS_ASSIGNED)
        warm = manager.update_standbys(assignment.standby_of(me), set(target))
        manager.assign(take, warm)
        self.consumer.assign({tp for task in manager.tasks.values() for tp in task.queues})
        self.applied_epoch, self._applied_read = assignment.epoch, self.control.assignments_read
        self.thread.group_view = {tid: tuple(entry) for tid, entry in assignment.group.items()}
        self.thread.missing_topics = list(assignment.missing_topics)
        view = ("all", "endpoints", "warmups", "lags", "moved")
        self.thread.assignor.on_assignment(
            Assignment(frozenset(), {k: getattr(assignment, "group" if k == "all" else k) for k in view})
        )
        if release or take:
            log.info("%s applied assignment epoch %d: released %s, took %s; active %s, standby %s",
                     self.thread.name, assignment.epoch, sorted(release), sorted(take), sorted(manager.tasks),
                     sorted(manager.standbys))  # fmt: skip
        self.publish_status()
        if changing:
            self.thread._set_state(ThreadState.RUNNING)

    def publish_status(self) -> None:
        meta = self.member.metadata()
        if meta.generation < 0 or not meta.member_id:
            return
        if self._published_as not in (None, meta.member_id):
            self.control.leave(self._published_as)  # the member id changed (rejoined after an eviction)
        self._published_as = meta.member_id
        manager = self.thread.task_manager
        self.control.publish_status(
            MemberStatus(
                member_id=meta.member_id,
                generation=meta.generation,
                process_id=self.thread.process_id,
                thread=self.thread.name,
                applied_epoch=self.applied_epoch,
                active=tuple(sorted(manager.tasks)),
                standby=tuple(sorted(manager.standbys)),
                offset_sums=manager.task_offset_sums(),
                endpoint=self.control.endpoint,
                rack=self.thread.config.client_config.get("client.rack"),
                heartbeat_ms=wall_clock_ms(),
            )
        )
        self._status_at = time.monotonic()

    def fencing_offsets(self) -> dict[TopicPartition, int]:
        """One held partition's committed offset, sent again with a transaction that consumed nothing (records of
        punctuations only): librdkafka sends no TxnOffsetCommit without offsets, and only that request checks the
        member's generation, so a zombie's transaction would otherwise commit."""
        for task in self.thread.tasks.values():
            for tp, offset in task.consumed.items():  # (nothing to commit: consumed = committed)
                return {tp: offset}
        return {}

    def tasks_lost(self, reason: str) -> None:
        """Closes every task dirty (nothing committed; an open transaction aborted) and stops fetching."""
        thread = self.thread
        log.warning("%s: tasks %s lost (%s); they run elsewhere now", thread.name, sorted(thread.tasks), reason)
        # closing first: what closing the stores writes (their held changes) belongs to the aborted transaction
        thread.task_manager.close_tasks(clean=False)
        if thread.commit.transactional:
            thread.collector.abort()
            try:
                thread.producer.abort_transaction()
            except Exception as e:
                # (say a commit_transaction that timed out is still in progress): a new producer with the same
                # transactional id takes over; its init_transactions ends whatever the old one left open
                log.warning("%s: aborting the lost tasks' transaction failed (%s); a new producer takes over",
                            thread.name, e)  # fmt: skip
                try:
                    thread.producer.close(0)
                except Exception:
                    log.debug("closing the producer of %s failed", thread.name, exc_info=True)
                thread.replace_producer()
            thread.transaction = TransactionState.IDLE
        self.consumer.assign([])
        self.member.lost = False
        self.applied_epoch = self._applied_read = (
            0  # the assignment in force is applied again (member id now held)
        )
        self.publish_status()

    def close(self) -> None:
        """Leaves the control topic (a tombstone) after the thread committed and closed its tasks."""
        if self._published_as is not None:
            try:
                self.control.leave(self._published_as)
            except Exception as e:
                log.warning("%s could not leave the control topic: %s", self.thread.name, e)
        self.leader.close()
