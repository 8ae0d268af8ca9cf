"""``TaskManager``: a stream thread's active, suspended and standby tasks, as Kafka Streams' ``TaskManager``.

Creates tasks (their stores restored from the changelogs, or from a warm standby's position), routes fetched
records to them, suspends them when the group revokes their partitions (a task assigned back keeps its
stores), closes them, and keeps the standby tasks' stores current.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from kstream_nb.cluster.base import Admin, Consumer
from kstream_nb.cluster.records import FetchedBatch, TopicPartition
from kstream_nb.errors import BrokerUnavailableError
from kstream_nb.runtime.assignment.offset_sums import task_offset_sums
from kstream_nb.runtime.config import EXACTLY_ONCE_V2, StreamsConfig
from kstream_nb.runtime.record_collector import RecordCollector
from kstream_nb.runtime.restore import restore_task
from kstream_nb.runtime.standby import StandbyTask
from kstream_nb.runtime.task import StreamTask
from kstream_nb.runtime.task_id import TaskId
from kstream_nb.state.caching import ThreadCache
from kstream_nb.topology.topology import Topology

log = logging.getLogger("kstream_nb.thread")

_T = TypeVar("_T")


def wall_clock_ms() -> int:
    return int(time.time() * 1000)


class TaskManager:
    """The tasks of one stream thread: ``tasks`` (active, by id), the suspended ones and ``standbys``."""

    def __init__(
        self,
        topology: Topology,
        config: StreamsConfig,
        collector: RecordCollector,
        admin: Admin,
        consumer: Consumer,
        restore_consumer: Consumer,
        standby_consumer: Consumer,
        global_stores: Mapping[str, Any],
        failed: Callable[[], bool],
        cache: ThreadCache,
        stopping: Callable[[], bool] = lambda: False,
    ) -> None:
        self.topology = topology
        self.config = config
        self.collector = collector
        self.admin = admin
        self.consumer = consumer
        self.restore_consumer = restore_consumer
        self.standby_consumer = standby_consumer
        self.global_stores = global_stores
        #: the thread's record cache, shared by the cached stores of its tasks
        self.cache = cache
        #: whether the thread has failed (a failed thread's tasks write no checkpoint)
        self._failed = failed
        self._stopping = stopping
        self._exactly_once = config.processing_guarantee == EXACTLY_ONCE_V2
        self.tasks: dict[str, StreamTask] = {}
        self.standbys: dict[str, StandbyTask] = {}
        self._suspended: dict[str, StreamTask] = {}
        self._by_partition: dict[TopicPartition, StreamTask] = {}
        self.restored_records = 0
        self.restore_progress: dict[str, tuple[int, int]] = {}
        #: records processed by tasks closed since (so that the thread's total never goes down)
        self.closed_processed = 0
        #: the most records one partition's queue held after processing, since the thread started
        self.peak_buffered = 0

    @property
    def processed_total(self) -> int:
        return sum(t.processed_total for t in list(self.tasks.values())) + self.closed_processed

    def add_records(self, batches: Iterable[FetchedBatch]) -> None:
        """Queues each fetched batch in the task that reads its partition."""
        for batch in batches:
            self._by_partition[TopicPartition(batch.topic, batch.partition)].add(batch)

    def apply_backpressure(self) -> None:
        """Pauses at the consumer each partition whose queue still holds more than
        ``buffered_records_per_partition`` records once the tasks have processed, and resumes it when it holds
        that many or fewer (Kafka Streams' ``buffered.records.per.partition``): a task slower than the fetches
        never buffers without bound."""
        limit = self.config.buffered_records_per_partition
        over = set()
        for tp, task in self._by_partition.items():
            queued = task.partition_group.queued(tp)
            if queued > self.peak_buffered:
                self.peak_buffered = queued
            if queued > limit:
                over.add(tp)
        paused = self.consumer.paused() & self._by_partition.keys()
        if over - paused:
            self.consumer.pause(over - paused)
        if paused - over:
            self.consumer.resume(paused - over)

    # ---- rebalance -----------------------------------------------------------------------------

    def suspend_all(self) -> None:
        """The group revoked the partitions: every active task is suspended (kept, with its stores, in case
        the task comes back to this thread)."""
        for task in self.tasks.values():
            task.suspend()
        self._suspended.update(self.tasks)
        self.tasks = {}
        self._by_partition = {}

    def assign(self, active: Mapping[str, Any], warm: Mapping[str, StandbyTask]) -> None:
        """Takes up the active tasks the group assigned (task id -> partitions): suspended ones resume, the
        others are created (from a ``warm`` standby when there is one)."""
        for task_id, tps in active.items():
            resumed = self._suspended.pop(task_id, None)
            self.add_task(resumed or self.create_task(task_id, tps, warm.get(task_id)), tps)

    def release(self, task_ids: Iterable[str]) -> None:
        """Closes (cleanly: they were just committed) active tasks handed over to another member."""
        for task_id in task_ids:
            task = self.tasks.pop(task_id)
            for tp in task.queues:
                self._by_partition.pop(tp, None)
            self.close_task(task)

    def close_unassigned_suspended(self, active: Iterable[str]) -> None:
        """Closes the suspended tasks that the new assignment does not give back."""
        keep = set(active)
        for task_id in [t for t in self._suspended if t not in keep]:
            self.close_task(self._suspended.pop(task_id))

    def create_task(self, task_id: str, tps: Any, warm: StandbyTask | None = None) -> StreamTask:
        """A new active task with its stores restored (from a warm standby's position when there is one)."""
        sub_id, partition = TaskId.parse(task_id)
        task = StreamTask(
            task_id,
            next(s for s in self.topology.subtopologies() if s.id == sub_id),
            partition,
            self.topology,
            self.config,
            self.collector,
            wall_clock_ms,
            [TopicPartition(*tp) for tp in tps],
            self.global_stores,
            cache=self.cache,
        )
        try:
            start = warm.adopt_into(task) if warm is not None else None
            self.restored_records += restore_task(
                task,
                self.restore_consumer,
                self.admin,
                lambda tid, done, total: self.restore_progress.__setitem__(tid, (done, total)),
                start_offsets=start,
            )
            task_tps = [TopicPartition(*tp) for tp in tps]
            task.restore_metadata(self._read_group(self.consumer.committed_metadata, task_tps))
            task.initialize()
        except BaseException:
            # the task never joined self.tasks: close its stores here, then fail the thread
            try:
                task.close()
            except Exception:
                log.exception("closing task %s after a failed start failed", task_id)
            raise
        return task

    def add_task(self, task: StreamTask, tps: Any) -> None:
        # lag and idleness count from where the group committed, not from the partition's start
        task_tps = [TopicPartition(*tp) for tp in tps]
        committed = self._read_group(self.consumer.committed, task_tps)
        task.set_start_offsets({tp: off for tp, off in committed.items() if off is not None})
        log.info("task %s starts from the group's offsets %s", task.task_id,
                 {str(tp): off for tp, off in sorted(committed.items())})  # fmt: skip
        task.fetched_to_end = self.consumer.fetched_to_end
        self.tasks[task.task_id] = task
        for tp in task_tps:
            self._by_partition[tp] = task

    def _read_group(self, read: Callable[[list[TopicPartition]], _T], tps: list[TopicPartition]) -> _T:
        """``read(tps)`` from the group's committed offsets, retried up to ``task_timeout_ms`` while the broker
        does not answer in time (Kafka Streams' task.timeout.ms, KIP-572): right after a broker restart the
        offsets stay unstable until a transaction a previous run left open has been aborted."""
        deadline = time.monotonic() + self.config.task_timeout_ms / 1000
        while True:
            try:
                return read(tps)
            except BrokerUnavailableError as e:
                if time.monotonic() >= deadline or self._stopping():
                    raise
                log.warning("%s; trying again (task_timeout_ms=%d)", e, self.config.task_timeout_ms)

    def write_checkpoint(self, task: StreamTask) -> None:
        changelogs = task.persistent_changelogs()
        if changelogs:
            task.write_checkpoint(self.admin.end_offsets(changelogs))

    def close_task(self, task: StreamTask, clean: bool = True) -> None:
        self.closed_processed += task.processed_total
        if self._exactly_once and clean and not self._failed():
            try:
                self.write_checkpoint(task)  # committed and closing cleanly: the stores match the changelog
            except Exception:
                log.exception("writing the checkpoint of task %s failed", task.task_id)
        try:
            task.close()
        except Exception:
            log.exception("closing task %s failed", task.task_id)

    def close_tasks(self, clean: bool) -> None:
        """Closes every active and suspended task."""
        for task in [*self.tasks.values(), *self._suspended.values()]:
            self.close_task(task, clean)
        self.tasks = {}
        self._suspended = {}
        self._by_partition = {}

    # ---- standby tasks: warm copies of other instances' stores ----------------------------------

    def update_standbys(self, wanted: set[str], active: set[str]) -> dict[str, StandbyTask]:
        """Keeps the standby tasks the group gave this thread; returns those now becoming active (warm)."""
        subs = {s.id: s for s in self.topology.subtopologies()}
        promoted = {tid: self.standbys.pop(tid) for tid in list(self.standbys) if tid in active}
        for tid in [t for t in self.standbys if t not in wanted]:
            self.standbys.pop(tid).close()
        for tid in wanted - set(self.standbys) - active:
            sub_id, partition = TaskId.parse(tid)
            self.standbys[tid] = StandbyTask(
                StreamTask(
                    tid,
                    subs[sub_id],
                    partition,
                    self.topology,
                    self.config,
                    self.collector,
                    wall_clock_ms,
                    cache=self.cache,
                )
            )
        self._assign_standby_consumer()
        return promoted

    def _assign_standby_consumer(self) -> None:
        positions = {tp: off for sb in self.standbys.values() for tp, off in sb.positions.items()}
        changelogs = {tp for sb in self.standbys.values() for tp in sb.changelogs}
        existing = {tp for tp in changelogs if self.admin.partition_count(tp.topic) is not None}
        self.standby_consumer.assign(existing)
        begins = self.admin.beginning_offsets(existing) if existing else {}
        for tp in existing:
            self.standby_consumer.seek(tp, positions.get(tp, begins[tp]))

    def update_standby_stores(self) -> None:
        """Applies what the standby consumer fetched from the changelogs to the standby stores."""
        if not self.standbys:
            return
        by_changelog = {tp: sb for sb in self.standbys.values() for tp in sb.changelogs}
        if set(by_changelog) - self.standby_consumer.assignment():
            self._assign_standby_consumer()  # a changelog topic appeared since the assignment
        for batch in self.standby_consumer.poll(0):
            tp = TopicPartition(batch.topic, batch.partition)
            standby = by_changelog.get(tp)
            if standby is not None:
                standby.apply(tp, batch)

    def task_offset_sums(self) -> dict[str, int]:
        """What this thread reports with its subscription (KIP-441): LATEST_OFFSET for its active tasks (running
        or suspended by the rebalance), its standbys' changelog positions, the checkpoints on disk."""
        return task_offset_sums(
            [*self.tasks, *self._suspended],
            {tid: sb.positions for tid, sb in self.standbys.items()},
            self.config.state_dir,
            self.config.application_id,
        )

    def close_standbys(self) -> None:
        for standby in self.standbys.values():
            standby.close()
