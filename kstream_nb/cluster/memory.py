"""The embedded in-process cluster (``memory://NAME``): admin, producer and consumer over memory logs."""

from __future__ import annotations

import itertools
import re
import threading
from collections.abc import Iterable, Mapping
from typing import Any

from kstream_nb.cluster.base import (
    Admin,
    Cluster,
    Producer,
    RecordMetadata,
    TopicDescription,
    TopicExistsError,
    TopicSpec,
)
from kstream_nb.cluster.memory_consumer import MemoryConsumer
from kstream_nb.cluster.memory_group import ConsumerGroup
from kstream_nb.cluster.memory_log import DEFAULT_SEGMENT_RECORDS, PartitionLog, TopicLog
from kstream_nb.cluster.partitioner import default_partition
from kstream_nb.cluster.records import ColumnarBatch, Headers, TopicPartition, as_bytes, as_tp, normalize_headers
from kstream_nb.errors import IllegalStateError, StreamsError, UnknownTopicError

MEMORY_SCHEME = "memory://"
_TOPIC_NAME = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")


class MemoryCluster(Cluster):
    """A real partitioned log inside the process: topics, offsets, compaction, consumer groups."""

    def __init__(
        self,
        name: str = "",
        *,
        auto_create_topics: bool = True,
        num_partitions: int = 1,
        segment_records: int = DEFAULT_SEGMENT_RECORDS,
    ) -> None:
        self.name = name
        self.bootstrap_servers = MEMORY_SCHEME + name
        self.auto_create_topics = auto_create_topics
        self.num_partitions = num_partitions
        self.segment_records = segment_records
        self.cond = threading.Condition(threading.Lock())
        self.waiters = 0
        self._meta_lock = threading.RLock()
        self._topics: dict[str, TopicLog] = {}
        self._groups: dict[str, ConsumerGroup] = {}
        self._client_ids = iter(range(1, 1 << 62))

    def __repr__(self) -> str:
        return f"MemoryCluster({self.bootstrap_servers!r}, topics={sorted(self._topics)})"

    def admin(self) -> MemoryAdmin:
        return MemoryAdmin(self)

    def producer(self, config: Mapping[str, Any] | None = None) -> MemoryProducer:
        return MemoryProducer(self, config or {})

    def consumer(self, group_id: str | None, config: Mapping[str, Any] | None = None) -> MemoryConsumer:
        return MemoryConsumer(self, group_id, config or {})

    def compact(self, topic: str | None = None, roll: bool = False) -> int:
        """Runs the log cleaner on compacted topics (``roll`` first closes the active segments)."""
        removed = 0
        for log in self._logs(topic):
            for part in log.partitions:
                if roll:
                    part.roll()
                removed += part.compact()
        return removed

    def apply_retention(self, topic: str | None = None, roll: bool = False) -> int:
        """Drops expired segments of ``delete`` topics now; returns the number of records dropped."""
        dropped = 0
        for log in self._logs(topic):
            for part in log.partitions:
                if roll:
                    part.roll()
                dropped += part.apply_retention()
        return dropped

    def _logs(self, topic: str | None) -> list[TopicLog]:
        with self._meta_lock:
            if topic is None:
                return list(self._topics.values())
            return [self.topic_log(topic)]

    def topic_log(self, name: str) -> TopicLog:
        log = self._topics.get(name)
        if log is None:
            raise UnknownTopicError(name, f"topic {name!r} does not exist on {self.bootstrap_servers}")
        return log

    def topic_for_produce(self, name: str) -> TopicLog:
        """The topic's log, auto-creating it like a broker with auto.create.topics.enable."""
        log = self._topics.get(name)
        if log is not None:
            return log
        if not self.auto_create_topics:
            raise UnknownTopicError(name, f"topic {name!r} does not exist on {self.bootstrap_servers}")
        self.create_topics([TopicSpec(name, self.num_partitions)], exist_ok=True)
        return self._topics[name]

    def partition_log(self, tp: TopicPartition) -> PartitionLog | None:
        log = self._topics.get(tp.topic)
        if log is None or not 0 <= tp.partition < len(log.partitions):
            return None
        return log.partitions[tp.partition]

    def partition_counts(self, topics: Iterable[str]) -> dict[str, int]:
        with self._meta_lock:
            return {t: len(self._topics[t].partitions) for t in topics if t in self._topics}

    def notify(self) -> None:
        """Wakes consumers waiting in poll."""
        with self.cond:
            self.cond.notify_all()

    def group(self, group_id: str) -> ConsumerGroup:
        """The group (created on first use); call with ``cond`` held."""
        group = self._groups.get(group_id)
        if group is None:
            group = self._groups[group_id] = ConsumerGroup(group_id)
        return group

    def next_client_id(self) -> str:
        return f"consumer-{next(self._client_ids)}"

    def create_topics(self, specs: Iterable[TopicSpec], exist_ok: bool = False) -> None:
        specs = list(specs)
        with self._meta_lock:
            logs = []
            for spec in specs:
                if not _TOPIC_NAME.match(spec.name) or spec.name in (".", ".."):
                    raise StreamsError(
                        f"invalid topic name {spec.name!r}: use 1-249 characters of a-z, A-Z, 0-9, '.', '_', '-'"
                    )
                if spec.partitions < 1:
                    raise StreamsError(f"topic {spec.name!r}: partitions must be >= 1, got {spec.partitions}")
                if spec.name in self._topics:
                    if exist_ok:
                        continue
                    raise TopicExistsError(spec.name)
                logs.append(TopicLog(spec.name, spec.partitions, spec.config, self.segment_records))
            for log in logs:
                self._topics[log.name] = log
        self._topics_changed({log.name for log in logs})

    def delete_topics(self, names: Iterable[str]) -> None:
        names = list(names)
        with self._meta_lock:
            for name in names:
                self.topic_log(name)
            for name in names:
                del self._topics[name]
        with self.cond:
            for group in self._groups.values():
                for tp in [tp for tp in group.offsets if tp.topic in names]:
                    del group.offsets[tp]
        self._topics_changed(set(names))

    def create_partitions(self, name: str, new_total: int) -> None:
        with self._meta_lock:
            log = self.topic_log(name)
            if new_total <= len(log.partitions):
                raise StreamsError(
                    f"topic {name!r} has {len(log.partitions)} partitions; new total {new_total} must be larger"
                )
            log.add_partitions(new_total)
        self._topics_changed({name})

    def _topics_changed(self, names: set[str]) -> None:
        if not names:
            return
        with self.cond:
            for group in self._groups.values():
                if group.members and group.topics & names:
                    group.trigger()
            self.cond.notify_all()


class MemoryAdmin(Admin):
    """Topic and group administration of a MemoryCluster."""

    def __init__(self, cluster: MemoryCluster) -> None:
        self.cluster = cluster

    def create_topics(self, specs: Iterable[TopicSpec], exist_ok: bool = False) -> None:
        self.cluster.create_topics(specs, exist_ok)

    def list_topics(self) -> list[str]:
        return sorted(self.cluster._topics)

    def describe_topic(self, name: str) -> TopicDescription:
        log = self.cluster.topic_log(name)
        parts = list(log.partitions)
        return TopicDescription(
            name,
            len(parts),
            dict(log.raw_config),
            tuple(p.start_offset for p in parts),
            tuple(p.end_offset for p in parts),
        )

    def delete_topics(self, names: Iterable[str]) -> None:
        self.cluster.delete_topics(names)

    def partition_count(self, name: str) -> int | None:
        log = self.cluster._topics.get(name)
        return None if log is None else len(log.partitions)

    def create_partitions(self, name: str, new_total: int) -> None:
        self.cluster.create_partitions(name, new_total)

    def _log(self, tp: TopicPartition) -> PartitionLog:
        log = self.cluster.partition_log(tp)
        if log is None:
            self.cluster.topic_log(tp.topic)
            raise StreamsError(f"topic {tp.topic!r} has no partition {tp.partition}")
        return log

    def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: self._log(tp).end_offset for tp in map(as_tp, partitions)}

    def beginning_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: self._log(tp).start_offset for tp in map(as_tp, partitions)}

    def offsets_for_time(
        self, partitions: Iterable[TopicPartition], timestamp_ms: int
    ) -> dict[TopicPartition, int]:
        """From each partition's time index (``PartitionLog.offset_for_time``), as Kafka answers it."""
        return {tp: self._log(tp).offset_for_time(int(timestamp_ms)) for tp in map(as_tp, partitions)}

    def list_groups(self) -> list[str]:
        """Groups that have members or committed offsets."""
        with self.cluster.cond:
            return sorted(g.group_id for g in self.cluster._groups.values() if g.members or g.offsets)

    def group_offsets(self, group_id: str) -> dict[TopicPartition, int]:
        """The committed offsets of a group (empty when it has none)."""
        with self.cluster.cond:
            group = self.cluster._groups.get(group_id)
            return dict(sorted(group.offsets.items())) if group else {}

    def group_members(self, group_id: str) -> dict[str, frozenset[TopicPartition]]:
        """Member id -> partitions it currently owns."""
        with self.cluster.cond:
            group = self.cluster._groups.get(group_id)
            return group.assignments() if group else {}

    def delete_group(self, group_id: str) -> None:
        """Forgets a group's committed offsets; refused while the group has members (as in Kafka)."""
        with self.cluster.cond:
            group = self.cluster._groups.get(group_id)
            if group is None:
                return
            if group.members:
                raise StreamsError(
                    f"group {group_id!r} still has {len(group.members)} active member(s); close them first"
                )
            del self.cluster._groups[group_id]


class MemoryProducer(Producer):
    """Appends synchronously to the partition logs; thread-safe."""

    def __init__(self, cluster: MemoryCluster, config: Mapping[str, Any]) -> None:
        self.cluster = cluster
        self.config = dict(config)
        self._round_robin: dict[str, itertools.count[int]] = {}
        self._closed = False

    def _partition_for(self, topic: str, key: bytes | None, partition: int | None, count: int) -> int:
        if partition is None:
            if key is not None:
                return default_partition(key, count)
            counter = self._round_robin.get(topic) or self._round_robin.setdefault(topic, itertools.count())
            return next(counter) % count
        if not isinstance(partition, int) or not 0 <= partition < count:
            raise StreamsError(f"topic {topic!r} has no partition {partition} (it has {count} partitions)")
        return partition

    def send(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        timestamp: int | None = None,
        headers: Headers = (),
        partition: int | None = None,
    ) -> RecordMetadata:
        if self._closed:
            raise IllegalStateError("cannot send: the producer is closed")
        key = as_bytes(topic, "key", key)
        value = as_bytes(topic, "value", value)
        log = self.cluster.topic_for_produce(topic)
        parts = log.partitions
        p = self._partition_for(topic, key, partition, len(parts))
        offset, ts = parts[p].append(
            key, value, None if timestamp is None else int(timestamp), normalize_headers(headers)
        )
        if self.cluster.waiters:
            self.cluster.notify()
        return RecordMetadata(topic, p, offset, ts)

    def send_batch(
        self, topic: str, records: list[tuple[bytes | None, bytes | None, int | None, Headers, int | None]]
    ) -> None:
        if self._closed:
            raise IllegalStateError("cannot send: the producer is closed")
        log = self.cluster.topic_for_produce(topic)
        parts = log.partitions
        count = len(parts)
        by_partition: dict[int, list[tuple[bytes | None, bytes | None, int | None, Headers]]] = {}
        for key, value, timestamp, headers, partition in records:
            if key is not None and type(key) is not bytes:
                key = as_bytes(topic, "key", key)
            if value is not None and type(value) is not bytes:
                value = as_bytes(topic, "value", value)
            if partition is None and key is not None:
                p = default_partition(key, count)
            else:
                p = self._partition_for(topic, key, partition, count)
            items = by_partition.get(p)
            if items is None:
                items = by_partition[p] = []
            items.append(
                (
                    key,
                    value,
                    None if timestamp is None else int(timestamp),
                    normalize_headers(headers) if headers else (),
                )
            )
        for p, items in by_partition.items():
            parts[p].append_many(items)
        if self.cluster.waiters:
            self.cluster.notify()

    def send_columnar(self, topic: str, batch: ColumnarBatch, partition: int) -> None:
        if self._closed:
            raise IllegalStateError("cannot send: the producer is closed")
        log = self.cluster.topic_for_produce(topic)
        p = self._partition_for(topic, None, partition, len(log.partitions))
        log.partitions[p].append_columnar(batch)
        if self.cluster.waiters:
            self.cluster.notify()

    def flush(self, timeout: float = 30.0) -> None:
        return None

    def close(self, timeout: float = 30.0) -> None:
        self._closed = True


_REGISTRY: dict[str, MemoryCluster] = {}
_REGISTRY_LOCK = threading.Lock()


def cluster_name(bootstrap_servers: str) -> str:
    """The cluster name of ``memory://NAME``; raises ValueError for other bootstrap strings."""
    if not isinstance(bootstrap_servers, str) or not bootstrap_servers.startswith(MEMORY_SCHEME):
        raise ValueError(f"not an embedded cluster address (memory://NAME): {bootstrap_servers!r}")
    return bootstrap_servers[len(MEMORY_SCHEME) :].strip().rstrip("/")


def get_cluster(bootstrap_servers: str = MEMORY_SCHEME) -> MemoryCluster:
    """The embedded cluster named by ``memory://NAME``; the same instance for the same name."""
    name = cluster_name(bootstrap_servers)
    with _REGISTRY_LOCK:
        cluster = _REGISTRY.get(name)
        if cluster is None:
            cluster = _REGISTRY[name] = MemoryCluster(name)
        return cluster


def reset_cluster(bootstrap_servers: str = MEMORY_SCHEME) -> None:
    """Forgets the embedded cluster of that name; the next ``get_cluster`` starts empty."""
    name = cluster_name(bootstrap_servers)
    with _REGISTRY_LOCK:
        _REGISTRY.pop(name, None)
