"""Where a task's output goes: ``RecordCollector`` (as Kafka Streams' interface of that name) and
``ProducerCollector``, a stream thread's collector over its producer (Kafka's ``RecordCollectorImpl``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from kstream_nb.cluster.base import Admin
from kstream_nb.cluster.records import ColumnarBatch, Headers

if TYPE_CHECKING:
    from kstream_nb.cluster.base import Producer


class RecordCollector(Protocol):
    """Where a task's output goes: sink records, repartition records and changelog records."""

    #: True when the bytes sent are copied at once and never kept (Kafka's producer)
    copies_on_send: bool

    def send(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        timestamp: int,
        headers: Headers,
        partition: int | None,
    ) -> None: ...

    def send_columnar(self, topic: str, batch: ColumnarBatch, partition: int) -> None: ...

    def partition_count(self, topic: str) -> int: ...


class RecordByRecordCollector(RecordCollector):
    """A collector that takes records one at a time (test driver, backtest): a columnar batch is sent row by
    row, serialized with the batch's serdes."""

    def send_columnar(self, topic: str, batch: ColumnarBatch, partition: int) -> None:
        for i, value in enumerate(batch.values.to_dict("records")):
            self.send(
                topic,
                batch.key_serde.serialize(topic, batch.keys[i]),
                batch.value_serde.serialize(topic, value),
                int(batch.timestamps[i]),
                batch.headers[i] if batch.headers else (),
                partition,
            )


class ProducerCollector:
    """Sends a thread's output through its producer: record by record when the producer takes them so
    (Kafka: librdkafka copies and batches), else, or with ``hold``, the records since the last ``flush``.

    Caches the partition counts of output topics.
    """

    def __init__(self, producer: Producer, admin: Admin, hold: bool = False) -> None:
        self.admin = admin
        self._counts: dict[str, int] = {}
        self._pending: dict[str, list[tuple[bytes | None, bytes | None, int | None, Headers, int | None]]] = {}
        #: exactly-once on Kafka: every record waits for ``flush`` (see ``StreamThread._commit_transaction``)
        self.hold = hold
        self.use(producer)

    def use(self, producer: Producer) -> None:
        """Sends through ``producer`` from now on (a fenced transactional producer is replaced)."""
        self.producer = producer
        direct = None if self.hold else producer.sender()
        #: whether sent bytes are copied at once (they need not be compact: see ``Serde.serializer``)
        self.copies_on_send = direct is not None
        if direct is not None:
            self.send = direct  # type: ignore[method-assign,assignment]

    def send(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        timestamp: int | None,
        headers: Headers,
        partition: int | None,
    ) -> None:
        pending = self._pending.get(topic)
        if pending is None:
            pending = self._pending[topic] = []
        pending.append((key, value, timestamp, headers, partition))

    def pending(self) -> bool:
        """Whether records wait for the next ``flush`` (with ``hold``: the open transaction's)."""
        return bool(self._pending)

    def abort(self) -> None:
        """Drops the buffered records (an exactly-once transaction that did not commit)."""
        self._pending = {}

    def flush(self) -> None:
        """Hands the buffered records to the producer (in order, per topic)."""
        if not self._pending:
            return
        pending, self._pending = self._pending, {}
        for topic, records in pending.items():
            self.producer.send_batch(topic, records)

    def send_columnar(self, topic: str, batch: ColumnarBatch, partition: int) -> None:
        if self.admin.partition_count(topic) is None:
            self.admin.create_topics([_spec(topic)], exist_ok=True)
        if self.hold:  # held like any other record until the transaction's commit
            self._pending.setdefault(topic, []).extend(batch.serialized(topic, partition))
            return
        self.flush()
        self.producer.send_columnar(topic, batch, partition)

    def topic_exists(self, topic: str) -> bool:
        """Whether the cluster has ``topic`` (never creates it)."""
        return topic in self._counts or self.admin.partition_count(topic) is not None

    def partition_count(self, topic: str) -> int:
        count = self._counts.get(topic)
        if count is None:
            count = self.admin.partition_count(topic)
            if count is None:
                self.admin.create_topics([_spec(topic)], exist_ok=True)
                count = self.admin.partition_count(topic) or 1
            self._counts[topic] = count
        return count


def _spec(topic: str) -> Any:
    from kstream_nb.cluster.base import TopicSpec

    return TopicSpec(topic, 1)
