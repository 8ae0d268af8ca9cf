"""``StreamThread``: one background thread with its own consumer, producer and tasks.

Loop: poll -> add records to tasks -> process -> punctuate -> commit on the interval. Rebalance callbacks
run inside ``poll`` (as in Kafka): revoked tasks are committed and suspended (or closed), assigned ones
resumed or created and restored from their changelogs. As Kafka Streams' ``StreamThread``, it drives the
pieces that do the work: ``TaskManager`` (tasks, standbys), the commit strategy of its processing
guarantee (``runtime/commit.py``), ``BrokerHealth``, and its life cycle as a ``ThreadState``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from kstream_nb.cluster.base import Cluster
from kstream_nb.cluster.kafka_fetch_consumer import fetch_consumer
from kstream_nb.cluster.records import TopicPartition
from kstream_nb.errors import StreamsError
from kstream_nb.runtime.assignor import StreamsPartitionAssignor
from kstream_nb.runtime.broker_health import BrokerHealth
from kstream_nb.runtime.commit import COMMIT_TIMEOUT_S, TransactionState, commit_strategy
from kstream_nb.runtime.config import StreamsConfig
from kstream_nb.runtime.control_topic import ControlTopic
from kstream_nb.runtime.gc_threshold import raised_gc_threshold
from kstream_nb.runtime.record_collector import ProducerCollector
from kstream_nb.runtime.standby import StandbyTask
from kstream_nb.runtime.task import StreamTask, stream_thread_cache
from kstream_nb.runtime.task_handover import TaskHandover
from kstream_nb.runtime.task_manager import TaskManager
from kstream_nb.runtime.thread_state import ThreadState
from kstream_nb.topology.topology import Topology

log = logging.getLogger("kstream_nb.thread")


class _StopWhileBlocked(BaseException):
    """Unwinds a stream thread told to stop while a send waits for the broker (a BaseException, so that no
    processing-error handler takes it for a record's failure)."""


class StreamThread(threading.Thread):
    """Runs the tasks the group assigns to it until ``shutdown()``; reports a failure to ``on_error``."""

    def __init__(
        self,
        name: str,
        process_id: str,
        topology: Topology,
        config: StreamsConfig,
        cluster: Cluster,
        assignor: StreamsPartitionAssignor,
        on_state: Callable[[StreamThread], None],
        on_error: Callable[[StreamThread, BaseException], None],
        global_stores: Mapping[str, Any] | None = None,
        global_ready: threading.Event | None = None,
        control: ControlTopic | None = None,
    ) -> None:
        super().__init__(name=name, daemon=True)
        self.global_stores = global_stores or {}
        #: how the thread commits under its processing guarantee (at-least-once, exactly-once)
        self.commit = commit_strategy(config, cluster)
        self._global_ready = global_ready
        self.process_id = process_id
        self.topology = topology
        self.config = config
        self.cluster = cluster
        self.assignor = assignor
        self._on_state = on_state
        self._on_error = on_error
        self.admin = cluster.admin()
        # Kafka Streams' client ids: <client_id or application_id-process_id>-StreamThread-N
        thread_label = name.removeprefix(f"{config.application_id}-")
        client = f"{config.client_id or f'{config.application_id}-{process_id}'}-{thread_label}"
        # exactly-once on a cluster with transactions (Kafka): a transactional producer, and consumers that
        # only see committed transactions (the open and aborted ones of other threads stay hidden)
        committed_only = {"isolation.level": "read_committed"} if cluster.supports_transactions else {}
        consumer_config = {
            "client.id": client,
            "auto.offset.reset": config.auto_offset_reset,
            **(committed_only if self.commit.transactional else {}),
            **config.client_config,
        }
        # on Kafka (a control topic): a group member for membership and commits, a fetch consumer for tasks
        self.consumer = (
            cluster.consumer(config.application_id, consumer_config)
            if control is None
            else fetch_consumer(cluster, config.application_id, consumer_config)
        )
        # changelogs are restored from committed transactions only, whatever this app's guarantee
        restore_config = {**config.client_config, **committed_only}
        self.restore_consumer = cluster.consumer(None, {**restore_config, "client.id": f"{client}-restore"})
        self.standby_consumer = cluster.consumer(None, {**restore_config, "client.id": f"{client}-standby"})
        producer_config: dict[str, Any] = {"client.id": client, **config.client_config}
        # Kafka Streams' exactly_once_v2 id: <application_id>-<process_id>-<thread index>. The process id is
        # stable across restarts (process_metadata), so a restarted instance fences its zombies and closes the
        # transactions they left open; instances running at the same time never share one
        thread_index = name.rsplit("-", 1)[-1]
        self.commit.configure_producer(producer_config, f"{config.application_id}-{process_id}-{thread_index}")
        self.producer_config = producer_config
        self.producer = cluster.producer(producer_config)
        self.producer.on_queue_full = self._queue_full
        # exactly-once sends a transaction's records right before its commit (see _commit_transaction)
        self.collector = ProducerCollector(self.producer, self.admin, hold=self.commit.transactional)
        #: the record cache of this thread's tasks (Kafka's ThreadCache); their cached stores take it at init
        self.cache = stream_thread_cache(config)
        self.task_manager = TaskManager(
            topology,
            config,
            self.collector,
            self.admin,
            self.consumer,
            self.restore_consumer,
            self.standby_consumer,
            self.global_stores,
            lambda: self.error is not None,
            self.cache,
            lambda: self._shutdown.is_set(),
        )
        self._shutdown = threading.Event()
        self.state = ThreadState.CREATED
        self.error: BaseException | None = None
        self.broker = BrokerHealth(name, cluster, self.consumer)
        #: exactly-once on Kafka: where the transaction stands between two commits
        self.transaction = TransactionState.IDLE
        #: set by ``_close``: the consumer's close revokes the partitions, and nothing commits after it
        self._closing = False
        self.missing_topics: list[str] = []
        self.group_view: dict[str, Any] = {}
        self.poll_total = 0
        self.commit_total = 0
        self.process_time_s = 0.0
        self.rate = 0.0
        self._rate_sample = (time.monotonic(), 0)
        self._last_commit = time.monotonic()
        self._prev_tasks: list[str] = []
        #: when to ask the group for the probing rebalance the assignment scheduled (warm-ups catching up)
        self._probe_at: float | None = None
        #: on Kafka: tasks come from the control topic's assignments
        self.handover = TaskHandover(self, control, self.consumer) if control is not None else None

    # ---- state ---------------------------------------------------------------------------------

    def _set_state(self, state: ThreadState) -> None:
        """Moves to ``state`` (if legal, see ``ThreadState.check``) and tells the app."""
        if ThreadState(self.state).check(state):
            self.state = state
            self._on_state(self)

    def shutdown(self) -> None:
        """Asks the thread to finish its loop, commit and leave the group."""
        self._shutdown.set()

    @property
    def broker_unreachable_since(self) -> float | None:
        """Since when (monotonic s) the broker has not answered, None while it answers."""
        return self.broker.unreachable_since

    @property
    def _committing(self) -> bool:
        """Exactly-once: commit_transaction is to be retried (read by the fault tests' diagnostics)."""
        return self.transaction is TransactionState.COMMITTING

    @property
    def _transaction_corrupted(self) -> bool:
        """Exactly-once: the open transaction is to be aborted and the tasks rebuilt."""
        return self.transaction is TransactionState.CORRUPTED

    @_transaction_corrupted.setter
    def _transaction_corrupted(self, corrupted: bool) -> None:
        if corrupted:
            self.transaction = TransactionState.CORRUPTED
        elif self.transaction is TransactionState.CORRUPTED:
            self.transaction = TransactionState.IDLE

    @property
    def processed_total(self) -> int:
        return self.task_manager.processed_total

    @property
    def tasks(self) -> dict[str, StreamTask]:
        """The active tasks, by id."""
        return self.task_manager.tasks

    @property
    def standbys(self) -> dict[str, StandbyTask]:
        return self.task_manager.standbys

    @property
    def restored_records(self) -> int:
        return self.task_manager.restored_records

    @property
    def restore_progress(self) -> dict[str, tuple[int, int]]:
        """Task id -> (changelog offsets restored, to restore)."""
        return self.task_manager.restore_progress

    # ---- rebalance callbacks (run inside poll, on this thread) ---------------------------------

    def _userdata(self) -> dict[str, Any]:
        # called when joining a rebalance, after the revocation closed the tasks: report the last assigned
        return {
            "process_id": self.process_id,
            "thread": self.name,
            "prev_tasks": sorted(self._prev_tasks),
            "prev_standbys": sorted(self.standbys),
            # KIP-441: how far this instance's copies of each task's state are (the assignor's lags), its rack
            "task_offset_sums": self.task_manager.task_offset_sums(),
            "rack": self.config.client_config.get("client.rack"),
        }

    def on_partitions_revoked(self, partitions: set[TopicPartition]) -> None:
        self._set_state(ThreadState.PARTITIONS_REVOKED)
        if self.error is not None:
            self.task_manager.close_tasks(clean=False)
            return
        self._commit(force=True)
        if self.commit.exactly_once and (
            self.transaction is not TransactionState.IDLE
            or any(t.offsets_to_commit() for t in self.tasks.values())  # (offsets left uncommitted)
        ):
            # the commit did not go through (the broker is away): the stores hold updates of a transaction
            # that is to be aborted, so the tasks are closed dirty and built again from their changelogs,
            # as Kafka Streams does, instead of being suspended with them
            if self.commit.transactional:
                self.transaction = TransactionState.CORRUPTED
            self.task_manager.close_tasks(clean=False)
            return
        # suspend rather than close: a task assigned back to this thread keeps its stores (no restore)
        self.task_manager.suspend_all()

    def on_partitions_assigned(self, partitions: set[TopicPartition], userdata: Any) -> None:
        self._set_state(ThreadState.PARTITIONS_ASSIGNED)
        userdata = userdata or {}
        self.missing_topics = list(userdata.get("missing_topics", []))
        probe_ms = userdata.get("probing_rebalance_ms")
        self._probe_at = time.monotonic() + probe_ms / 1000 if probe_ms else None
        self.group_view = dict(userdata.get("all", {}))
        active = userdata.get("active", {})
        self.task_manager.close_unassigned_suspended(active)
        warm = self.task_manager.update_standbys(set(userdata.get("standby", ())), set(active))
        self.task_manager.assign(active, warm)
        self._prev_tasks = sorted(self.tasks)
        log.info(
            "%s assigned active tasks %s, standby tasks %s", self.name, self._prev_tasks, sorted(self.standbys)
        )
        self._set_state(ThreadState.RUNNING)

    def _probe_if_due(self) -> None:
        """KIP-441: while warm-up replicas catch up, the assignment asks one member for a probing rebalance
        after ``probing_rebalance_interval_ms``; it moves the warm-ups that caught up (Kafka Streams' thread
        enforces it on its consumer)."""
        if self._probe_at is None or time.monotonic() < self._probe_at:
            return
        self._probe_at = None
        log.info("%s: warm-up replicas are catching up; asking the group for a probing rebalance", self.name)
        self.consumer.request_rebalance()

    # ---- the loop ------------------------------------------------------------------------------

    def run(self) -> None:
        with raised_gc_threshold(self.config.python_gc_threshold):
            self._run()

    def _run(self) -> None:
        try:
            self._set_state(ThreadState.STARTING)
            while self._global_ready is not None and not self._global_ready.wait(0.05):
                if self._shutdown.is_set():
                    return
            if self.commit.transactional:
                # fences a zombie of this thread's previous life and closes the transaction it left open
                self.producer.init_transactions()
            if self.handover is not None:
                self.handover.start()
            else:
                self.consumer.subscribe(self.assignor.source_topics(), self, self.assignor, self._userdata)
            self._loop()
            self._set_state(ThreadState.PENDING_SHUTDOWN)
            if not self.broker.away_now():  # else the next run reads again from the last commit
                self._commit(force=True)
        except _StopWhileBlocked as e:
            log.warning("%s; what it did not commit is processed again at the next start", e)
        except BaseException as e:
            self.error = e
            log.error("stream thread %s failed: %s", self.name, e)
        finally:
            self._close()
        if self.error is not None:
            self._set_state(ThreadState.DEAD)
            self._on_error(self, self.error)
        else:
            self._set_state(ThreadState.DEAD)

    def _loop(self) -> None:
        config = self.config
        poll_s = config.poll_ms / 1000
        budget = config.max_task_records_per_loop
        while not self._shutdown.is_set():
            ready = any(t.ready() for t in self.tasks.values())
            batches = self.consumer.poll(0 if ready else poll_s, config.max_poll_records)
            self.poll_total += 1
            self.task_manager.add_records(batches)
            self.broker.watch()
            start = time.perf_counter()
            # while the broker is away (or a transaction's commit is still to be retried), outputs cannot be
            # delivered: process again once it is back
            waiting = self.broker.unreachable_since is not None or self.transaction is not TransactionState.IDLE
            for task in list(self.tasks.values()) if not waiting else ():
                task.process(budget)
                task.punctuate()
            self.task_manager.apply_backpressure()
            if not self.commit.exactly_once:
                self.publish()
            self.task_manager.update_standby_stores()
            if self.handover is not None:
                self.handover.tick()
            else:
                self._probe_if_due()
            self.process_time_s += time.perf_counter() - start
            self._commit(force=False)
            self._sample_rate()

    def publish(self) -> None:
        """Sends the iteration's output, then makes the consumed positions visible (lag, idleness).

        With an asynchronous producer (Kafka) the positions become visible once everything sent has been
        acknowledged, so that no lag 0 is seen while outputs are still on their way to the next topic.
        """
        self.collector.flush()
        in_flight = getattr(self.producer, "in_flight", None)
        if in_flight is not None and in_flight():
            return
        for task in self.tasks.values():
            task.published = dict(task.consumed)

    def _sample_rate(self) -> None:
        now = time.monotonic()
        then, total_then = self._rate_sample
        if now - then >= 1.0:
            total = self.processed_total
            self.rate = (total - total_then) / (now - then)
            self._rate_sample = (now, total)

    def _commit(self, force: bool) -> None:
        """Commits when due (``commit_interval_ms``), asked for by a task, or ``force``d: flushes the stores,
        then the outputs and consumed offsets as the processing guarantee wants (see ``runtime/commit.py``)."""
        if self._closing:  # (the consumer's close revokes the partitions: _close has done what is left)
            return
        if self.handover is not None and not self.handover.may_commit():
            return  # (leader-assigned tasks: not inside a group rebalance, nor before the first join)
        due = time.monotonic() - self._last_commit >= self.config.commit_interval_ms / 1000
        if not (force or due or any(t.commit_requested for t in self.tasks.values())):
            return
        commit, began = self.commit, time.monotonic()
        if not commit.prepare(self):
            self._last_commit = began
            return
        offsets: dict[TopicPartition, int] = {}
        metadata: dict[TopicPartition, str] = {}
        per_task = []
        for task in self.tasks.values():
            task.flush()
            task_offsets = task.offsets_to_commit()
            offsets.update(task_offsets)
            if task_offsets:
                metadata.update(dict.fromkeys(task_offsets, task.commit_metadata()))
            per_task.append((task, task_offsets))
        if commit.send(self, offsets, metadata):
            for task, task_offsets in per_task:
                task.mark_committed(task_offsets)
                commit.committed(self, task)
        self._last_commit = time.monotonic()

    #: how long closing waits for the producer's last deliveries (and transaction), with the broker there or away
    _CLOSE_TIMEOUT_S = 30.0
    _CLOSE_AWAY_TIMEOUT_S = 1.0

    def replace_producer(self) -> None:
        """A new producer with the same settings (and transactional id) replaces the current one."""
        self.producer = self.cluster.producer(self.producer_config)
        self.producer.on_queue_full = self._queue_full
        self.collector.use(self.producer)

    def _queue_full(self, waited_s: float) -> None:
        """While a send has waited a second for room in the producer's queue: the broker counts as away, a
        closing thread drops what is queued, and a shutdown stops the wait."""
        if waited_s < 1.0:
            return
        self.broker.lost(f"the producer's queue has stayed full for {waited_s:.0f}s")
        if self._closing:  # nothing commits after this: the next start processes those records again
            self.producer.purge()
        elif self._shutdown.is_set():
            raise _StopWhileBlocked(f"{self.name} stopped while its producer's queue was full")

    def _commit_transaction(
        self, offsets: dict[TopicPartition, int], metadata: dict[TopicPartition, str] | None = None
    ) -> None:
        """exactly_once_v2 on Kafka: the iteration's outputs and changelog writes, and the consumed offsets,
        in one transaction. A failure propagates (the thread dies and ``_close`` aborts the transaction).

        The offsets go first and the records last, right before the commit: a transaction never holds records
        without the offsets that produced them, whatever becomes of a transactional call that timed out while
        the broker was away (see docs/tooling.md on records handed over as they are produced)."""
        if self.transaction is not TransactionState.COMMITTING:  # a retried commit only commits again
            if not offsets and self.handover is not None and self.collector.pending():
                offsets = self.handover.fencing_offsets()  # (a transaction without offsets is not fenced)
            if offsets:
                self.producer.send_offsets_to_transaction(offsets, self.consumer, metadata, COMMIT_TIMEOUT_S)
            self.collector.flush()  # (begins the transaction at the first record when no offsets did)
            self.transaction = TransactionState.COMMITTING
        self.producer.commit_transaction(COMMIT_TIMEOUT_S)
        self.transaction = TransactionState.IDLE
        if offsets:
            self.commit_total += 1
        self.publish()

    def _close(self) -> None:
        self._closing = True
        # with the broker away (the last commit failed) nothing waits for it: under exactly-once the open
        # transaction is dropped as after a failure; at-least-once delivers what it can in a second, and
        # what it cannot is processed again from the committed offsets
        away = self.transaction is TransactionState.CORRUPTED or self.broker.away_now()
        dirty = self.commit.exactly_once and (self.error is not None or away)
        wait_s = self._CLOSE_AWAY_TIMEOUT_S if away else self._CLOSE_TIMEOUT_S
        try:
            self.task_manager.close_tasks(clean=not dirty)
            if dirty:
                self.collector.abort()  # the open transaction: outputs and changelog writes never appear
                self.producer.abort_transaction(wait_s)
            else:
                # at-least-once: what was processed before a failure is still delivered (offsets not committed)
                self.collector.flush()
                if self.commit.transactional:
                    self.producer.commit_transaction(wait_s)  # writes of closing stores, if any
        except Exception:
            if self.error is None and not away:
                raise
            log.exception("closing the producer's transaction of %s failed", self.name)
        finally:
            self.task_manager.close_standbys()
            if self.handover is not None:
                self.handover.close()
            closers = (
                lambda: self.consumer.close(wait_s),  # (commits in flight: answered, or left behind when away)
                self.restore_consumer.close,
                self.standby_consumer.close,
                lambda: self.producer.close(wait_s),
            )
            for closer in closers:
                try:
                    closer()
                except StreamsError as e:  # says what failed (e.g. records not delivered with the broker away)
                    log.warning("closing a client of %s: %s", self.name, e)
                except Exception:
                    log.exception("closing a client of %s failed", self.name)

    def assignment(self) -> dict[str, list[str]]:
        """Task id -> the partitions it reads (this thread's active tasks)."""
        return {tid: sorted(str(tp) for tp in task.queues) for tid, task in sorted(self.tasks.items())}
