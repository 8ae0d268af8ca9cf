"""Tasks, threads and instances: parallel runs give the same counts as one thread; tasks move and stay exact."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from runtime_helpers import expected_counts, latest_per_key, store_dict, word_count_topology

import kstream_nb as ks
from tests.helpers import wait_for

WORDS = [f"w{i}" for i in range(40)]


def _sentences(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 6))) for _ in range(n)]


def _word_count(output: str) -> ks.Topology:
    b = ks.StreamsBuilder()
    b.stream("sentences").flat_map_values(str.split).group_by(lambda k, w: w).count(store="counts").to_stream().to(
        output
    )
    return b.build()


def test_two_threads_give_the_same_counts_as_one(url, make_app):
    sentences = _sentences(300, seed=1)
    ks.produce("sentences", sentences, bootstrap_servers=url, partitions=4)
    results = {}
    for threads in (1, 2):
        app = make_app(_word_count(f"out-{threads}"), application_id=f"wc-{threads}", num_stream_threads=threads)
        app.start()
        app.wait_until_running().wait_until_idle()
        assert len(app.assignment()) == threads
        results[threads] = (store_dict(app), latest_per_key(url, f"out-{threads}"))
        app.stop(10)
    (store1, out1), (store2, out2) = results[1], results[2]
    assert store1 == expected_counts(sentences)
    assert store2 == store1
    assert out1 == store1
    assert out2 == out1
    # the output topic holds exactly one update per counted word occurrence, in both runs
    words = sum(len(s.split()) for s in sentences)
    assert len(ks.read_topic("out-1", bootstrap_servers=url)) == words
    assert len(ks.read_topic("out-2", bootstrap_servers=url)) == words


def test_tasks_are_subtopology_partition_and_split_over_two_threads(url, make_app):
    ks.produce("sentences", ["a b", "c d"], bootstrap_servers=url, partitions=4)
    app = make_app(word_count_topology(), application_id="split", num_stream_threads=2)
    app.start()
    app.wait_until_running().wait_until_idle()

    assignment = app.assignment()
    assert len(assignment) == 2
    all_tasks = [tid for tasks in assignment.values() for tid in tasks]
    assert sorted(all_tasks) == [f"{s}_{p}" for s in (0, 1) for p in range(4)]
    for tasks in assignment.values():
        # each thread runs half of the tasks of each sub-topology
        assert Counter(tid.split("_")[0] for tid in tasks) == {"0": 2, "1": 2}
        for tid, partitions in tasks.items():
            sub, p = tid.split("_")
            topic = "sentences" if sub == "0" else "split-counts-repartition"
            assert partitions == [f"{topic}-{p}"]

    group = app.group_assignment()
    assert sorted(group) == sorted(all_tasks)
    assert {g["thread"] for g in group.values()} == set(assignment)
    assert {g["instance"] for g in group.values()} == {app.process_id}


def _per_thread_subtopology(app: ks.KafkaStreams) -> list[Counter]:
    return [Counter(tid.split("_")[0] for tid in tasks) for tasks in app.assignment().values()]


def test_add_and_remove_stream_thread_move_tasks_and_counts_stay_exact(url, make_app):
    produced: list[str] = []

    def feed(seed: int) -> None:
        batch = _sentences(100, seed)
        produced.extend(batch)
        ks.produce("sentences", batch, bootstrap_servers=url, partitions=4)

    def assert_exact() -> None:
        app.wait_until_running().wait_until_idle()
        expected = expected_counts(produced)
        wait_for(lambda: store_dict(app) == expected, what="store counts")
        assert latest_per_key(url, "word-counts") == expected

    feed(1)
    app = make_app(word_count_topology(), application_id="elastic", num_stream_threads=1)
    app.start()
    assert_exact()
    assert _per_thread_subtopology(app) == [Counter({"0": 4, "1": 4})]

    name = app.add_stream_thread()
    assert name in {t.name for t in app.threads}
    feed(2)
    assert_exact()
    assert _per_thread_subtopology(app) == [Counter({"0": 2, "1": 2})] * 2
    assert name in app.assignment() and app.assignment()[name]

    app.add_stream_thread()
    feed(3)
    assert_exact()
    loads = sorted(sum(c.values()) for c in _per_thread_subtopology(app))
    assert loads == [2, 3, 3]

    removed = app.remove_stream_thread()
    assert removed not in app.assignment()
    feed(4)
    assert_exact()
    assert _per_thread_subtopology(app) == [Counter({"0": 2, "1": 2})] * 2

    app.remove_stream_thread()
    feed(5)
    assert_exact()
    assert _per_thread_subtopology(app) == [Counter({"0": 4, "1": 4})]
    assert app.metrics()["threads"] == 1


def test_two_instances_share_the_tasks_and_count_exactly(url, make_app):
    sentences = _sentences(200, seed=7)
    ks.produce("sentences", sentences[:100], bootstrap_servers=url, partitions=4)
    topology = word_count_topology()
    first = make_app(topology, application_id="shared")
    second = make_app(topology, application_id="shared")
    first.start()
    second.start()

    def both_have_tasks() -> bool:
        group = first.group_assignment()
        return (
            first.state is ks.State.RUNNING
            and second.state is ks.State.RUNNING
            and len({g["instance"] for g in group.values()}) == 2
            and all(first.assignment().values())
            and all(second.assignment().values())
        )

    wait_for(both_have_tasks, what="both instances running with tasks")
    group = first.group_assignment()
    assert {g["instance"] for g in group.values()} == {first.process_id, second.process_id}
    assert sorted(group) == [f"{s}_{p}" for s in (0, 1) for p in range(4)]
    mine = {tid for tasks in first.assignment().values() for tid in tasks}
    theirs = {tid for tasks in second.assignment().values() for tid in tasks}
    assert mine and theirs and not mine & theirs
    assert mine | theirs == set(group)

    ks.produce("sentences", sentences[100:], bootstrap_servers=url, partitions=4)
    first.wait_until_idle()
    second.wait_until_idle()
    expected = expected_counts(sentences)
    wait_for(lambda: latest_per_key(url, "word-counts") == expected, what="output counts")
    combined = {**store_dict(first), **store_dict(second)}
    assert combined == expected
    assert not set(store_dict(first)) & set(store_dict(second))


def test_wait_until_idle_waits_while_a_thread_has_not_taken_its_tasks(url, make_app):
    """A thread that failed and is being replaced, or that rebalances, holds no tasks: its partitions show
    no lag anywhere, so idle also needs every stream thread RUNNING (it was a race in a crash test)."""
    ks.produce("sentences", _sentences(50, seed=4), bootstrap_servers=url, partitions=2)
    app = make_app(_word_count("out"), num_stream_threads=2)
    app.start().wait_until_running(30)
    app.wait_until_idle(30)
    rebalancing = app.threads[1]
    rebalancing.state = "PARTITIONS_REVOKED"  # what a thread between two assignments reports
    try:
        with pytest.raises(TimeoutError):
            app.wait_until_idle(0.3)
    finally:
        rebalancing.state = "RUNNING"
    app.wait_until_idle(5)
