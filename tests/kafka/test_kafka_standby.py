"""Standby tasks, warm-ups, rack-aware placement, the all-instances view and sticky tasks on Apache Kafka.

The assignment leader places each standby on another instance (and rack, with ``client.rack``) than its active
task; when the active instance leaves, the task goes to the instance that holds its standby, so a failover
restores only what the standby had not applied yet. A stateful task moves to a new instance only once a warm-up
copy there caught up (KIP-441), so the move restores next to nothing. An instance restarted on its state
directory keeps its process id and gets its tasks back. Expectations come from the changelogs read back from
the broker and ``collections.Counter`` recounts, not from the assignor.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import kstream_nb as ks
from tests.helpers import wait_for

pytestmark = pytest.mark.kafka


def word_count(source: str) -> ks.Topology:
    b = ks.StreamsBuilder()
    b.stream(source).flat_map_values(str.split).group_by(lambda k, w: w).count(store="counts")
    return b.build()


def tasks(app: ks.KafkaStreams) -> set[str]:
    return {tid for per_thread in app.assignment().values() for tid in per_thread}


def standbys(app: ks.KafkaStreams) -> set[str]:
    return {tid for per_thread in app.standby_assignment().values() for tid in per_thread}


def counts(*apps: ks.KafkaStreams) -> dict[str, int]:
    merged: dict[str, int] = {}
    for app in apps:
        merged.update(dict(app.store("counts").all()))
    return merged


def test_standbys_keep_the_other_instance_warm_and_take_over(make_kafka_app, names, kafka_bootstrap, tmp_path):
    source = names("sentences")
    sentences = [f"w{i % 40} w{(i * 7) % 40}" for i in range(400)]
    ks.produce(source, [(f"s{i}", s) for i, s in enumerate(sentences)], bootstrap_servers=kafka_bootstrap,
               partitions=4)  # fmt: skip
    app_id = names("standby")
    settings = {"num_standby_replicas": 1, "commit_interval_ms": 100}
    first = make_kafka_app(word_count(source), application_id=app_id, state_dir=str(tmp_path / "a"), **settings)
    second = make_kafka_app(word_count(source), application_id=app_id, state_dir=str(tmp_path / "b"), **settings)
    first.start().wait_until_running(60)
    second.start()
    stateful = {f"1_{p}" for p in range(4)}  # the count's sub-topology; the source sub-topology has no store

    def settled() -> bool:
        a, b = tasks(first), tasks(second)
        return (
            len(a) == 4
            and len(b) == 4
            and standbys(first) == b & stateful
            and standbys(second) == a & stateful
            and counts(first, second) == dict(Counter(w for s in sentences for w in s.split()))
        )

    wait_for(settled, 90, "4 active tasks each, standbys of the other's stateful tasks, everything counted")

    def view_complete() -> bool:  # each member's record on the board arrives within a heartbeat or two
        expected = {}
        for tid in (f"{s}_{p}" for s in (0, 1) for p in range(4)):
            owner, other = (first, second) if tid in tasks(first) else (second, first)
            expected[tid] = (owner.process_id, [other.process_id] if tid in stateful else [])
        view = first.group_assignment()
        return {tid: (info["instance"], info["standby"]) for tid, info in view.items()} == expected

    wait_for(view_complete, 15, "the all-instances view with active and standby instances")
    words = set(Counter(w for s in sentences for w in s.split()))

    def complete_changelog() -> tuple[Any] | None:  # the counts reach the changelog at a commit after they're made
        records = ks.read_topic(f"{app_id}-counts-changelog", bootstrap_servers=kafka_bootstrap)
        return (records,) if set(records["key"]) == words else None

    (changelog,) = wait_for(complete_changelog, 30, "every count in the changelog")
    moved = changelog[changelog["partition"].isin([int(t[2:]) for t in tasks(second) & stateful])]
    wait_for(lambda: first.metrics()["standby-records-applied"] >= len(moved), 30, "the standbys to catch up")
    restored_before = first.metrics()["restored-records-total"]

    assert second.stop(30) is True  # leaves the group: its tasks move to the warm standbys
    wait_for(lambda: len(tasks(first)) == 8 and first.state is ks.State.RUNNING, 60, "the failover")
    assert standbys(first) == set()  # no other instance left to keep copies on
    restored = first.metrics()["restored-records-total"] - restored_before
    assert restored < len(moved) / 4, f"failover restored {restored} of {len(moved)} changelog records"
    more = [f"w{i % 40} x{i % 3}" for i in range(100)]
    ks.produce(source, more, bootstrap_servers=kafka_bootstrap, partitions=4)
    expected = dict(Counter(w for s in sentences + more for w in s.split()))
    wait_for(lambda: counts(first) == expected, 60, "the survivor to count everything")


def test_a_restarted_instance_gets_its_tasks_back(make_kafka_app, names, kafka_bootstrap, tmp_path):
    source = names("sentences")
    ks.produce(source, [f"a{i} b{i}" for i in range(50)], bootstrap_servers=kafka_bootstrap, partitions=4)
    app_id = names("sticky")
    first = make_kafka_app(word_count(source), application_id=app_id, state_dir=str(tmp_path / "a"))
    second = make_kafka_app(word_count(source), application_id=app_id, state_dir=str(tmp_path / "b"),
                            default_dsl_store="rocksdb")  # fmt: skip
    first.start().wait_until_running(60)
    second.start()
    wait_for(lambda: len(tasks(first)) == 4 and len(tasks(second)) == 4, 60, "4 tasks each")
    before, process_id = tasks(second), second.process_id
    second.wait_until_idle(60)
    assert second.stop(30) is True
    wait_for(lambda: len(tasks(first)) == 8, 60, "the survivor to take every task")

    again = make_kafka_app(word_count(source), application_id=app_id, state_dir=str(tmp_path / "b"),
                           default_dsl_store="rocksdb")  # fmt: skip
    assert again.process_id == process_id  # kept in the state directory
    again.start()
    wait_for(lambda: len(tasks(first)) == 4 and len(tasks(again)) == 4, 60, "4 tasks each again")
    assert tasks(again) == before


@pytest.fixture
def start_instance(make_kafka_app: Callable[..., ks.KafkaStreams], tmp_path: Path) -> Callable[..., Any]:
    """``start(topology, app_id, name, **config)``: an instance with state dir ``tmp_path/name``, started."""

    def start(topology: ks.Topology, app_id: str, name: str, **config: Any) -> ks.KafkaStreams:
        return make_kafka_app(topology, application_id=app_id, state_dir=str(tmp_path / name), **config).start()

    return start


def test_stateful_tasks_move_to_a_new_instance_only_after_its_warm_ups_caught_up(
    start_instance, names, kafka_bootstrap
) -> None:
    source = names("sentences")
    sentences = [f"u{i} v{i}" for i in range(1200)]  # 2400 distinct words: ~600 changelog records per task
    ks.produce(source, [(f"s{i}", s) for i, s in enumerate(sentences)], bootstrap_servers=kafka_bootstrap,
               partitions=4)  # fmt: skip
    app_id = names("warmup")
    settings = {"acceptable_recovery_lag": 10, "probing_rebalance_interval_ms": 1000}
    first = start_instance(word_count(source), app_id, "a", **settings)
    expected = dict(Counter(w for s in sentences for w in s.split()))
    wait_for(lambda: first.wait_until_idle(60) and counts(first) == expected, 90, "the first instance to count")

    def changelog_per_task() -> dict[int, int] | None:  # the counts reach the changelog at the commit after
        records = ks.read_topic(f"{app_id}-counts-changelog", bootstrap_servers=kafka_bootstrap)
        return records.groupby("partition").size().to_dict() if records["key"].nunique() == len(expected) else None

    per_task = wait_for(changelog_per_task, 60, "every count in the changelog")
    assert min(per_task.values()) > 10 * 10  # every stateful task is far beyond the acceptable recovery lag

    second = start_instance(word_count(source), app_id, "b", **settings)
    stateful = {f"1_{p}" for p in range(4)}
    wait_for(
        lambda: len(tasks(second) & stateful) == 2 and len(tasks(first) & stateful) == 2
        and second.state is ks.State.RUNNING and second.wait_until_idle(60),
        120, "the stateful tasks split 2 and 2",
    )  # fmt: skip
    moved = tasks(second) & stateful
    moved_records = sum(per_task[int(t.split("_")[1])] for t in moved)
    # the copies were built as warm-up (standby) replicas before the tasks moved: taking them over restored
    # next to nothing (a move without a warm-up restores the moved tasks' whole changelogs)
    restored = second.metrics()["restored-records-total"]
    assert restored < moved_records / 10, f"the move restored {restored} of {moved_records} changelog records"
    more = [f"u{i} x{i % 3}" for i in range(200)]
    ks.produce(source, more, bootstrap_servers=kafka_bootstrap, partitions=4)
    expected = dict(Counter(w for s in sentences + more for w in s.split()))
    wait_for(lambda: counts(first, second) == expected, 60, "both instances to count everything")


def test_each_standby_sits_on_another_rack_than_its_active_task(start_instance, names, kafka_bootstrap) -> None:
    source = names("sentences")
    sentences = [f"w{i % 30} z{i % 11}" for i in range(120)]
    ks.produce(source, sentences, bootstrap_servers=kafka_bootstrap, partitions=6)
    app_id = names("racks")
    racks = {"a1": "rack-a", "a2": "rack-a", "b1": "rack-b"}
    apps = {
        name: start_instance(
            word_count(source), app_id, name, num_standby_replicas=1, client_config={"client.rack": rack}
        )
        for name, rack in racks.items()
    }
    rack_of = {app.process_id: racks[name] for name, app in apps.items()}
    stateful = {f"1_{p}" for p in range(6)}
    expected = dict(Counter(w for s in sentences for w in s.split()))

    def settled() -> dict[str, Any] | None:
        views = [app.group_assignment() for app in apps.values()]
        running = [tasks(app) & stateful for app in apps.values()]
        if any(len(mine) != 2 for mine in running) or counts(*apps.values()) != expected:
            return None
        view = views[0]
        if any(v != view for v in views) or any(len(view[t]["standby"]) != 1 for t in stateful):
            return None
        return view

    view = wait_for(settled, 120, "2 stateful tasks per instance, one standby each, everything counted")
    placement = {t: (rack_of[view[t]["instance"]], rack_of[view[t]["standby"][0]]) for t in sorted(stateful)}
    assert all(active != standby for active, standby in placement.values()), placement
    # each holder's lag (changelog records its copy lacked at the round), the active's 0
    assert all(view[t]["lags"][view[t]["instance"]] == 0 for t in stateful), {t: view[t]["lags"] for t in stateful}
    assert all(isinstance(view[t]["lags"][view[t]["standby"][0]], int) for t in stateful)
    # rack-b's instance holds the standbys of all four tasks that run on rack-a
    assert sum(1 for active, _ in placement.values() if active == "rack-a") == 4
