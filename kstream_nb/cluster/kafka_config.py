"""What each confluent-kafka client of a ``KafkaCluster`` is given: its settings and its partitions.

The cluster's ``config`` (``security.protocol``, ``sasl.*``, ``ssl.*``, ...) goes to every admin, producer
and consumer; settings that only apply to consumers (``session.timeout.ms``, ``fetch.*``...) or only to
producers (``linger.ms``, ``acks``...) are kept away from the other kind of client so librdkafka does not
warn about them, and Kafka Streams' client prefixes (``producer.``, ``main.consumer.``...) address one kind
(StreamsConfig.producerPrefix & co). kstream_nb's own client defaults, and the conversions of partitions
and committed offsets to the client's ``TopicPartition``, are here too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from confluent_kafka import TopicPartition as CKTopicPartition

from kstream_nb.cluster.records import TopicPartition

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

#: kstream_nb's own defaults for its producers (a user's setting wins): Java's partitioner, so keyed records
#: land where Java clients and Kafka Streams put them (``cluster.partitioner.default_partition``).
PRODUCER_DEFAULTS = {"partitioner": "murmur2_random", "linger.ms": 5}


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


def with_metadata(tp: TopicPartition, offset: int, metadata: Mapping[TopicPartition, str] | None) -> Any:
    """The client's TopicPartition of a commit: the offset, and the partition's metadata when given."""
    given = (metadata or {}).get(tp)
    if given is None:
        return CKTopicPartition(tp.topic, tp.partition, offset)
    return CKTopicPartition(tp.topic, tp.partition, offset, given)
