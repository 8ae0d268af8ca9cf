"""Consumer groups: eager rebalancing with a join barrier, committed offsets, member expiry."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import Any

from kstream_nb.cluster.base import Assignment, Subscription, TopicSpec
from kstream_nb.cluster.memory import MemoryCluster, MemoryConsumer
from kstream_nb.cluster.records import TopicPartition


class Recorder:
    """A rebalance listener that records callbacks, optionally committing positions on revoke."""

    def __init__(self, consumer: MemoryConsumer | None = None) -> None:
        self.consumer = consumer
        self.events: list[tuple[str, set[TopicPartition], Any]] = []
        self.owned: set[TopicPartition] = set()

    def on_partitions_revoked(self, partitions: set[TopicPartition]) -> None:
        self.events.append(("revoked", partitions, None))
        if self.consumer is not None and partitions:
            self.consumer.commit({tp: self.consumer.position(tp) for tp in partitions})
        self.owned -= partitions

    def on_partitions_assigned(self, partitions: set[TopicPartition], userdata: Any) -> None:
        self.events.append(("assigned", partitions, userdata))
        self.owned |= partitions


def tps(topic: str, *parts: int) -> set[TopicPartition]:
    return {TopicPartition(topic, p) for p in parts}


def poll_all(*consumers: MemoryConsumer, rounds: int = 5) -> None:
    for _ in range(rounds):
        for consumer in consumers:
            consumer.poll(0)


def test_two_members_split_then_one_leaves(cluster: MemoryCluster) -> None:
    cluster.create_topics([TopicSpec("t", 4)])
    a, b = cluster.consumer("g"), cluster.consumer("g")
    ra, rb = Recorder(a), Recorder(b)
    a.subscribe(["t"], ra)
    a.poll(0)
    assert ra.owned == tps("t", 0, 1, 2, 3)
    b.subscribe(["t"], rb)
    poll_all(a, b)
    assert ra.owned == tps("t", 0, 1) and rb.owned == tps("t", 2, 3)
    assert ra.events[1][0] == "revoked" and ra.events[1][1] == tps("t", 0, 1, 2, 3)
    assert a.assignment() == tps("t", 0, 1)
    b.close()
    assert rb.events[-1] == ("revoked", tps("t", 2, 3), None)
    poll_all(a)
    assert ra.owned == tps("t", 0, 1, 2, 3)
    a.close()


def test_committed_offsets_resume_after_resubscribe(cluster: MemoryCluster) -> None:
    producer = cluster.producer()
    for i in range(5):
        producer.send("t", None, b"%d" % i)
    first = cluster.consumer("g")
    first.subscribe(["t"], Recorder(first))
    values = [r.value for b in first.poll(0, max_records=3) for r in b.records]
    assert values == [b"0", b"1", b"2"]
    first.close()
    assert cluster.admin().group_offsets("g") == {TopicPartition("t", 0): 3}
    again = cluster.consumer("g")
    again.subscribe(["t"])
    assert [r.value for b in again.poll(0) for r in b.records] == [b"3", b"4"]
    again.close()


def test_adding_partitions_triggers_rebalance(cluster: MemoryCluster) -> None:
    cluster.create_topics([TopicSpec("t", 2)])
    a, b = cluster.consumer("g"), cluster.consumer("g")
    ra, rb = Recorder(), Recorder()
    a.subscribe(["t"], ra)
    b.subscribe(["t"], rb)
    poll_all(a, b)
    assert ra.owned | rb.owned == tps("t", 0, 1)
    cluster.admin().create_partitions("t", 6)
    poll_all(a, b)
    assert ra.owned == tps("t", 0, 1, 2) and rb.owned == tps("t", 3, 4, 5)
    a.close()
    b.close()


def test_topic_created_later_is_assigned(cluster: MemoryCluster) -> None:
    consumer = cluster.consumer("g")
    rec = Recorder()
    consumer.subscribe(["later"], rec)
    consumer.poll(0)
    assert rec.owned == set()
    cluster.create_topics([TopicSpec("later", 2)])
    consumer.poll(0)
    assert rec.owned == tps("later", 0, 1)
    consumer.close()


class EvenOddAssignor:
    """Gives partitions by parity and echoes each member's userdata back to it."""

    calls = 0

    def assign(
        self, partition_counts: Mapping[str, int], subscriptions: Mapping[str, Subscription]
    ) -> dict[str, Assignment]:
        EvenOddAssignor.calls += 1
        members = sorted(subscriptions)
        out: dict[str, set[TopicPartition]] = {m: set() for m in members}
        for topic, count in partition_counts.items():
            for p in range(count):
                out[members[p % len(members)]].add(TopicPartition(topic, p))
        return {m: Assignment(frozenset(v), subscriptions[m].userdata) for m, v in out.items()}


def test_custom_assignor_userdata_and_request_rebalance(cluster: MemoryCluster) -> None:
    cluster.create_topics([TopicSpec("t", 4)])
    a, b = cluster.consumer("g"), cluster.consumer("g")
    ra, rb = Recorder(), Recorder()
    version = {"a": 1}
    a.subscribe(["t"], ra, EvenOddAssignor(), userdata=lambda: ("a", version["a"]))
    b.subscribe(["t"], rb, EvenOddAssignor(), userdata=lambda: "b")
    EvenOddAssignor.calls = 0
    poll_all(a, b)
    assert EvenOddAssignor.calls == 1
    assert ra.owned == tps("t", 0, 2) and rb.owned == tps("t", 1, 3)
    assert ra.events[-1][2] == ("a", 1) and rb.events[-1][2] == "b"
    version["a"] = 2
    a.request_rebalance()
    poll_all(a, b)
    assert EvenOddAssignor.calls == 2
    assert ra.events[-1] == ("assigned", tps("t", 0, 2), ("a", 2))
    a.close()
    b.close()


def test_member_that_stops_polling_is_removed(cluster: MemoryCluster) -> None:
    cluster.create_topics([TopicSpec("t", 2)])
    config = {"max.poll.interval.ms": 50}
    a, b = cluster.consumer("g", config), cluster.consumer("g", config)
    ra, rb = Recorder(), Recorder()
    a.subscribe(["t"], ra)
    b.subscribe(["t"], rb)
    poll_all(a, b)
    assert len(ra.owned) == len(rb.owned) == 1
    deadline = time.monotonic() + 2
    while ra.owned != tps("t", 0, 1) and time.monotonic() < deadline:
        a.poll(0.01)
    assert ra.owned == tps("t", 0, 1)
    assert cluster.admin().group_members("g") == {a.member_id: frozenset(tps("t", 0, 1))}
    b.poll(0)
    assert rb.events[-1][0] == "revoked"
    poll_all(a, b)
    assert len(ra.owned) == len(rb.owned) == 1
    a.close()
    b.close()


def test_no_partition_owned_twice_under_threads(cluster: MemoryCluster) -> None:
    cluster.create_topics([TopicSpec("t", 6)])
    owners: dict[TopicPartition, str] = {}
    lock = threading.Lock()
    violations: list[str] = []
    errors: list[BaseException] = []
    stop = threading.Event()
    producer = cluster.producer()
    stats = {"assigned": 0, "read": 0}

    class Tracker:
        def __init__(self, name: str) -> None:
            self.name = name

        def on_partitions_revoked(self, partitions: set[TopicPartition]) -> None:
            with lock:
                for tp in partitions:
                    if owners.get(tp) != self.name:
                        violations.append(f"{self.name} revoked {tp} owned by {owners.get(tp)}")
                    owners.pop(tp, None)

        def on_partitions_assigned(self, partitions: set[TopicPartition], userdata: Any) -> None:
            with lock:
                stats["assigned"] += 1
                for tp in partitions:
                    if tp in owners:
                        violations.append(f"{self.name} got {tp} still owned by {owners[tp]}")
                    owners[tp] = self.name

    def run(name: str, lifetime: float) -> None:
        try:
            consumer = cluster.consumer("g")
            consumer.subscribe(["t"], Tracker(name))
            end = time.monotonic() + lifetime
            while not stop.is_set() and time.monotonic() < end:
                for batch in consumer.poll(0.01):
                    with lock:
                        stats["read"] += len(batch)
                        if owners.get(TopicPartition(batch.topic, batch.partition)) != name:
                            violations.append(f"{name} read {batch.topic}-{batch.partition} it does not own")
                if name == "c1" and int(time.monotonic() * 20) % 7 == 0:
                    consumer.request_rebalance()
            consumer.close()
        except BaseException as exc:
            errors.append(exc)

    threads = [
        threading.Thread(target=run, args=("c0", 0.8)),
        threading.Thread(target=run, args=("c1", 0.8)),
        threading.Thread(target=run, args=("c2", 0.3)),
        threading.Thread(target=run, args=("c3", 0.5)),
    ]
    for t in threads:
        t.start()
    for i in range(200):
        producer.send("t", None, b"%d" % i)
        if i == 100:
            cluster.admin().create_partitions("t", 8)
        time.sleep(0.002)
    for t in threads:
        t.join(5)
    stop.set()
    assert not any(t.is_alive() for t in threads)
    assert errors == []
    assert violations == []
    assert owners == {}
    assert stats["assigned"] >= 8 and stats["read"] >= 100
