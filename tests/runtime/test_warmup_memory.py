"""Warm-up replicas and probing rebalances (KIP-441) and rack-aware standbys, end to end on memory://: an empty
instance joining a group whose state is large gets warm-ups, not the stateful tasks; once warm, probing
rebalances move the tasks to it and it restores (almost) nothing at the promotion."""

import time
import uuid
from collections import Counter
from itertools import pairwise
from pathlib import Path
from typing import Any

import kstream_nb as ks

PARTITIONS = 6
ACCEPTABLE_LAG = 100  # each task's changelog holds ~10_000 / 6 records: an empty instance is far behind


def topology() -> ks.Topology:
    b = ks.StreamsBuilder()
    b.stream("words").group_by_key().count(store="counts")
    return b.build()


def wait_for(condition: Any, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"{what}: not reached in {timeout}s"
        time.sleep(0.02)


def recording(app: ks.KafkaStreams) -> list[dict[str, Any]]:
    """Every group-wide assignment ``app`` receives, as its ``group_hosts`` (what group_assignment() shows)."""
    seen: list[dict[str, Any]] = []
    received = app.assignor.on_assignment

    def on_assignment(assignment: Any) -> None:
        received(assignment)
        seen.append(dict(app.assignor.group_hosts))

    app.assignor.on_assignment = on_assignment  # type: ignore[method-assign]
    return seen


def owners(view: dict[str, Any]) -> dict[str, str]:
    """Task id -> the instance (process id) running it."""
    return {tid: pid for tid, (_thread, pid, _standby, _partitions) in view["all"].items()}


def test_an_empty_instance_warms_up_then_takes_its_share_without_restoring(tmp_path: Path) -> None:
    """A counts 10_000 keys over 6 partitions; B joins with empty state. Expected (worked out by hand): shares
    are 3 and 3, B lags ~1667 > acceptable_recovery_lag on each task, so A keeps all 6 stateful actives and B
    gets max_warmup_replicas = 2 warm-ups; probing rebalances every 500 ms move each warm-up to B once caught up
    (the third move gets a warm-up once a slot frees up): 3 and 3 at the end, every task B took was a warm-up
    of B in the assignment before, and B restored no more than acceptable_recovery_lag records per promotion
    (0 here: the input is quiet) instead of the ~5000 changelog records of 3 tasks."""
    url = f"memory://warmup-{uuid.uuid4().hex[:8]}"
    words = [(f"k{i}", 1) for i in range(10_000)] + [(f"k{i % 50}", 1) for i in range(500)]
    ks.produce("words", words, bootstrap_servers=url, partitions=PARTITIONS)
    settings: dict[str, Any] = {
        "commit_interval_ms": 50,
        "acceptable_recovery_lag": ACCEPTABLE_LAG,
        "max_warmup_replicas": 2,
        "probing_rebalance_interval_ms": 500,
    }
    first = ks.KafkaStreams(topology(), "wu", url, client_id="A", state_dir=str(tmp_path / "a"), **settings)
    second = ks.KafkaStreams(topology(), "wu", url, client_id="B", state_dir=str(tmp_path / "b"), **settings)
    try:
        first.start().wait_until_running().wait_until_idle()
        a, b = first.process_id, second.process_id
        history = recording(second)
        second.start()

        def balanced() -> bool:
            view = second.group_assignment()
            held = Counter(entry["instance"] for entry in view.values())
            return held == {a: 3, b: 3} and not any(entry["warmup"] for entry in view.values())

        wait_for(balanced, "3 tasks on each instance, no warm-up left")
        second.wait_until_running().wait_until_idle()

        joined = history[0]  # the rebalance B joined
        assert set(owners(joined).values()) == {a}  # A kept every stateful active task
        assert sorted(joined["warmups"].values()) == [[b], [b]]  # B warms up max_warmup_replicas of them
        for before, after in pairwise(history):
            for tid, pid in owners(after).items():
                if pid == b and owners(before)[tid] != b:
                    assert b in before["warmups"].get(tid, []), f"{tid} moved to B without a warm-up"
        assert len(history) >= 3  # the join, then at least two probing rebalances (2 + 1 moves)

        restored = second.metrics()["restored-records-total"]
        assert restored <= ACCEPTABLE_LAG, f"B restored {restored} records at its promotions"
        changelog = Counter(ks.read_topic("wu-counts-changelog", bootstrap_servers=url)["partition"])
        moved = [int(tid.split("_")[1]) for tid, pid in owners(history[-1]).items() if pid == b]
        assert sum(changelog[p] for p in moved) > 3 * ACCEPTABLE_LAG  # what a cold move would have replayed

        more = [(f"k{i % 3000}", 1) for i in range(3000)]
        ks.produce("words", more, bootstrap_servers=url)
        for app in (first, second):
            app.wait_until_idle()
        counts = dict(first.store("counts").all()) | dict(second.store("counts").all())
        assert counts == dict(Counter(k for k, _ in words + more))
    finally:
        second.stop()
        first.stop()


def test_standbys_go_to_another_rack(tmp_path: Path) -> None:
    """Racks r1, r1, r2 (``client.rack``), one standby per task, 6 tasks: each instance runs 2; the standby of
    every task active on an r1 instance is on the r2 instance, and that of a task active on r2 on an r1 one."""
    url = f"memory://racks-{uuid.uuid4().hex[:8]}"
    ks.produce("words", [(f"k{i}", 1) for i in range(600)], bootstrap_servers=url, partitions=PARTITIONS)
    racks = {"A": "r1", "B": "r1", "C": "r2"}
    apps = [
        ks.KafkaStreams(
            topology(),
            "racks",
            url,
            client_id=name,
            state_dir=str(tmp_path / name),
            num_standby_replicas=1,
            commit_interval_ms=50,
            client_config={"client.rack": rack},
        )
        for name, rack in racks.items()
    ]
    try:
        for app in apps:
            app.start().wait_until_running()
        rack_of = {app.process_id: rack for app, rack in zip(apps, racks.values(), strict=True)}

        def settled() -> bool:
            view = apps[0].group_assignment()
            return (
                len(view) == PARTITIONS
                and Counter(e["instance"] for e in view.values()) == dict.fromkeys(rack_of, 2)
                and all(len(e["standby"]) == 1 for e in view.values())
            )

        wait_for(settled, "2 tasks on each instance, one standby each")
        for tid, entry in apps[0].group_assignment().items():
            (standby,) = entry["standby"]
            assert rack_of[standby] != rack_of[entry["instance"]], f"{tid}: standby on the active's rack"
    finally:
        for app in apps:
            app.stop()


def test_a_restarted_instance_gets_its_tasks_back_and_restores_only_the_delta(tmp_path: Path) -> None:
    """RocksDB stores, A and B run 3 tasks each (checkpoints written at each commit). B stops: A takes its 3
    tasks. 300 more records arrive. B restarts on its state directory: its checkpoints put it within
    acceptable_recovery_lag (10_000) of its old tasks and 4000+ behind A's, so the balance moves exactly its
    old tasks back at once (no warm-up), and it replays only what the changelogs got since it stopped."""
    url = f"memory://restart-{uuid.uuid4().hex[:8]}"
    words = [(f"k{i}", 1) for i in range(30_000)]
    ks.produce("words", words, bootstrap_servers=url, partitions=PARTITIONS)
    settings: dict[str, Any] = {"commit_interval_ms": 50, "default_dsl_store": "rocksdb"}

    def instance(name: str) -> ks.KafkaStreams:
        return ks.KafkaStreams(topology(), "rs", url, client_id=name, state_dir=str(tmp_path / name), **settings)

    first, second = instance("A"), instance("B")
    try:
        first.start().wait_until_running().wait_until_idle()
        second.start()

        def balanced() -> bool:  # reads ``second`` when called: the restarted B once it is rebound
            held = Counter(e["instance"] for e in first.group_assignment().values())
            return held == {first.process_id: 3, second.process_id: 3}

        wait_for(balanced, "3 tasks on each instance")
        for app in (first, second):
            app.wait_until_running().wait_until_idle()
        old = {tid for tasks in second.assignment().values() for tid in tasks}
        assert second.stop()
        wait_for(lambda: len(first.group_assignment()) == PARTITIONS and not second.threads, "A runs all 6")
        first.wait_until_running().wait_until_idle()
        delta = [(f"k{i}", 1) for i in range(300)]
        ks.produce("words", delta, bootstrap_servers=url)
        first.wait_until_idle()

        second = instance("B")
        second.start()
        wait_for(balanced, "3 tasks on each instance again")
        second.wait_until_running().wait_until_idle()
        assert {tid for tasks in second.assignment().values() for tid in tasks} == old
        restored = second.metrics()["restored-records-total"]
        assert 0 < restored <= len(delta), f"B restored {restored} records, the delta had {len(delta)}"
        counts = dict(first.store("counts").all()) | dict(second.store("counts").all())
        assert counts == dict(Counter(k for k, _ in words + delta))
    finally:
        second.stop()
        first.stop()
