"""Shared set-up of the task-assignment experiments (docs/design/task_assignment_on_kafka.md §5): an Apache
Kafka 4.4 test broker on a temporary directory, stopped and removed on exit, and plain confluent_kafka
clients for it, so that each ``qN_*.py`` script holds only its experiment."""

from __future__ import annotations

import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

ROOT = Path(__file__).resolve().parents[3]
if str(ROOT) not in sys.path:  # run as a script: the repository root holds the `tests` package
    sys.path.insert(0, str(ROOT))

from tests.kafka_broker import FAST_CLIENT_CONFIG, make_broker  # noqa: E402

#: librdkafka logs critical messages only (the scripts print what they observed on stdout; errors reach
#: them through return values, callbacks and exceptions).
QUIET = {"log_level": 2}
#: Client settings passed by their Python name (everything else: ``max_poll_interval_ms`` -> ``max.poll...``).
CALLBACKS = {"on_commit", "error_cb", "stats_cb", "throttle_cb", "logger", "on_delivery"}


def _conf(config: dict[str, Any]) -> dict[str, Any]:
    return {k if k in CALLBACKS else k.replace("_", "."): v for k, v in config.items()}


class Lab:
    """Clients for one running broker; every client made here is closed by ``close_all`` (before the broker
    stops, so that no close waits for an absent coordinator)."""

    def __init__(self, bootstrap: str, log_path: Path | None = None) -> None:
        self.bootstrap = bootstrap
        self.log_path = log_path
        self._clients: list[Consumer | Producer] = []
        self._admin: AdminClient | None = None

    def broker_log(self) -> str:
        """The broker's server.log so far (its settings are logged at start)."""
        return self.log_path.read_text(errors="replace") if self.log_path else ""

    def admin(self) -> AdminClient:
        if self._admin is None:
            self._admin = AdminClient({"bootstrap.servers": self.bootstrap, **QUIET})
        return self._admin

    def consumer(self, group: str, **config: Any) -> Consumer:
        """A consumer of ``group``: no auto-commit, earliest reset, the test suite's fast timeouts."""
        conf = {"bootstrap.servers": self.bootstrap, "group.id": group, "enable.auto.commit": False,
                "auto.offset.reset": "earliest", **FAST_CLIENT_CONFIG, **QUIET}  # fmt: skip
        conf.update(_conf(config))
        consumer = Consumer(conf)
        self._clients.append(consumer)
        return consumer

    def producer(self, **config: Any) -> Producer:
        conf = {"bootstrap.servers": self.bootstrap, "linger.ms": 0, **QUIET}
        conf.update(_conf(config))
        producer = Producer(conf)
        self._clients.append(producer)
        return producer

    def create_topics(self, **partitions: int) -> None:
        """Creates each topic ``name=partition_count`` and waits until every partition has a leader."""
        futures = self.admin().create_topics([NewTopic(t, n, 1) for t, n in partitions.items()])
        for future in futures.values():
            future.result(30)
        wait_for(lambda: all(len(self.admin().list_topics(t, timeout=5).topics[t].partitions) == n
                             for t, n in partitions.items()), 30, "topic metadata")  # fmt: skip

    def fill(self, topic: str, partition: int, count: int, start: int = 0) -> None:
        """Writes values ``start .. start+count-1`` (as text) to one partition and waits for the acks."""
        producer = self._plain_producer()
        for i in range(start, start + count):
            producer.produce(topic, str(i).encode(), partition=partition)
        if producer.flush(30) != 0:
            raise RuntimeError(f"records to {topic}-{partition} not acknowledged")

    def _plain_producer(self) -> Producer:
        if not hasattr(self, "_filler"):
            self._filler = self.producer()
        return self._filler

    def committed(self, group: str, partitions: list[tuple[str, int]], stable: bool = False) -> dict[str, Any]:
        """The group's committed offsets read back by the admin client (ListConsumerGroupOffsets), as
        ``{"topic-partition": offset}`` (-1001 = none; a partition's error in its place)."""
        request = ConsumerGroupTopicPartitions(group, [TopicPartition(t, p) for t, p in partitions])
        futures = self.admin().list_consumer_group_offsets([request], require_stable=stable)
        result = futures[group].result(30)
        return {f"{tp.topic}-{tp.partition}": tp.offset if tp.error is None else describe_error(tp.error)
                for tp in result.topic_partitions}  # fmt: skip

    def settled(self, group: str, partitions: list[tuple[str, int]], timeout: float = 10) -> dict[str, Any]:
        """The stable committed offsets (require_stable), asked again while the broker answers
        UNSTABLE_OFFSET_COMMIT (a transaction's markers not yet written)."""
        answer = self.committed(group, partitions, stable=True)
        deadline = time.monotonic() + timeout
        while any("UNSTABLE" in str(v) for v in answer.values()) and time.monotonic() < deadline:
            time.sleep(0.1)
            answer = self.committed(group, partitions, stable=True)
        return answer

    def describe(self, group: str) -> Any:
        return self.admin().describe_consumer_groups([group])[group].result(30)

    def close_all(self) -> None:
        for client in reversed(self._clients):
            try:
                if isinstance(client, Consumer):
                    client.close()
                else:
                    client.flush(5)
            except (KafkaException, RuntimeError):
                pass  # already closed, or fenced: nothing left to release
        self._clients.clear()
        self._admin = None
        self.__dict__.pop("_filler", None)


@contextmanager
def kafka(**properties: Any) -> Iterator[Lab]:
    """A started test broker (tests/kafka_broker.py settings plus ``properties``) on a fresh temporary
    directory; on exit its clients are closed, the broker stopped and the directory removed."""
    # SIGTERM (a `kill` of the script) unwinds like Ctrl-C, so the `finally` below still stops the broker
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    tmp = Path(tempfile.mkdtemp(prefix="task-assignment-exp-"))
    broker = make_broker(tmp / "kafka", properties=properties)
    lab: Lab | None = None
    try:
        started = time.monotonic()
        broker.start(timeout=90)
        print(f"[broker] Kafka 4.4 on {broker.bootstrap_servers}, up in {time.monotonic() - started:.1f} s")
        lab = Lab(broker.bootstrap_servers, broker.log_path)
        yield lab
    finally:
        try:
            if lab is not None:
                lab.close_all()
        finally:
            broker.stop()
            shutil.rmtree(tmp, ignore_errors=True)


def wait_for(
    predicate: Callable[[], bool], timeout: float, what: str, poll: Callable[[], object] | None = None
) -> float:
    """Calls ``poll`` (e.g. a consume of each member) until ``predicate()``; returns the seconds it took, or
    raises TimeoutError naming ``what``."""
    start = time.monotonic()
    while not predicate():
        if time.monotonic() - start > timeout:
            raise TimeoutError(f"{what}: not reached within {timeout} s")
        if poll is not None:
            poll()
        else:
            time.sleep(0.05)
    return time.monotonic() - start


def pump(*consumers: Consumer, timeout: float = 0.02) -> list[Message]:
    """One poll of each consumer (runs its callbacks); returns the records, errors left out."""
    out: list[Message] = []
    for consumer in consumers:
        for msg in consumer.consume(100, timeout):
            if msg.error() is None:
                out.append(msg)
    return out


def where(msg: Message) -> tuple[int, int]:
    """(partition, offset) of a fetched record."""
    partition, offset = msg.partition(), msg.offset()
    assert partition is not None and offset is not None
    return partition, offset


def describe_error(err: KafkaError | KafkaException | BaseException | None) -> str:
    """``NAME (code) retriable/abortable/fatal`` of a librdkafka error (or an exception carrying one)."""
    if err is None:
        return "no error"
    if isinstance(err, KafkaException):
        err = err.args[0]
    if not isinstance(err, KafkaError):
        return f"{type(err).__name__}: {err}"
    flags = [f for f, on in (("retriable", err.retriable()), ("txn_requires_abort", err.txn_requires_abort()),
                             ("fatal", err.fatal())) if on]  # fmt: skip
    return f"{err.name()} ({err.code()}) [{', '.join(flags) or 'not retriable, not abortable, not fatal'}]"


def commit_error(consumer: Consumer, offsets: list[TopicPartition]) -> str:
    """A synchronous commit of ``offsets``: "ok" or the error (request-level, else the first per-partition)."""
    try:
        result = consumer.commit(offsets=offsets, asynchronous=False)
    except KafkaException as e:
        return describe_error(e)
    errors = [tp.error for tp in result or [] if tp.error is not None]
    return describe_error(errors[0]) if errors else "ok"
