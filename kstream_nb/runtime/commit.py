"""How a stream thread commits under its processing guarantee, as Kafka Streams' processing modes
(``ProcessingMode``) and the transaction handling of its ``StreamsProducer``.

One strategy per guarantee: ``AtLeastOnceCommit`` (outputs acknowledged, then offsets; checkpoints at every
commit), ``ExactlyOnceCommit`` (the same on a cluster without transactions, memory://, whose outputs become
visible at commit only; checkpoints on a clean close only) and ``TransactionalCommit`` (exactly_once_v2 on
Kafka: outputs, changelog writes and offsets in one transaction, whose state ``TransactionState`` tracks).
"""

from __future__ import annotations

import logging
from enum import Enum
from typing import TYPE_CHECKING, Any

from kstream_nb.cluster.base import Cluster
from kstream_nb.cluster.kafka_group_member import TASK_MIGRATED_ERRORS
from kstream_nb.cluster.records import TopicPartition
from kstream_nb.errors import BrokerUnavailableError, TransactionError
from kstream_nb.runtime.config import EXACTLY_ONCE_V2, StreamsConfig
from kstream_nb.runtime.task import StreamTask

if TYPE_CHECKING:
    from kstream_nb.runtime.stream_thread import StreamThread

log = logging.getLogger("kstream_nb.thread")

#: how long a commit waits for the broker (the producer's acknowledgements, a transactional call) before
#: the thread reports the broker unreachable and retries the commit later
COMMIT_TIMEOUT_S = 5.0


class TransactionState(Enum):
    """Where an exactly-once thread's transaction stands between two commits."""

    #: nothing left over from the last commit
    IDLE = "IDLE"
    #: commit_transaction failed after the offsets and records were sent: the next commit retries just it
    COMMITTING = "COMMITTING"
    #: the open transaction is lost: abort it and rebuild the tasks from their changelogs
    CORRUPTED = "CORRUPTED"


class AtLeastOnceCommit:
    """at_least_once: the outputs are flushed and acknowledged, then the offsets committed (not waited for);
    each commit writes the persistent stores' checkpoints."""

    #: outputs, changelog writes and offsets become visible together, at commit
    exactly_once = False
    #: a transactional producer and read_committed consumers (exactly-once on Kafka)
    transactional = False

    def configure_producer(self, producer_config: dict[str, Any], transactional_id: str) -> None:
        if "delivery.timeout.ms" not in producer_config:
            # at-least-once: librdkafka retries a record until the broker takes it, however long it is away
            # (offsets are committed only after every record is acknowledged, so none is lost)
            producer_config.setdefault("message.timeout.ms", 0)

    def send(
        self, thread: StreamThread, offsets: dict[TopicPartition, int], metadata: dict[TopicPartition, str]
    ) -> bool:
        """Commits the outputs and ``offsets``; False when the broker is away (retried at a later commit)."""
        try:
            thread.collector.flush()
            thread.producer.flush(COMMIT_TIMEOUT_S)
            thread.publish()
            # not waited for: a commit the broker does not take shows in a later poll, and is sent again
            thread.consumer.commit_async(offsets, metadata)
            if offsets:
                thread.commit_total += 1
        except BrokerUnavailableError as e:
            # nothing is lost: the records stay queued in the producer and the offsets are committed
            # by a later commit, once the broker answers again
            thread.broker.lost(e)
            return False
        return True

    def prepare(self, thread: StreamThread) -> bool:
        """Before a commit: False when this commit does nothing more (a lost transaction was aborted)."""
        return True

    def committed(self, thread: StreamThread, task: StreamTask) -> None:
        """After ``task``'s offsets were committed: its stores' checkpoint."""
        thread.task_manager.write_checkpoint(task)


class ExactlyOnceCommit(AtLeastOnceCommit):
    """exactly_once_v2 on a cluster without transactions (memory://): committed as at-least-once, but the
    checkpoint is written only when a task closes cleanly (see ``StreamTask``)."""

    exactly_once = True

    def prepare(self, thread: StreamThread) -> bool:
        if thread.transaction is TransactionState.CORRUPTED:
            self.abort_and_rebuild_tasks(thread)
            return False
        return True

    def committed(self, thread: StreamThread, task: StreamTask) -> None:
        pass

    def replace_fenced_producer(self, thread: StreamThread, error: TransactionError) -> None:
        """After the broker fenced the thread's producer (its transaction outlived ``transaction.timeout.ms``,
        e.g. while the broker was away): as Kafka Streams' handling of a lost task under exactly_once_v2, a
        new producer with the same transactional id takes over and the tasks are rebuilt from their
        changelogs at the next commit."""
        log.warning(
            "%s: the broker fenced the transactional producer (%s); a new one takes over", thread.name, error
        )
        fenced = thread.producer
        try:
            fenced.close(0)
        except Exception:
            log.debug("closing the fenced producer of %s failed", thread.name, exc_info=True)
        thread.replace_producer()
        thread.transaction = TransactionState.CORRUPTED

    def abort_and_rebuild_tasks(self, thread: StreamThread) -> None:
        """After the open transaction was lost: its updates are in the tasks' stores but not in the
        changelogs, so the tasks are closed dirty, built again from the changelogs and read again from the
        committed offsets (Kafka Streams' task-corrupted handling). Retried while the broker is away."""
        try:
            thread.collector.abort()
            thread.transaction = TransactionState.CORRUPTED  # (no longer a commit to retry)
            thread.producer.abort_transaction()
        except TransactionError as e:
            if e.fenced:  # the broker ended the transaction itself: a new producer, nothing left to abort
                self.replace_fenced_producer(thread, e)
            elif e.fatal or not e.retriable:
                raise
            else:
                thread.broker.lost(e)
                return
        manager = thread.task_manager
        log.warning("%s: the transaction was aborted; rebuilding tasks %s from their changelogs", thread.name,
                    sorted(manager.tasks))  # fmt: skip
        corrupted = list(manager.tasks.items())
        for _, task in corrupted:
            manager.close_task(task, clean=False)
        # what closing the stores wrote (caches, held changes) belongs to the aborted transaction
        thread.collector.abort()
        thread.producer.abort_transaction()
        for task_id, task in corrupted:
            tps = list(task.queues)
            del manager.tasks[task_id]
            manager.add_task(manager.create_task(task_id, tps), tps)
            committed = thread.consumer.committed(tps)
            begins = thread.admin.beginning_offsets(tps)
            for tp in tps:
                offset = committed.get(tp)
                thread.consumer.seek(tp, offset if offset is not None else begins[tp])
        thread.transaction = TransactionState.IDLE
        thread.broker.back()


class TransactionalCommit(ExactlyOnceCommit):
    """exactly_once_v2 on Kafka: the outputs, changelog writes and consumed offsets in one transaction."""

    transactional = True

    def configure_producer(self, producer_config: dict[str, Any], transactional_id: str) -> None:
        producer_config.setdefault("transaction.timeout.ms", 10_000)  # Kafka Streams' default under EOS
        producer_config["transactional.id"] = transactional_id

    def send(
        self, thread: StreamThread, offsets: dict[TopicPartition, int], metadata: dict[TopicPartition, str]
    ) -> bool:
        try:
            thread._commit_transaction(offsets, metadata)
        except TransactionError as e:
            if thread.handover is not None and e.code in TASK_MIGRATED_ERRORS:
                thread.handover.tasks_lost(str(e))  # (leader-assigned tasks: the group moved on without us)
                return False
            if e.fenced:
                self.replace_fenced_producer(thread, e)
                return False
            if e.fatal or not (e.retriable or e.abortable):
                raise
            # the broker is away (retried at the next commit, same transaction) or gave up on the
            # transaction (aborted, and the tasks rebuilt from what was committed)
            thread.broker.lost(e)
            if e.abortable:
                thread.transaction = TransactionState.CORRUPTED
            return False
        if offsets:  # the broker took them (else BrokerHealth.watch tells when it is back)
            thread.broker.back()
        return True

    def prepare(self, thread: StreamThread) -> bool:
        if not super().prepare(thread):
            return False
        self.skip_transaction_markers(thread)
        return True

    def skip_transaction_markers(self, thread: StreamThread) -> None:
        """Moves drained partitions' consumed positions to the consumer's: a read_committed consumer skips
        transaction markers, so the end of a partition written in transactions lies past its last record
        (committing there keeps lag at 0 once everything is processed)."""
        fetched = getattr(thread.consumer, "fetched_position", None)
        if fetched is None:
            return
        for task in thread.tasks.values():
            for tp, queue in task.queues.items():
                consumed = task.consumed.get(tp)
                if queue or consumed is None:
                    continue
                position = fetched(tp)
                if position is not None and position > consumed:
                    task.consumed[tp] = position


def commit_strategy(config: StreamsConfig, cluster: Cluster) -> AtLeastOnceCommit:
    """The strategy for ``config``'s processing guarantee on ``cluster``."""
    if config.processing_guarantee != EXACTLY_ONCE_V2:
        return AtLeastOnceCommit()
    return TransactionalCommit() if cluster.supports_transactions else ExactlyOnceCommit()
