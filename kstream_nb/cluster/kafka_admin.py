"""Topic administration on a Kafka cluster: Kafka's Admin client, as Kafka Streams' InternalTopicManager uses it.

``KafkaAdmin`` creates, describes, grows and deletes topics through the cluster's shared confluent-kafka
``AdminClient`` and lists offsets (ListOffsets with the partition leaders, by time, read_committed, and a
group's committed offsets). ``create_topics``, ``create_partitions`` and ``delete_topics`` return once the
metadata shows the change (every new partition has a leader), so the next client sees it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, NewTopic, OffsetSpec

from kstream_nb.cluster.base import Admin, TopicDescription, TopicExistsError, TopicSpec
from kstream_nb.cluster.kafka_errors import MISSING_TOPIC_ERRORS, error_code
from kstream_nb.cluster.records import TopicPartition, as_tp
from kstream_nb.errors import StreamsError, UnknownTopicError

if TYPE_CHECKING:
    from kstream_nb.cluster.kafka import KafkaCluster

log = logging.getLogger("kstream_nb.kafka")


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
            if meta.error.code() in MISSING_TOPIC_ERRORS:
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
        return dict(
            sorted(
                (TopicPartition(tp.topic, tp.partition), int(tp.offset))
                for tp in self.committed_partitions(group_id)
                if tp.offset is not None and tp.offset >= 0
            )
        )

    def committed_partitions(
        self, group_id: str, tps: Iterable[TopicPartition] | None = None, require_stable: bool = False
    ) -> list[Any]:
        """confluent-kafka's TopicPartitions (offset and metadata) the group committed, for ``tps`` or all;
        ``require_stable``: only once no transaction holding offsets for them is open. A partition answered
        with an error (``UNSTABLE_OFFSET_COMMIT`` while such a transaction is open: the admin client does not
        wait for it) raises that error as a ``KafkaException``: its offset (-1001) is no committed offset."""
        from confluent_kafka import ConsumerGroupTopicPartitions
        from confluent_kafka import TopicPartition as CKTopicPartition

        asked = None if tps is None else [CKTopicPartition(tp.topic, tp.partition) for tp in tps]
        futures = self._client().list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group_id, asked)],
            require_stable=require_stable,
            request_timeout=self.cluster.timeout_s,
        )
        answer = list(futures[group_id].result().topic_partitions or [])
        for tp in answer:
            if tp.error is not None:
                raise KafkaException(tp.error)
        return answer

    def group_members(self, group_id: str) -> dict[str, frozenset[TopicPartition]]:
        """Member id -> partitions it owns, from DescribeConsumerGroups (a group without members: empty)."""
        futures = self._client().describe_consumer_groups([group_id], request_timeout=self.cluster.timeout_s)
        try:
            description = futures[group_id].result()
        except KafkaException as e:
            if error_code(e) == KafkaError.GROUP_ID_NOT_FOUND:
                return {}
            raise StreamsError(
                f"cannot describe group {group_id!r} on {self.cluster.bootstrap_servers}: {e}"
            ) from e
        return {
            member.member_id: frozenset(
                TopicPartition(tp.topic, tp.partition) for tp in member.assignment.topic_partitions or []
            )
            for member in description.members or []
        }
