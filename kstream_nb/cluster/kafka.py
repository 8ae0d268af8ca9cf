"""A real Kafka cluster through confluent-kafka (librdkafka): ``bootstrap_servers="host:port,..."``.

``KafkaCluster(bootstrap_servers, config)`` implements the cluster contract (``cluster/base.py``):

- every client setting passes through: ``config`` (``security.protocol``, ``sasl.*``, ``ssl.*``, ...) goes
  to every admin, producer and consumer of the cluster; settings that only apply to consumers
  (``session.timeout.ms``, ``fetch.*``...) or only to producers (``linger.ms``, ``acks``...) are kept away
  from the other kind of client so librdkafka does not warn about them;
- producers use Java's partitioner (``partitioner=murmur2_random``), so keyed records land where Java
  clients and Kafka Streams put them (``cluster.partitioner.default_partition``); a failed delivery is
  raised by the next ``send``/``flush``;
- offsets are listed with the partition leaders (ListOffsets), retried while a new topic's leaders are
  still being elected; ``create_topics`` returns once every partition of the new topics has a leader;
- librdkafka turns a record timestamp of 0 into "now": records produced with timestamp 0 get the
  current time (the embedded cluster keeps 0).

Consumers, and how stream tasks are assigned to group members, are in ``kafka_consumer.py``.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import threading
import time
import weakref
from collections.abc import Iterable, Mapping
from typing import Any

from confluent_kafka import IsolationLevel, KafkaError, KafkaException
from confluent_kafka import Producer as CKProducer
from confluent_kafka import TopicPartition as CKTopicPartition
from confluent_kafka.admin import (
    AdminClient,
    ConfigResource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
)

from kstream_nb.cluster.base import (
    Admin,
    Cluster,
    Producer,
    RecordMetadata,
    Sender,
    TopicDescription,
    TopicExistsError,
    TopicSpec,
)
from kstream_nb.cluster.kafka_consumer import (
    AUTHENTICATION_ERRORS,
    KafkaConsumer,
    authentication_error,
    with_metadata,
)
from kstream_nb.cluster.records import Headers, TopicPartition
from kstream_nb.errors import (
    BrokerUnavailableError,
    IllegalStateError,
    SerializationError,
    StreamsError,
    TransactionError,
    UnknownTopicError,
)

log = logging.getLogger("kstream_nb.kafka")

#: librdkafka's RD_KAFKA_PARTITION_UA: the partitioner picks the partition
_UNASSIGNED = -1

#: ListOffsets answers while a new topic's leader is being elected or a leader moves (librdkafka does not
#: flag them retriable in admin results)
_LEADER_MOVING = frozenset(
    {
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        KafkaError._NOENT,
    }
)

#: the transaction coordinator no longer holds the producer's transaction: it gave the transactional id a
#: newer epoch (the transaction timed out, or a newer producer registered) or lost its state (a restart
#: that aborted it); a new producer with the same transactional id can take over
_FENCED = frozenset(
    {
        KafkaError._FENCED,
        KafkaError.PRODUCER_FENCED,
        KafkaError.INVALID_PRODUCER_EPOCH,
        KafkaError.INVALID_TXN_STATE,
        KafkaError.INVALID_PRODUCER_ID_MAPPING,
        KafkaError.UNKNOWN_PRODUCER_ID,
    }
)

#: Settings librdkafka only knows for consumers (prefixes end with a dot).
CONSUMER_ONLY = (
    "group.",
    "session.timeout.ms",
    "heartbeat.interval.ms",
    "max.poll.interval.ms",
    "auto.offset.reset",
    "enable.auto.commit",
    "auto.commit.interval.ms",
    "enable.auto.offset.store",
    "partition.assignment.strategy",
    "fetch.",
    "queued.",
    "isolation.level",
    "enable.partition.eof",
    "check.crcs",
    "max.partition.fetch.bytes",
    "coordinator.query.interval.ms",
    "consume.callback.max.messages",
    "offset.store.",
    "auto.commit.enable",
    "on_commit",
)
#: Settings librdkafka only knows for producers.
PRODUCER_ONLY = (
    "partitioner",
    "linger.ms",
    "queue.buffering.",
    "batch.",
    "acks",
    "request.required.acks",
    "request.timeout.ms",
    "enable.idempotence",
    "enable.gapless.guarantee",
    "compression.",
    "message.timeout.ms",
    "delivery.timeout.ms",
    "transactional.id",
    "transaction.timeout.ms",
    "retries",
    "message.send.max.retries",
    "sticky.partitioning.linger.ms",
    "delivery.report.only.error",
    "on_delivery",
    "dr_cb",
    "dr_msg_cb",
    "produce.offset.report",
    "queuing.strategy",
)


#: kstream_nb's own defaults for its consumers (a user's setting wins). librdkafka waits
#: ``fetch.queue.backoff.ms`` (1 s by default) before fetching a partition again once its local queue is
#: over ``queued.min.messages``, which holds one consumer near 130k records/s on Kafka 4.4 however fast the
#: application is (librdkafka#2879); at 10 ms a bare consumer reads 450k/s there (bench/README.md).
CONSUMER_DEFAULTS = {"fetch.queue.backoff.ms": 10}


def _matches(key: str, names: tuple[str, ...]) -> bool:
    return any(key.startswith(n) if n.endswith(".") else key == n for n in names)


#: Kafka Streams' client prefixes (StreamsConfig.producerPrefix & co): ``producer.linger.ms`` goes to
#: producers only, as ``linger.ms``; ``main.consumer.`` to group members, ``restore.consumer.`` to the
#: readers of assigned partitions (store restore, ``read_topic``); later entries win
ROLE_PREFIXES = {
    "producer": ("producer.",),
    "consumer": ("consumer.", "main.consumer."),
    "reader": ("consumer.", "restore.consumer."),
    "admin": ("admin.",),
}
_ALL_PREFIXES = tuple({prefix for prefixes in ROLE_PREFIXES.values() for prefix in prefixes})


def config_for(role: str, *configs: Mapping[str, Any] | None) -> dict[str, Any]:
    """Merges configs (later wins), keeps the settings that apply to ``role`` and unwraps its prefixes.

    ``role`` is ``"consumer"`` (a group member), ``"reader"`` (a consumer of assigned partitions),
    ``"producer"`` or ``"admin"``. Unprefixed settings that only concern the other kind of client are
    dropped; prefixed ones (``ROLE_PREFIXES``) override unprefixed ones, as in Kafka Streams.
    """
    merged: dict[str, Any] = {}
    for config in configs:
        if config:
            merged.update(config)
    drop: tuple[str, ...] = ()
    if role in ("consumer", "reader"):
        drop = PRODUCER_ONLY
    elif role == "producer":
        drop = CONSUMER_ONLY
    elif role == "admin":
        drop = CONSUMER_ONLY + PRODUCER_ONLY
    out = {k: v for k, v in merged.items() if not _matches(k, drop) and not k.startswith(_ALL_PREFIXES)}
    for prefix in ROLE_PREFIXES[role]:
        out.update({k[len(prefix) :]: v for k, v in merged.items() if k.startswith(prefix)})
    return out


def error_code(exc: BaseException) -> int | None:
    """The librdkafka error code of a KafkaException (None for other exceptions)."""
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return int(exc.args[0].code())
    return None


def as_tp(tp: Any) -> TopicPartition:
    return tp if isinstance(tp, TopicPartition) else TopicPartition(*tp)


class KafkaCluster(Cluster):
    """A Kafka cluster reached through confluent-kafka; ``config`` is given to every client.

    One admin client and one end-offset probe consumer are shared by the cluster's ``Admin`` views;
    ``close()`` (also run at exit) releases them.
    """

    supports_transactions = True
    runs_group_assignor = False

    def __init__(
        self, bootstrap_servers: str, config: Mapping[str, Any] | None = None, *, timeout_s: float = 30.0
    ) -> None:
        if not isinstance(bootstrap_servers, str) or not bootstrap_servers.strip():
            raise StreamsError(f"bootstrap_servers must be 'host:port[,host:port...]', got {bootstrap_servers!r}")
        self.bootstrap_servers = bootstrap_servers.strip()
        self.config: dict[str, Any] = {
            "logger": logging.getLogger("kstream_nb.librdkafka"),
            **(config or {}),
            "bootstrap.servers": self.bootstrap_servers,
        }
        self.timeout_s = timeout_s
        self._lock = threading.RLock()
        self._admin_client: AdminClient | None = None
        self._auth_error: str | None = None  # a refused login, noted by the admin client's error_cb
        _LIVE.add(self)

    def __repr__(self) -> str:
        return f"KafkaCluster({self.bootstrap_servers!r})"

    # ---- clients -------------------------------------------------------------------------------

    def admin(self) -> KafkaAdmin:
        return KafkaAdmin(self)

    def producer(self, config: Mapping[str, Any] | None = None) -> KafkaProducer:
        return KafkaProducer(self, config or {})

    def consumer(self, group_id: str | None, config: Mapping[str, Any] | None = None) -> KafkaConsumer:
        """A group member, or (``group_id=None``) a reader of manually assigned partitions.

        Readers (restoring stores, ``read_topic``) read to the end of partitions one after the other: a
        short ``fetch.wait.max.ms`` keeps the broker from holding their fetch at each partition's end.
        """
        defaults = dict(CONSUMER_DEFAULTS)
        if group_id is None:
            defaults["fetch.wait.max.ms"] = 20
        role = "reader" if group_id is None else "consumer"
        return KafkaConsumer(self, group_id, config_for(role, defaults, self.config, config))

    def reachable(self, timeout: float = 2.0) -> bool:
        """True when a broker answers a metadata request within ``timeout`` seconds. Raises
        ``AuthenticationError`` when the broker refused the client's credentials (retrying cannot help)."""
        client = self.admin_client()
        try:
            client.list_topics(timeout=timeout)
        except KafkaException as e:
            if error_code(e) == KafkaError._INVALID_ARG:  # a bad setting: retrying cannot help
                raise StreamsError(
                    f"invalid client setting for {self.bootstrap_servers}: {e.args[0].str()}"
                ) from e
            self._check_authentication(client)
            log.debug("%s not reachable: %s", self.bootstrap_servers, e)
            return False
        self._auth_error = None
        return True

    def _check_authentication(self, client: AdminClient) -> None:
        """After a failed request: raises ``AuthenticationError`` if the broker refused the credentials.
        librdkafka says so only through ``error_cb`` (run by ``poll``); the request itself just times out."""
        client.poll(0)
        error, self._auth_error = self._auth_error, None
        if error is not None:
            raise authentication_error(self.bootstrap_servers, error)

    def admin_client(self) -> AdminClient:
        with self._lock:
            if self._admin_client is None:
                conf = config_for("admin", self.config)
                conf.setdefault("allow.auto.create.topics", False)
                user_error_cb = conf.get("error_cb")

                def on_error(err: KafkaError) -> None:
                    if err.code() in AUTHENTICATION_ERRORS:
                        self._auth_error = err.str()
                    if user_error_cb is not None:
                        user_error_cb(err)

                conf["error_cb"] = on_error
                try:
                    self._admin_client = AdminClient(conf)
                except KafkaException as e:  # a setting librdkafka does not know or accept
                    raise StreamsError(f"invalid client setting for {self.bootstrap_servers}: {e}") from e
            return self._admin_client

    def close(self) -> None:
        """Lets go of the admin client (it reopens when used)."""
        with self._lock:
            self._admin_client = None

    # ---- metadata ------------------------------------------------------------------------------

    def partition_counts(self, topics: Iterable[str] | None = None, *, led: bool = False) -> dict[str, int]:
        """Partition counts of the given topics that exist (all topics when None), from one metadata call;
        with ``led``, only the partitions that have a leader are counted."""
        metadata = self._metadata()
        wanted = None if topics is None else set(topics)
        return {
            name: sum(1 for p in meta.partitions.values() if p.leader >= 0) if led else len(meta.partitions)
            for name, meta in metadata.topics.items()
            if meta.error is None and (wanted is None or name in wanted)
        }

    def _metadata(self, topic: str | None = None) -> Any:
        client = self.admin_client()
        client.poll(0)  # hands the client's queued log lines to Python logging
        deadline = time.monotonic() + self.timeout_s
        while True:
            # asked in slices of a second: a broker that refuses the credentials is reported at once
            try:
                return client.list_topics(topic=topic, timeout=max(0.1, min(1.0, deadline - time.monotonic())))
            except KafkaException as e:
                self._check_authentication(client)
                retriable = error_code(e) in (KafkaError._TRANSPORT, KafkaError._TIMED_OUT)
                if not retriable or time.monotonic() >= deadline:
                    raise StreamsError(f"cannot read metadata from {self.bootstrap_servers}: {e}") from e

    # ---- offsets ---------------------------------------------------------------------------------

    def end_offsets(self, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        """One past the last offset of each partition (its high watermark)."""
        return self._listed_offsets(partitions, OffsetSpec.latest()) if partitions else {}

    def _listed_offsets(
        self, partitions: list[TopicPartition], spec: Any, committed: bool = False
    ) -> dict[TopicPartition, int]:
        """ListOffsets for ``partitions`` (``committed``: as a read_committed consumer sees them); a
        retriable error (a leader moving or not yet elected) is asked again until ``timeout_s``."""
        isolation = IsolationLevel.READ_COMMITTED if committed else IsolationLevel.READ_UNCOMMITTED
        out: dict[TopicPartition, int] = {}
        pending = list(partitions)
        deadline = time.monotonic() + self.timeout_s
        while pending:
            request = {CKTopicPartition(tp.topic, tp.partition): spec for tp in pending}
            futures = self.admin_client().list_offsets(
                request, isolation_level=isolation, request_timeout=self.timeout_s
            )
            pending = []
            for ck_tp, future in futures.items():
                tp = TopicPartition(ck_tp.topic, ck_tp.partition)
                try:
                    out[tp] = int(future.result().offset)
                except KafkaException as e:
                    err = e.args[0] if e.args and isinstance(e.args[0], KafkaError) else None
                    retriable = err is not None and (err.retriable() or err.code() in _LEADER_MOVING)
                    if retriable and time.monotonic() < deadline:
                        pending.append(tp)
                        continue
                    raise StreamsError(f"cannot list offsets of {tp} on {self.bootstrap_servers}: {e}") from e
            if pending:
                time.sleep(0.05)
        return out

    def beginning_offsets(self, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        return self._listed_offsets(partitions, OffsetSpec.earliest()) if partitions else {}


class KafkaAdmin(Admin):
    """Topic administration through the cluster's shared AdminClient."""

    def __init__(self, cluster: KafkaCluster) -> None:
        self.cluster = cluster

    def _client(self) -> AdminClient:
        return self.cluster.admin_client()

    def create_topics(self, specs: Iterable[TopicSpec], exist_ok: bool = False) -> None:
        specs = list(specs)
        if not specs:
            return
        for spec in specs:
            if spec.partitions < 1:
                raise StreamsError(f"topic {spec.name!r}: partitions must be >= 1, got {spec.partitions}")
        new = [
            NewTopic(s.name, num_partitions=s.partitions, config={k: str(v) for k, v in s.config.items()})
            for s in specs
        ]
        futures = self._client().create_topics(new, request_timeout=self.cluster.timeout_s)
        created = []
        for name, future in futures.items():
            try:
                future.result()
                created.append(name)
            except KafkaException as e:
                if error_code(e) == KafkaError.TOPIC_ALREADY_EXISTS:
                    if exist_ok:
                        continue
                    raise TopicExistsError(name) from e
                self.cluster._check_authentication(self._client())  # a refused login only times out here
                raise StreamsError(f"cannot create topic {name!r} on {self.cluster.bootstrap_servers}: {e}") from e
        wanted = {s.name: s.partitions for s in specs if s.name in created}
        self._wait_for(
            lambda led: all(led.get(n, 0) >= p for n, p in wanted.items()), f"topics {created} to get leaders"
        )

    def _wait_for(self, done: Any, what: str) -> None:
        """Waits until ``done(counts)`` holds for the counts of partitions that have a leader."""
        deadline = time.monotonic() + self.cluster.timeout_s
        while not done(self.cluster.partition_counts(led=True)):
            if time.monotonic() > deadline:
                raise StreamsError(f"timed out waiting for {what} on {self.cluster.bootstrap_servers}")
            time.sleep(0.02)

    def list_topics(self) -> list[str]:
        return sorted(t for t in self.cluster.partition_counts() if not t.startswith("__"))

    def describe_topic(self, name: str) -> TopicDescription:
        count = self.partition_count(name)
        if count is None:
            raise UnknownTopicError(name, f"topic {name!r} does not exist on {self.cluster.bootstrap_servers}")
        tps = [TopicPartition(name, p) for p in range(count)]
        begins = self.beginning_offsets(tps)
        ends = self.end_offsets(tps)
        return TopicDescription(
            name, count, self.topic_config(name), tuple(begins[tp] for tp in tps), tuple(ends[tp] for tp in tps)
        )

    def topic_config(self, name: str) -> dict[str, str]:
        """Every config the broker reports for topic ``name``, defaults included; empty when the broker does
        not answer."""
        resource = ConfigResource("topic", name)
        config: dict[str, str] = {}
        try:
            entries = self._client().describe_configs([resource], request_timeout=self.cluster.timeout_s)[resource]
            for key, entry in entries.result().items():
                if entry.value is not None:
                    config[key] = entry.value
        except KafkaException as e:
            log.debug("describe_configs(%s) failed: %s", name, e)
        return config

    def delete_topics(self, names: Iterable[str]) -> None:
        names = list(names)
        if not names:
            return
        for name in names:
            if self.partition_count(name) is None:
                raise UnknownTopicError(name, f"topic {name!r} does not exist on {self.cluster.bootstrap_servers}")
        futures = self._client().delete_topics(names, request_timeout=self.cluster.timeout_s)
        for name, future in futures.items():
            try:
                future.result()
            except KafkaException as e:
                raise StreamsError(f"cannot delete topic {name!r}: {e}") from e
        self._wait_for(lambda counts: not any(n in counts for n in names), f"topics {names} to disappear")

    def partition_count(self, name: str) -> int | None:
        meta = self.cluster._metadata(name).topics.get(name)
        if meta is None:
            return None
        if meta.error is not None:
            if meta.error.code() in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC):
                return None
            raise StreamsError(f"cannot read the metadata of topic {name!r}: {meta.error.str()}")
        return len(meta.partitions)

    def create_partitions(self, name: str, new_total: int) -> None:
        count = self.partition_count(name)
        if count is None:
            raise UnknownTopicError(name, f"topic {name!r} does not exist on {self.cluster.bootstrap_servers}")
        if new_total <= count:
            raise StreamsError(f"topic {name!r} has {count} partitions; new total {new_total} must be larger")
        futures = self._client().create_partitions(
            [NewPartitions(name, new_total)], request_timeout=self.cluster.timeout_s
        )
        for future in futures.values():
            try:
                future.result()
            except KafkaException as e:
                raise StreamsError(f"cannot grow topic {name!r} to {new_total} partitions: {e}") from e
        self._wait_for(lambda counts: counts.get(name, 0) >= new_total, f"topic {name!r} to grow")

    def _checked(self, partitions: Iterable[TopicPartition]) -> list[TopicPartition]:
        tps = [as_tp(tp) for tp in partitions]
        counts = self.cluster.partition_counts({tp.topic for tp in tps})
        for tp in tps:
            if tp.topic not in counts:
                raise UnknownTopicError(
                    tp.topic, f"topic {tp.topic!r} does not exist on {self.cluster.bootstrap_servers}"
                )
            if not 0 <= tp.partition < counts[tp.topic]:
                raise StreamsError(f"topic {tp.topic!r} has no partition {tp.partition}")
        return tps

    def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return self.cluster.end_offsets(self._checked(partitions))

    def beginning_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return self.cluster.beginning_offsets(self._checked(partitions))

    def committed_end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return self.cluster._listed_offsets(self._checked(partitions), OffsetSpec.latest(), committed=True)

    def offsets_for_time(
        self, partitions: Iterable[TopicPartition], timestamp_ms: int
    ) -> dict[TopicPartition, int]:
        """From the brokers' time indexes (ListOffsets by timestamp); the end offset where none is that new."""
        tps = self._checked(partitions)
        found = self.cluster._listed_offsets(tps, OffsetSpec.for_timestamp(int(timestamp_ms)))
        missing = [tp for tp, offset in found.items() if offset < 0]
        return {**found, **self.cluster.end_offsets(missing)} if missing else found

    def group_offsets(self, group_id: str) -> dict[TopicPartition, int]:
        """The committed offsets of a consumer group (empty when it has none)."""
        from confluent_kafka import ConsumerGroupTopicPartitions

        futures = self._client().list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group_id)], request_timeout=self.cluster.timeout_s
        )
        result = futures[group_id].result()
        return dict(
            sorted(
                (TopicPartition(tp.topic, tp.partition), int(tp.offset))
                for tp in result.topic_partitions or []
                if tp.offset is not None and tp.offset >= 0
            )
        )


def _as_bytes(topic: str, what: str, data: Any) -> bytes | None:
    if data is None or isinstance(data, bytes):
        return data
    if isinstance(data, bytearray | memoryview):
        return bytes(data)
    raise SerializationError(
        f"the {what} sent to topic {topic!r} is a {type(data).__name__}, not bytes; serialize it with a serde"
    )


#: what librdkafka reports for the records ``purge`` dropped (not delivery failures)
_PURGED = (KafkaError._PURGE_QUEUE, KafkaError._PURGE_INFLIGHT)


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
        conf = config_for(
            "producer",
            {"partitioner": "murmur2_random", "linger.ms": 5},
            cluster.config,
            config,
        )
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
        if err is not None and self._error is None and err.code() not in _PURGED:
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
                key = _as_bytes(topic, "key", key)
            if value is not None and value.__class__ is not bytes:
                value = _as_bytes(topic, "value", value)
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
    err = cause.args[0] if cause.args and isinstance(cause.args[0], KafkaError) else None
    detail = err.str() if err is not None else str(cause)
    return TransactionError(
        f"transactional producer {transactional_id!r}: {what} failed: {detail}",
        fatal=bool(err is not None and err.fatal()),
        fenced=bool(err is not None and err.code() in _FENCED),
        abortable=bool(err is not None and err.txn_requires_abort()),
        retriable=bool(err is not None and err.retriable()),
        code=None if err is None else err.code(),
    )


def as_offsets(offsets: Mapping[TopicPartition, int]) -> list[tuple[TopicPartition, int]]:
    return [(as_tp(tp), off) for tp, off in offsets.items()]


_LIVE: weakref.WeakSet[KafkaCluster] = weakref.WeakSet()
_REGISTRY: dict[tuple[str, tuple[tuple[str, Any], ...]], KafkaCluster] = {}
_REGISTRY_LOCK = threading.Lock()


def _key(bootstrap_servers: str, config: Mapping[str, Any]) -> tuple[str, tuple[tuple[str, Any], ...]]:
    items = []
    for k, v in sorted(config.items()):
        try:
            hash(v)
        except TypeError:
            v = ("id", id(v))
        items.append((k, v))
    return bootstrap_servers.strip(), tuple(items)


def get_kafka_cluster(bootstrap_servers: str, config: Mapping[str, Any] | None = None) -> KafkaCluster:
    """The KafkaCluster for these servers and settings (one shared instance per distinct pair)."""
    key = _key(bootstrap_servers, config or {})
    with _REGISTRY_LOCK:
        cluster = _REGISTRY.get(key)
        if cluster is None:
            cluster = _REGISTRY[key] = KafkaCluster(bootstrap_servers, config)
        return cluster


def close_clusters(bootstrap_servers: str | None = None) -> None:
    """Closes the shared clients of the Kafka clusters (of these servers only, when given).

    A closed cluster opens its clients again when it is used again.
    """
    for cluster in list(_LIVE):
        if bootstrap_servers is None or cluster.bootstrap_servers == bootstrap_servers.strip():
            cluster.close()


atexit.register(close_clusters)


__all__ = [
    "BrokerUnavailableError",
    "KafkaAdmin",
    "KafkaCluster",
    "KafkaConsumer",
    "KafkaProducer",
    "TransactionError",
    "close_clusters",
    "config_for",
    "get_kafka_cluster",
]
