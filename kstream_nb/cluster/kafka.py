"""A real Kafka cluster through confluent-kafka (librdkafka): ``bootstrap_servers="host:port,..."``.

``KafkaCluster(bootstrap_servers, config)`` implements the cluster contract (``cluster/base.py``): it hands
out admins (``kafka_admin.py``), producers (``kafka_producer.py``) and consumers (``kafka_consumer.py``),
each given the settings meant for its kind of client (``kafka_config.py``), and shares one admin client
for metadata and offsets: offsets are listed with the partition leaders (ListOffsets), retried while a new
topic's leaders are still being elected. ``get_kafka_cluster`` keeps one instance per servers and settings;
``close_clusters`` (also run at exit) releases their shared clients.
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
import weakref
from collections.abc import Iterable, Mapping
from typing import Any

from confluent_kafka import IsolationLevel, KafkaError, KafkaException
from confluent_kafka import TopicPartition as CKTopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from kstream_nb.cluster.base import Cluster
from kstream_nb.cluster.kafka_admin import KafkaAdmin
from kstream_nb.cluster.kafka_config import CONSUMER_DEFAULTS, config_for
from kstream_nb.cluster.kafka_consumer import KafkaConsumer
from kstream_nb.cluster.kafka_errors import (
    AUTHENTICATION_ERRORS,
    LEADER_MOVING,
    authentication_error,
    error_code,
    kafka_error,
)
from kstream_nb.cluster.kafka_producer import KafkaProducer
from kstream_nb.cluster.records import TopicPartition
from kstream_nb.errors import StreamsError

log = logging.getLogger("kstream_nb.kafka")


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
                    err = kafka_error(e)
                    retriable = err is not None and (err.retriable() or err.code() in LEADER_MOVING)
                    if retriable and time.monotonic() < deadline:
                        pending.append(tp)
                        continue
                    raise StreamsError(f"cannot list offsets of {tp} on {self.bootstrap_servers}: {e}") from e
            if pending:
                time.sleep(0.05)
        return out

    def beginning_offsets(self, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        return self._listed_offsets(partitions, OffsetSpec.earliest()) if partitions else {}


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


__all__ = ["KafkaCluster", "close_clusters", "get_kafka_cluster"]
