"""The embedded cluster: registry, admin, producer validation, manual-assignment consumers."""

from __future__ import annotations

import threading
import time

import pytest

from kstream_nb.cluster import connect
from kstream_nb.cluster.base import TopicExistsError, TopicSpec
from kstream_nb.cluster.memory import MemoryCluster, get_cluster, reset_cluster
from kstream_nb.cluster.records import TopicPartition
from kstream_nb.errors import IllegalStateError, SerializationError, StreamsError, UnknownTopicError


def test_registry_returns_same_instance(bootstrap: str) -> None:
    cluster = get_cluster(bootstrap)
    assert get_cluster(bootstrap) is cluster
    assert cluster.bootstrap_servers == bootstrap
    assert connect(bootstrap) is cluster
    reset_cluster(bootstrap)
    assert get_cluster(bootstrap) is not cluster


def test_default_cluster_name() -> None:
    assert get_cluster("memory://").name == ""
    assert get_cluster("memory://").bootstrap_servers == "memory://"


def test_connect_picks_kafka_for_host_port() -> None:
    from kstream_nb.cluster.kafka import KafkaCluster

    assert isinstance(connect("localhost:9092"), KafkaCluster)  # no connection is made until used
    with pytest.raises(StreamsError, match="bootstrap_servers"):
        connect("")


def test_admin_topics(cluster: MemoryCluster) -> None:
    admin = cluster.admin()
    admin.create_topics([TopicSpec("a", 3, {"cleanup.policy": "compact"}), TopicSpec("b")])
    assert admin.list_topics() == ["a", "b"]
    assert admin.partition_count("a") == 3
    assert admin.partition_count("missing") is None
    desc = admin.describe_topic("a")
    assert (desc.partitions, desc.config["cleanup.policy"], desc.end_offsets) == (3, "compact", (0, 0, 0))
    with pytest.raises(TopicExistsError, match="'a'"):
        admin.create_topics([TopicSpec("a")])
    admin.create_topics([TopicSpec("a", 5)], exist_ok=True)
    assert admin.partition_count("a") == 3
    with pytest.raises(UnknownTopicError, match="'nope'"):
        admin.describe_topic("nope")
    admin.delete_topics(["b"])
    assert admin.list_topics() == ["a"]
    with pytest.raises(UnknownTopicError):
        admin.delete_topics(["b"])


def test_invalid_topic_config(cluster: MemoryCluster) -> None:
    with pytest.raises(StreamsError, match=r"'t'.*cleanup.policy"):
        cluster.create_topics([TopicSpec("t", 1, {"cleanup.policy": "keep"})])
    with pytest.raises(StreamsError, match="invalid topic name"):
        cluster.create_topics([TopicSpec("bad name")])


def test_create_partitions_and_offsets(cluster: MemoryCluster) -> None:
    admin = cluster.admin()
    admin.create_topics([TopicSpec("t", 1)])
    producer = cluster.producer()
    producer.send("t", b"k", b"v")
    admin.create_partitions("t", 3)
    assert admin.partition_count("t") == 3
    tps = [TopicPartition("t", p) for p in range(3)]
    assert admin.end_offsets(tps) == {tps[0]: 1, tps[1]: 0, tps[2]: 0}
    assert admin.beginning_offsets(tps) == dict.fromkeys(tps, 0)
    with pytest.raises(StreamsError, match="must be larger"):
        admin.create_partitions("t", 2)


def test_auto_create_on_produce(bootstrap: str) -> None:
    cluster = MemoryCluster("auto", num_partitions=2)
    cluster.producer().send("new", None, b"v")
    assert cluster.admin().partition_count("new") == 2
    strict = MemoryCluster("strict", auto_create_topics=False)
    with pytest.raises(UnknownTopicError, match="'new'"):
        strict.producer().send("new", None, b"v")


def test_producer_validation(cluster: MemoryCluster) -> None:
    cluster.create_topics([TopicSpec("t", 2)])
    producer = cluster.producer()
    with pytest.raises(StreamsError, match="'t' has no partition 5"):
        producer.send("t", None, b"v", partition=5)
    with pytest.raises(SerializationError, match="'t'"):
        producer.send("t", None, "not bytes")  # type: ignore[arg-type]
    meta = producer.send("t", None, b"v", partition=1, headers={"trace": "abc"})  # type: ignore[arg-type]
    assert meta.partition == 1


def test_compacted_topic_rejects_null_key(cluster: MemoryCluster) -> None:
    cluster.create_topics([TopicSpec("c", 1, {"cleanup.policy": "compact"})])
    with pytest.raises(StreamsError, match=r"'c'.*null key"):
        cluster.producer().send("c", None, b"v")


def test_manual_assign_seek_pause(cluster: MemoryCluster) -> None:
    cluster.create_topics([TopicSpec("t", 2)])
    producer = cluster.producer()
    for i in range(4):
        producer.send("t", None, b"%d" % i, partition=i % 2)
    consumer = cluster.consumer("g")
    tp0, tp1 = TopicPartition("t", 0), TopicPartition("t", 1)
    consumer.assign([tp0, tp1])
    consumer.pause([tp1])
    assert {(b.partition, len(b)) for b in consumer.poll(0)} == {(0, 2)}
    consumer.resume([tp1])
    assert {(b.partition, len(b)) for b in consumer.poll(0)} == {(1, 2)}
    consumer.seek(tp0, 1)
    assert [r.value for b in consumer.poll(0) for r in b.records] == [b"2"]
    consumer.commit({tp0: 2})
    assert consumer.committed([tp0, tp1]) == {tp0: 2, tp1: None}
    assert cluster.admin().group_offsets("g") == {tp0: 2}
    # commit metadata, as Kafka keeps it: replaced by every commit of the partition
    consumer.commit({tp0: 2, tp1: 1}, {tp0: '{"stream_time": 5}'})
    assert consumer.committed_metadata([tp0, tp1]) == {tp0: '{"stream_time": 5}'}
    consumer.commit({tp0: 2})
    assert consumer.committed_metadata([tp0, tp1]) == {}
    with pytest.raises(IllegalStateError):
        consumer.subscribe(["t"])
    with pytest.raises(IllegalStateError):
        consumer.seek(TopicPartition("t", 7), 0)
    consumer.close()
    with pytest.raises(IllegalStateError):
        consumer.poll(0)


def test_auto_offset_reset_latest(cluster: MemoryCluster) -> None:
    producer = cluster.producer()
    producer.send("t", None, b"old")
    consumer = cluster.consumer(None, {"auto.offset.reset": "latest"})
    consumer.assign([TopicPartition("t", 0)])
    assert consumer.poll(0) == []
    producer.send("t", None, b"new")
    assert [r.value for b in consumer.poll(0) for r in b.records] == [b"new"]


def test_poll_wakes_on_append(cluster: MemoryCluster) -> None:
    cluster.create_topics([TopicSpec("t", 1)])
    consumer = cluster.consumer(None)
    consumer.assign([TopicPartition("t", 0)])
    timer = threading.Timer(0.05, lambda: cluster.producer().send("t", None, b"v"))
    timer.start()
    started = time.monotonic()
    batches = consumer.poll(5.0)
    timer.join()
    assert len(batches) == 1
    assert time.monotonic() - started < 1.0


def test_poll_times_out_empty(cluster: MemoryCluster) -> None:
    consumer = cluster.consumer(None)
    consumer.assign([TopicPartition("t", 0)])
    started = time.monotonic()
    assert consumer.poll(0.05) == []
    assert 0.04 <= time.monotonic() - started < 1.0


def test_delete_group(cluster: MemoryCluster) -> None:
    admin = cluster.admin()
    consumer = cluster.consumer("g")
    consumer.subscribe(["t"])
    consumer.commit({TopicPartition("t", 0): 3})
    assert admin.list_groups() == ["g"]
    with pytest.raises(StreamsError, match=r"'g'.*member"):
        admin.delete_group("g")
    consumer.close()
    admin.delete_group("g")
    assert admin.list_groups() == []
    assert admin.group_offsets("g") == {}
