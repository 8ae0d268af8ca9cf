"""The Kafka producer (confluent-kafka), as Kafka Streams' StreamsProducer: sends, delivery errors, transactions.

``KafkaProducer`` hands each record to librdkafka at once (it batches itself) with Java's partitioner
(``PRODUCER_DEFAULTS``); a failed delivery is raised by the next ``send``/``flush``, a refused login by the
next call. With a ``transactional.id`` it is transactional (exactly_once_v2): ``send_offsets_to_transaction``
runs on a helper thread so an absent group coordinator cannot hold the stream thread. librdkafka turns a
record timestamp of 0 into "now": records produced with timestamp 0 get the current time (the embedded
cluster keeps 0).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka import Producer as CKProducer
from confluent_kafka import TopicPartition as CKTopicPartition

from kstream_nb.cluster.base import Producer, RecordMetadata, Sender
from kstream_nb.cluster.kafka_config import PRODUCER_DEFAULTS, config_for, with_metadata
from kstream_nb.cluster.kafka_errors import (
    AUTHENTICATION_ERRORS,
    FENCED,
    PURGED,
    authentication_error,
    kafka_error,
)
from kstream_nb.cluster.records import Headers, TopicPartition, as_bytes, as_tp
from kstream_nb.errors import (
    BrokerUnavailableError,
    IllegalStateError,
    StreamsError,
    TransactionError,
)

if TYPE_CHECKING:
    from kstream_nb.cluster.kafka import KafkaCluster

log = logging.getLogger("kstream_nb.kafka")

#: librdkafka's RD_KAFKA_PARTITION_UA: the partitioner picks the partition
_UNASSIGNED = -1


class KafkaProducer(Producer):
    """An asynchronous librdkafka producer; the first failed delivery is raised by ``send``/``flush``.

    With a ``transactional.id`` in its config the producer is transactional (exactly_once_v2): call
    ``init_transactions()`` once; a transaction begins at the first send (or ``begin_transaction``) and
    ends with ``commit_transaction`` (after ``send_offsets_to_transaction``) or ``abort_transaction``.
    A failure inside a transaction raises ``TransactionError``; the caller aborts.
    """

    _POLL_EVERY = 1_000

    def __init__(self, cluster: KafkaCluster, config: Mapping[str, Any]) -> None:
        self.cluster = cluster
        conf = config_for("producer", PRODUCER_DEFAULTS, cluster.config, config)
        conf["on_delivery"] = self._on_delivery
        conf.setdefault("delivery.report.only.error", True)
        conf.setdefault("error_cb", self._on_client_error)
        self.config = conf
        self.transactional = bool(conf.get("transactional.id"))
        self._producer = CKProducer(conf)
        self._error: str | None = None
        self._auth_error: str | None = None
        self._sender: Sender | None = None
        self._closed = False
        self._initialized = False
        self._in_transaction = False
        self._offsets_call: _OffsetsCall | None = None

    def _on_delivery(self, err: KafkaError | None, msg: Any) -> None:
        # inside a transaction a failed delivery makes librdkafka fail the commit (the caller aborts): the
        # records of a transaction aborted meanwhile (the broker away) must not fail the next one's sends
        if err is not None and self.transactional and not err.fatal():
            log.debug("a record of the open transaction was not delivered (its commit fails): %s", err.str())
            return
        if err is not None and self._error is None and err.code() not in PURGED:
            where = (
                f"{msg.topic()}-{msg.partition()}"
                if msg.partition() is not None and msg.partition() >= 0
                else msg.topic()
            )
            self._error = f"cannot deliver a record to {where}: {err.str()}"

    def _on_client_error(self, err: KafkaError) -> None:
        if err.code() in AUTHENTICATION_ERRORS:
            self._auth_error = err.str()  # raised by the next send, flush or transactional call
        else:
            log.debug("%s: %s", self.cluster.bootstrap_servers, err.str())

    def _check_authentication(self) -> None:
        if self._auth_error is not None:
            raise authentication_error(self.cluster.bootstrap_servers, self._auth_error)

    def _check(self) -> None:
        if self._closed:
            raise IllegalStateError("cannot send: the producer is closed")
        self._check_authentication()
        if self._error is not None:
            error, self._error = self._error, None
            raise StreamsError(error)

    def send(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        timestamp: int | None = None,
        headers: Headers = (),
        partition: int | None = None,
    ) -> RecordMetadata | None:
        self.sender()(topic, key, value, timestamp, headers, partition)
        return None

    def send_batch(
        self, topic: str, records: list[tuple[bytes | None, bytes | None, int | None, Headers, int | None]]
    ) -> None:
        send = self.sender()
        for key, value, timestamp, headers, partition in records:
            send(topic, key, value, timestamp, headers, partition)

    def sender(self) -> Sender:
        """One record at a time, handed to librdkafka at once (it copies the bytes and batches itself)."""
        send = self._sender
        if send is None:
            send = self._sender = self._make_sender()
        return send

    def _make_sender(self) -> Sender:
        producer = self._producer
        produce = producer.produce
        transactional = self.transactional
        poll_every = self._POLL_EVERY
        unsent = 0

        def send(
            topic: str,
            key: bytes | None,
            value: bytes | None,
            timestamp: int | None,
            headers: Headers,
            partition: int | None,
        ) -> None:
            nonlocal unsent
            if self._closed:
                raise IllegalStateError("cannot send: the producer is closed")
            if transactional and not self._in_transaction:
                self.begin_transaction()
            if key is not None and key.__class__ is not bytes:
                key = as_bytes(topic, "key", key)
            if value is not None and value.__class__ is not bytes:
                value = as_bytes(topic, "value", value)
            part = _UNASSIGNED if partition is None else int(partition)
            ts = 0 if timestamp is None else int(timestamp)  # 0: librdkafka stamps the current time
            full_since = 0.0
            while True:
                try:
                    # positional (topic, value, key, partition, callback, on_delivery, timestamp, headers):
                    # confluent-kafka parses keywords twice as slowly
                    produce(topic, value, key, part, None, None, ts, list(headers) if headers else None)
                    break
                except BufferError:
                    # the local queue is full: wait for librdkafka to deliver it (flush returns once it has;
                    # poll would wait the whole time, successful deliveries not being reported), then retry
                    full_since = full_since or time.monotonic()
                    producer.flush(0.05)
                    self._check()
                    if self.on_queue_full is not None:
                        self.on_queue_full(time.monotonic() - full_since)
                except KafkaException as e:
                    raise StreamsError(f"cannot send a record to topic {topic!r}: {e}") from e
            unsent += 1
            if unsent >= poll_every:
                unsent = 0
                producer.poll(0)  # delivery reports: a failed one is raised here
                self._check()

        return send

    def purge(self) -> None:
        self._producer.purge()
        self._producer.poll(0)  # their delivery reports

    def in_flight(self) -> int:
        """Records handed to the producer and not yet acknowledged by the broker (raises a failed delivery)."""
        self._producer.poll(0)
        self._check()
        return len(self._producer)

    def flush(self, timeout: float = 30.0) -> None:
        """Waits until every record sent is acknowledged; ``BrokerUnavailableError`` after ``timeout``
        (the records stay queued in librdkafka, which keeps retrying them until ``message.timeout.ms``)."""
        if self._closed:
            return
        remaining = self._producer.flush(timeout)
        self._check()
        if remaining:
            raise BrokerUnavailableError(
                f"{remaining} record(s) not yet delivered to {self.cluster.bootstrap_servers} within {timeout}s"
            )

    # ---- transactions --------------------------------------------------------------------------

    def _txn_call(self, what: str, call: Any, *args: Any) -> Any:
        try:
            return call(*args)
        except KafkaException as e:
            with contextlib.suppress(KafkaException):  # (a producer in a fatal state may raise it again)
                self._producer.poll(0)  # runs error_cb: a refused login shows there, the call just timed out
            self._check_authentication()
            raise transaction_error(what, self.config.get("transactional.id"), e) from e

    def init_transactions(self, timeout: float | None = None) -> None:
        if not self.transactional or self._initialized:
            return
        self._txn_call("init_transactions", self._producer.init_transactions, timeout or self.cluster.timeout_s)
        self._initialized = True

    def begin_transaction(self) -> None:
        if not self.transactional or self._in_transaction:
            return
        if not self._initialized:
            self.init_transactions()
        self._txn_call("begin_transaction", self._producer.begin_transaction)
        self._in_transaction = True

    def send_offsets_to_transaction(
        self,
        offsets: Mapping[TopicPartition, int],
        consumer: Any,
        metadata: Mapping[TopicPartition, str] | None = None,
        timeout: float | None = None,
    ) -> None:
        if not self.transactional or not offsets:
            return
        self.begin_transaction()
        ck_offsets = [with_metadata(tp, int(off), metadata) for tp, off in as_offsets(offsets)]
        wait = timeout or self.cluster.timeout_s
        key = offsets_key(ck_offsets)
        earlier = self._offsets_call
        if earlier is not None:  # an earlier call still waited for the coordinator: wait for it again first
            self._offsets_call = None
            self._end_offsets_call(earlier, wait)
            if earlier.key == key:
                return
        call = _OffsetsCall(self, ck_offsets, consumer.group_metadata(), wait)
        call.start()
        self._end_offsets_call(call, wait)

    def _end_offsets_call(self, call: _OffsetsCall, wait: float) -> None:
        """Waits for the call; raises its error, or a retriable one while it still waits."""
        call.join(wait)
        if call.is_alive():
            self._offsets_call = call
            raise TransactionError(
                f"transactional producer {self.config.get('transactional.id')!r}: send_offsets_to_transaction "
                f"did not answer within {wait}s (the group coordinator is unreachable)",
                retriable=True,
                code=KafkaError._TIMED_OUT,
            )
        if call.error is not None:
            raise transaction_error("send_offsets_to_transaction", self.config.get("transactional.id"), call.error)

    def commit_transaction(self, timeout: float | None = None) -> None:
        if not self._in_transaction:
            return
        self._txn_call("commit_transaction", self._producer.commit_transaction, timeout or self.cluster.timeout_s)
        self._in_transaction = False
        self._check()

    def abort_transaction(self, timeout: float | None = None) -> None:
        if not self._in_transaction:
            return
        if self._offsets_call is not None and self._offsets_call.is_alive():
            raise TransactionError(
                f"transactional producer {self.config.get('transactional.id')!r}: cannot abort while "
                "send_offsets_to_transaction waits for the group coordinator",
                retriable=True,
            )
        self._in_transaction = False
        self._error = None  # the failed deliveries belonged to the aborted transaction
        self._txn_call("abort_transaction", self._producer.abort_transaction, timeout or self.cluster.timeout_s)

    def close(self, timeout: float = 30.0) -> None:
        if self._closed:
            return
        try:
            if self._in_transaction:
                # never leave a transaction open: it would hold back read_committed readers (a broker that
                # cannot be asked aborts it itself after transaction.timeout.ms)
                self.abort_transaction(timeout)
            self.flush(timeout)
        finally:
            self._closed = True


class _OffsetsCall(threading.Thread):
    """librdkafka's send_offsets_to_transaction on a helper thread: while the group coordinator is
    unreachable the call ignores its timeout (confluentinc/librdkafka#5456) and would hold the stream
    thread until the broker is back. The wait is bounded instead; the call goes on, and a retry with the
    same offsets waits for it again. It ends when the broker answers (or the producer is destroyed)."""

    def __init__(
        self, producer: KafkaProducer, offsets: list[CKTopicPartition], group: Any, timeout: float
    ) -> None:
        super().__init__(name=f"{producer.config.get('transactional.id')}-send-offsets", daemon=True)
        self.key = offsets_key(offsets)
        self.error: KafkaException | None = None
        self._call = producer._producer.send_offsets_to_transaction
        self._args = (offsets, group, timeout)

    def run(self) -> None:
        try:
            self._call(*self._args)
        except KafkaException as e:
            self.error = e


def offsets_key(offsets: list[CKTopicPartition]) -> list[tuple[str, int, int, str | None]]:
    """What a list of offsets says (confluent-kafka's TopicPartitions compare equal whatever their offsets)."""
    return [(tp.topic, tp.partition, tp.offset, tp.metadata) for tp in offsets]


def transaction_error(what: str, transactional_id: Any, cause: KafkaException) -> TransactionError:
    """A ``TransactionError`` from librdkafka's error: what failed, and whether to abort or retry."""
    err = kafka_error(cause)
    detail = err.str() if err is not None else str(cause)
    return TransactionError(
        f"transactional producer {transactional_id!r}: {what} failed: {detail}",
        fatal=bool(err is not None and err.fatal()),
        fenced=bool(err is not None and err.code() in FENCED),
        abortable=bool(err is not None and err.txn_requires_abort()),
        retriable=bool(err is not None and err.retriable()),
        code=None if err is None else err.code(),
    )


def as_offsets(offsets: Mapping[TopicPartition, int]) -> list[tuple[TopicPartition, int]]:
    return [(as_tp(tp), off) for tp, off in offsets.items()]
