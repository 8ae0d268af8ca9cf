"""exactly_once_v2 on the embedded cluster: stream threads crash mid-batch and are replaced; counts stay exact.

Under exactly-once a task's outputs, changelog writes and consumed offsets become visible together at
commit; a crash discards the open transaction, the replacement restores the stores from the changelog
(committed writes only) and resumes from the committed offsets. Under at-least-once the same crashes may
duplicate updates, but never lose any.
"""

import itertools
import threading
import uuid
from collections import Counter

import numpy as np
import pytest

import kstream_nb as ks
from tests.helpers import wait_for

WORDS = [f"w{i}" for i in range(50)]


class Crash(Exception):
    pass


def sentences(n: int) -> list[str]:
    rng = np.random.default_rng(3)
    return [" ".join(rng.choice(WORDS, 4)) for _ in range(n)]


def topology(crash_at: set[int]) -> ks.Topology:
    calls = itertools.count()
    lock = threading.Lock()

    def split_or_crash(sentence: str) -> list[str]:
        with lock:
            n = next(calls)
        if n in crash_at:
            raise Crash(f"injected crash at call {n}")
        return sentence.split()

    b = ks.StreamsBuilder()
    counts = b.stream("sentences").flat_map_values(split_or_crash).group_by(lambda k, w: w).count(store="counts")
    counts.to_stream().to("counts-out")
    return b.build()


def run(guarantee: str, data: list[str]) -> tuple[dict[str, int], Counter[str], int]:
    url = f"memory://eos-{uuid.uuid4().hex[:8]}"
    ks.produce("sentences", data, bootstrap_servers=url, partitions=4)
    crash_at = {1_500, 4_000, 6_500, 9_000}
    app = ks.KafkaStreams(
        topology(crash_at), "eos-wc", url, num_stream_threads=2, processing_guarantee=guarantee,
        commit_interval_ms=50,
    )  # fmt: skip
    crashes = []

    def replace(error: BaseException) -> ks.ThreadFailureResponse:
        crashes.append(error)
        return ks.ThreadFailureResponse.REPLACE_THREAD

    app.set_uncaught_exception_handler(replace)
    try:
        app.start().wait_until_running(30)
        app.wait_until_idle(60)
        store = dict(app.store("counts").all())
    finally:
        assert app.stop()
    out = ks.read_topic("counts-out", bootstrap_servers=url)
    updates = Counter(out["key"])
    assert len(crashes) == len(crash_at), crashes
    return store, updates, int(out["value"].groupby(out["key"]).max().sum())


@pytest.mark.parametrize("n", [10_000])
def test_exactly_once_counts_are_exact_despite_crashes(n: int) -> None:
    data = sentences(n)
    expected = Counter(w for s in data for w in s.split())
    store, updates, _ = run("exactly_once_v2", data)
    assert store == dict(expected)
    # every increment was emitted exactly once: no duplicate and no lost update in the output topic
    assert updates == expected


def test_at_least_once_loses_nothing_and_may_duplicate() -> None:
    data = sentences(10_000)
    expected = Counter(w for s in data for w in s.split())
    store, updates, _ = run("at_least_once", data)
    assert all(store[w] >= c for w, c in expected.items())
    assert all(updates[w] >= c for w, c in expected.items())
    duplicates = sum(updates.values()) - sum(expected.values())
    print(f"at_least_once: {duplicates} duplicate updates after 4 crashes")


def test_a_rebuilt_transaction_drops_what_closing_the_tasks_flushed(url, make_app) -> None:
    """exactly-once, a transaction given up (the broker aborted it): the tasks are closed and rebuilt from the
    changelogs. What closing them flushed from their record caches belonged to the aborted transaction and
    never appears; the rebuilt tasks count the input again, once."""
    ks.produce("words", [("a", "x"), ("b", "x"), ("a", "x")], bootstrap_servers=url)
    b = ks.StreamsBuilder()
    b.stream("words").group_by_key().count(store="counts").to_stream().to("word-counts")
    app = make_app(
        b.build(),
        processing_guarantee="exactly_once_v2",
        statestore_cache_max_bytes=10_000_000,
        commit_interval_ms=60_000,
    )
    app.start().wait_until_running(30)
    wait_for(lambda: dict(app.store("counts").all()) == {"a": 2, "b": 1}, what="the counts in the cache")
    thread = app.threads[0]
    thread._transaction_corrupted = True  # what a failed commit_transaction that the broker aborted sets
    for task in list(thread.tasks.values()):
        task.commit_requested = True
    wait_for(lambda: not thread._transaction_corrupted, what="the tasks rebuilt")
    wait_for(lambda: dict(app.store("counts").all()) == {"a": 2, "b": 1}, what="the counts again")
    assert app.stop(timeout=10)
    out = ks.read_topic("word-counts", bootstrap_servers=url)
    assert sorted(zip(out["key"], out["value"])) == [("a", 2), ("b", 1)]
