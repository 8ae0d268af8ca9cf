"""KIP-441 warm-ups and KIP-925 rack-aware standbys with leader-assigned tasks on Apache Kafka.

The expectations come from the changelog topics read back from the broker and ``collections.Counter``
recounts, not from the assignor: a stateful task moves to a new instance only once a warm-up copy there
caught up (so the move restores next to nothing), and each standby sits on another rack than its active task.
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
    """Two sub-topologies: split and re-key (0_p), count into store "counts" (1_p)."""
    b = ks.StreamsBuilder()
    b.stream(source).flat_map_values(str.split).group_by(lambda k, w: w).count(store="counts")
    return b.build()


def tasks(app: ks.KafkaStreams) -> set[str]:
    return {tid for per_thread in app.assignment().values() for tid in per_thread}


def counts(*apps: ks.KafkaStreams) -> dict[str, int]:
    merged: dict[str, int] = {}
    for app in apps:
        merged.update(dict(app.store("counts").all()))
    return merged


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
