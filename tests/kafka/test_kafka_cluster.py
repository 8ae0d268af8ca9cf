"""The Kafka adapter on a real broker: admin, producer (Java's partitioner), consumers, groups, settings."""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
import pytest

import kstream_nb as ks
from kstream_nb.cluster import connect
from kstream_nb.cluster.base import TopicExistsError, TopicSpec
from kstream_nb.cluster.kafka import KafkaCluster, get_kafka_cluster
from kstream_nb.cluster.kafka_config import config_for
from kstream_nb.cluster.kafka_consumer import KafkaConsumer
from kstream_nb.cluster.partitioner import default_partition
from kstream_nb.cluster.records import ColumnarBatch, TopicPartition
from kstream_nb.cluster.serde_specs import serde_from
from kstream_nb.errors import IllegalStateError, SerializationError, StreamsError, UnknownTopicError
from kstream_nb.runtime.record_collector import ProducerCollector

pytestmark = pytest.mark.kafka


@pytest.fixture
def cluster(kafka_bootstrap: str) -> KafkaCluster:
    return get_kafka_cluster(kafka_bootstrap, {"fetch.wait.max.ms": 10})


def _read_all(consumer: KafkaConsumer, tps: list[TopicPartition], ends: dict[TopicPartition, int]) -> list:
    records = []
    deadline = time.monotonic() + 20
    while any(consumer.position(tp) < ends[tp] for tp in tps):
        assert time.monotonic() < deadline, "reading timed out"
        for batch in consumer.poll(0.5):
            records.extend(batch.records)
    return records


def test_connect_picks_kafka_for_host_port(kafka_bootstrap: str) -> None:
    cluster = connect(kafka_bootstrap, {"client.id": "x"})
    assert isinstance(cluster, KafkaCluster)
    assert connect(kafka_bootstrap, {"client.id": "x"}) is cluster
    assert connect(kafka_bootstrap) is not cluster
    with pytest.raises(StreamsError, match="bootstrap_servers"):
        connect("")


def test_settings_pass_through_and_each_kind_of_client_gets_its_own() -> None:
    base = {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "ssl.ca.location": "/ca.pem",
            "session.timeout.ms": 6000, "linger.ms": 20}  # fmt: skip
    consumer = config_for("consumer", base, {"client.id": "c"})
    producer = config_for("producer", base)
    admin = config_for("admin", base)
    for conf in (consumer, producer, admin):
        assert conf["security.protocol"] == "SASL_SSL"
        assert conf["sasl.mechanism"] == "PLAIN" and conf["ssl.ca.location"] == "/ca.pem"
    assert consumer["session.timeout.ms"] == 6000 and "linger.ms" not in consumer
    assert producer["linger.ms"] == 20 and "session.timeout.ms" not in producer
    assert "linger.ms" not in admin and "session.timeout.ms" not in admin


def test_a_bad_setting_is_reported_by_name(kafka_bootstrap: str) -> None:
    cluster = KafkaCluster(kafka_bootstrap, {"security.protocol": "carrier-pigeon"})
    with pytest.raises(Exception, match=r"security\.protocol"):
        cluster.producer()


def test_admin_creates_describes_grows_and_deletes_topics(cluster: KafkaCluster, names) -> None:
    admin = cluster.admin()
    a, b = names("a"), names("b")
    admin.create_topics([TopicSpec(a, 3, {"cleanup.policy": "compact"}), TopicSpec(b)])
    assert {a, b} <= set(admin.list_topics())
    assert admin.partition_count(a) == 3
    assert admin.partition_count(names("missing")) is None
    assert names("missing") not in admin.list_topics()  # asking did not create it
    desc = admin.describe_topic(a)
    assert (desc.partitions, desc.config.get("cleanup.policy"), desc.end_offsets) == (3, "compact", (0, 0, 0))
    with pytest.raises(TopicExistsError, match=a):
        admin.create_topics([TopicSpec(a)])
    admin.create_topics([TopicSpec(a, 3)], exist_ok=True)
    admin.create_partitions(b, 2)
    assert admin.partition_count(b) == 2
    assert admin.describe_topic(b).end_offsets == (0, 0)
    with pytest.raises(StreamsError, match="must be larger"):
        admin.create_partitions(b, 2)
    admin.delete_topics([b])
    assert admin.partition_count(b) is None
    with pytest.raises(UnknownTopicError, match=b):
        admin.delete_topics([b])
    with pytest.raises(UnknownTopicError, match=b):
        admin.describe_topic(b)
    with pytest.raises(StreamsError, match="no partition 7"):
        admin.end_offsets([TopicPartition(a, 7)])


def test_end_offsets_are_one_past_the_last_record(cluster: KafkaCluster, names) -> None:
    """After each of several record batches, the end offset is one past the partition's last record."""
    admin = cluster.admin()
    topic = names("ends")
    admin.create_topics([TopicSpec(topic, 2)])
    producer = cluster.producer()
    written = 0
    for batch in range(1, 6):  # five separate batches: 1 + 2 + 3 + 4 + 5 records in partition 0
        for i in range(batch):
            producer.send(topic, b"k", b"v%d" % i, partition=0)
        producer.flush()
        written += batch
        tp0 = TopicPartition(topic, 0)
        assert admin.end_offsets([tp0]) == {tp0: written}
    ends = admin.end_offsets([TopicPartition(topic, 0), TopicPartition(topic, 1)])
    assert ends == {TopicPartition(topic, 0): 15, TopicPartition(topic, 1): 0}
    assert admin.beginning_offsets([TopicPartition(topic, 0)]) == {TopicPartition(topic, 0): 0}
    assert admin.describe_topic(topic).end_offsets == (15, 0)


def test_producer_puts_keys_where_java_does_and_consumer_reads_them_back(cluster: KafkaCluster, names) -> None:
    admin = cluster.admin()
    topic = names("keys")
    admin.create_topics([TopicSpec(topic, 5)])
    producer = cluster.producer()
    keys = [f"key-{i}".encode() for i in range(60)]
    producer.send_batch(topic, [(k, b"v-" + k, 1_000 + i, (("h", b"x"),), None) for i, k in enumerate(keys)])
    producer.send(topic, b"pinned", b"p", 5_000, (), 4)
    producer.flush()
    tps = [TopicPartition(topic, p) for p in range(5)]
    ends = admin.end_offsets(tps)
    assert sum(ends.values()) == 61

    consumer = cluster.consumer(None)
    consumer.assign(tps)
    for tp in tps:
        consumer.seek(tp, 0)
    records = _read_all(consumer, tps, ends)
    consumer.close()
    by_key = {r.key: r for r in records}
    assert set(by_key) == {*keys, b"pinned"}
    for i, key in enumerate(keys):
        record = by_key[key]
        assert record.partition == default_partition(key, 5)
        assert (record.value, record.timestamp, record.headers) == (b"v-" + key, 1_000 + i, (("h", b"x"),))
    assert by_key[b"pinned"].partition == 4


def test_a_batch_larger_than_librdkafkas_queue_is_sent_whole_and_in_order(cluster: KafkaCluster, names) -> None:
    """Exactly-once hands a commit's records over in one batch; a full local queue makes it wait, not drop."""
    admin = cluster.admin()
    topic = names("big-batch")
    admin.create_topics([TopicSpec(topic, 1)])
    producer = cluster.producer({"queue.buffering.max.messages": 50})
    producer.send_batch(topic, [(b"k", b"%d" % i, 1_000 + i, (), None) for i in range(1_000)])
    producer.flush()
    tp = TopicPartition(topic, 0)
    consumer = cluster.consumer(None)
    consumer.assign([tp])
    consumer.seek(tp, 0)
    records = _read_all(consumer, [tp], {tp: 1_000})
    consumer.close()
    assert [r.value for r in records] == [b"%d" % i for i in range(1_000)]
    with pytest.raises(SerializationError, match=f"value sent to topic '{topic}' is a dict"):
        producer.send_batch(topic, [(b"k", {"not": "bytes"}, None, (), None)])  # type: ignore[list-item]


def test_delivery_errors_surface(cluster: KafkaCluster, names) -> None:
    topic = names("one-partition")
    cluster.admin().create_topics([TopicSpec(topic, 1)])
    producer = cluster.producer({"message.timeout.ms": 2000})
    with pytest.raises(StreamsError, match=topic):
        producer.send(topic, b"k", b"v", partition=3)
        producer.flush(10)
    producer.close()
    with pytest.raises(IllegalStateError):
        producer.send(topic, b"k", b"v")


def test_a_stream_threads_collector_hands_records_to_librdkafka_at_once_except_under_exactly_once(
    cluster: KafkaCluster, names
) -> None:
    """at_least_once: each record goes to librdkafka as it is made (it copies and batches them), so the
    serialized bytes are not kept; exactly_once_v2 holds a transaction's records until its commit."""
    admin = cluster.admin()
    topic = names("collected")
    admin.create_topics([TopicSpec(topic, 1)])
    tp = TopicPartition(topic, 0)
    direct = ProducerCollector(cluster.producer(), admin)
    assert direct.copies_on_send
    direct.send(topic, b"k", b"v1", 1_000, (), None)
    direct.producer.flush()
    assert admin.end_offsets([tp])[tp] == 1

    held = ProducerCollector(cluster.producer(), admin, hold=True)
    assert not held.copies_on_send
    held.send(topic, b"k", b"v2", 1_000, (), None)
    # a pandas-style sink sends decoded columns: held as well, after the records sent before it
    json = serde_from("json")
    frame = pd.DataFrame({"amount": [3, 4]})
    held.send_columnar(topic, ColumnarBatch(["a", "b"], frame, np.array([2_000, 2_001]), json, json), 0)
    held.producer.flush()
    assert admin.end_offsets([tp])[tp] == 1
    held.flush()
    held.producer.flush()
    assert admin.end_offsets([tp])[tp] == 4
    servers = cluster.bootstrap_servers
    rows = ks.read_topic(topic, bootstrap_servers=servers, key_serde="bytes", value_serde="bytes")
    assert rows["value"].tolist() == [b"v1", b"v2", b'{"amount":3}', b'{"amount":4}']
    assert rows["timestamp"].tolist() == [1_000, 1_000, 2_000, 2_001]
    assert not ProducerCollector(connect("memory://").producer(), admin).copies_on_send


def test_manual_consumer_seeks_and_reports_positions(cluster: KafkaCluster, names) -> None:
    topic = names("seek")
    cluster.admin().create_topics([TopicSpec(topic, 1)])
    producer = cluster.producer()
    for i in range(10):
        producer.send(topic, None, b"%d" % i, 100 + i)
    producer.flush()
    tp = TopicPartition(topic, 0)
    consumer = cluster.consumer(None)
    consumer.assign([tp])
    assert consumer.position(tp) == 0  # auto.offset.reset=earliest
    consumer.seek(tp, 7)
    assert consumer.position(tp) == 7
    records = _read_all(consumer, [tp], {tp: 10})
    assert [r.value for r in records] == [b"7", b"8", b"9"]
    assert consumer.position(tp) == 10
    consumer.seek(tp, 2)
    records = _read_all(consumer, [tp], {tp: 4})
    assert [r.offset for r in records][:2] == [2, 3]
    with pytest.raises(IllegalStateError, match="not assigned"):
        consumer.position(TopicPartition(topic, 5))
    with pytest.raises(IllegalStateError, match="no group id"):
        consumer.commit({tp: 1})
    consumer.close()


class _Listener:
    def __init__(self) -> None:
        self.assigned: list[tuple[set[TopicPartition], object]] = []
        self.revoked: list[set[TopicPartition]] = []

    def on_partitions_revoked(self, partitions: set[TopicPartition]) -> None:
        self.revoked.append(partitions)

    def on_partitions_assigned(self, partitions: set[TopicPartition], userdata: object) -> None:
        self.assigned.append((partitions, userdata))


def test_group_members_split_partitions_with_range_and_commit(cluster: KafkaCluster, names) -> None:
    """Two members: co-partitioned topics are split identically (what task derivation relies on)."""
    a, b, group = names("left"), names("right"), names("group")
    cluster.admin().create_topics([TopicSpec(a, 4), TopicSpec(b, 4)])
    conf = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 500}
    first, second = cluster.consumer(group, conf), cluster.consumer(group, conf)
    l1, l2 = _Listener(), _Listener()
    first.subscribe([a, b], l1)
    second.subscribe([a, b], l2)
    deadline = time.monotonic() + 30
    while not (first.assignment() and second.assignment() and len(first.assignment() | second.assignment()) == 8):
        assert time.monotonic() < deadline, "the group did not settle"
        first.poll(0.05)
        second.poll(0.05)
    for member in (first, second):
        parts = member.assignment()
        assert {tp.partition for tp in parts if tp.topic == a} == {tp.partition for tp in parts if tp.topic == b}
    assert not first.assignment() & second.assignment()
    mine = sorted(first.assignment())[0]
    first.commit({mine: 3})
    assert first.committed([mine]) == {mine: 3}
    assert first.committed([TopicPartition(b, 0) if mine.topic == a else TopicPartition(a, 0)]) in (
        {TopicPartition(b, 0): None},
        {TopicPartition(a, 0): None},
    )
    with pytest.raises(IllegalStateError, match="subscribed"):
        first.assign([mine])
    second.close()
    deadline = time.monotonic() + 30
    while len(first.assignment()) != 8:
        assert time.monotonic() < deadline, "the remaining member did not take over"
        first.poll(0.05)
    assert l1.revoked and l2.revoked
    first.close()
    assert cluster.admin().group_offsets(group) == {mine: 3}


def test_paused_partitions_are_not_read_until_resumed(cluster: KafkaCluster, names) -> None:
    topic = names("pause")
    cluster.admin().create_topics([TopicSpec(topic, 2)])
    producer = cluster.producer()
    for p in (0, 1):
        producer.send(topic, None, b"%d" % p, 100, (), p)
    producer.flush()
    a, b = TopicPartition(topic, 0), TopicPartition(topic, 1)
    consumer = cluster.consumer(None)
    consumer.assign([a, b])
    consumer.pause([b])
    assert consumer.paused() == {b}
    seen = {batch.partition for _ in range(10) for batch in consumer.poll(0.1)}
    assert seen == {0}
    consumer.resume([b])
    records = _read_all(consumer, [b], {b: 1})
    assert [r.value for r in records] == [b"1"]
    consumer.close()


def test_kafka_streams_client_prefixes_route_a_setting_to_one_kind_of_client() -> None:
    """As StreamsConfig.producerPrefix/consumerPrefix/...: the prefix picks the client, then is removed;
    a prefixed setting wins over the same unprefixed one."""
    base = {"linger.ms": 5, "producer.linger.ms": 100, "consumer.fetch.min.bytes": 1000,
            "main.consumer.max.poll.interval.ms": 60000, "restore.consumer.fetch.wait.max.ms": 5,
            "admin.request.timeout.ms": 9000, "client.id": "x"}  # fmt: skip
    producer, consumer = config_for("producer", base), config_for("consumer", base)
    reader, admin = config_for("reader", base), config_for("admin", base)
    assert producer == {"linger.ms": 100, "client.id": "x"}
    assert consumer == {"fetch.min.bytes": 1000, "max.poll.interval.ms": 60000, "client.id": "x"}
    assert reader == {"fetch.min.bytes": 1000, "fetch.wait.max.ms": 5, "client.id": "x"}
    assert admin == {"request.timeout.ms": 9000, "client.id": "x"}


def test_an_unknown_setting_fails_start_at_once_naming_it(kafka_bootstrap: str) -> None:
    b = ks.StreamsBuilder()
    b.stream("in").to("out")
    app = ks.KafkaStreams(
        b.build(), application_id="bad-setting", bootstrap_servers=kafka_bootstrap,
        client_config={"linger.msec": 5},
    )  # fmt: skip
    with pytest.raises(StreamsError, match=r'No such configuration property: "linger\.msec"'):
        app.start()
    assert app.state == ks.State.CREATED


def test_consumers_fetch_again_soon_unless_the_user_says_otherwise(kafka_bootstrap: str) -> None:
    """librdkafka's default 1 s fetch.queue.backoff.ms held one consumer at ~130k records/s on Kafka (450k/s at
    10 ms, bench/README.md): every consumer kstream_nb makes fetches again after 10 ms; a user's setting wins."""
    users = {"fetch.queue.backoff.ms": 500, "restore.consumer.fetch.queue.backoff.ms": 50}
    for config, expected in (({}, (10, 10)), (users, (500, 50))):
        cluster = KafkaCluster(kafka_bootstrap, config)
        member, reader = cluster.consumer("g"), cluster.consumer(None)
        assert (member.config["fetch.queue.backoff.ms"], reader.config["fetch.queue.backoff.ms"]) == expected
        member.close()
        reader.close()
        cluster.close()
