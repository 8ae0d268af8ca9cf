"""The record cache in running apps (``statestore_cache_max_bytes``): one update per key per commit, every
update without it, forwarding on eviction, and the TopologyTestDriver still emitting every update."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from runtime_helpers import word_count_topology

import kstream_nb as ks
from kstream_nb.errors import InvalidStateStoreError, UnknownTopicError
from tests.helpers import wait_for

SENTENCES = ["a b a", "b c"]
EVERY_UPDATE = [("a", 1), ("b", 1), ("a", 2), ("b", 2), ("c", 1)]


def records(url: str, topic: str, key_serde: str = "string_or_json") -> list[tuple[Any, Any]]:
    """The (key, value) pairs of ``topic`` in offset order (empty while the topic does not exist)."""
    try:
        frame = ks.read_topic(topic, bootstrap_servers=url, key_serde=key_serde)
    except UnknownTopicError:
        return []
    frame = frame.sort_values(["partition", "offset"])
    return list(zip(frame["key"], frame["value"]))


def counts_in_store(app: ks.KafkaStreams, store: str = "counts") -> dict[Any, Any]:
    try:
        return dict(app.store(store).all())
    except InvalidStateStoreError:
        return {}


def test_cached_count_forwards_and_logs_one_update_per_key_per_commit(
    url: str, make_app: Callable[..., ks.KafkaStreams]
) -> None:
    ks.produce("sentences", SENTENCES, bootstrap_servers=url)
    app = make_app(word_count_topology(), statestore_cache_max_bytes=10_000_000, commit_interval_ms=60_000)
    app.start().wait_until_running(30)
    # interactive queries read the cache: the counts are there before any commit wrote them below
    wait_for(lambda: counts_in_store(app) == {"a": 2, "b": 2, "c": 1}, what="counts in the store")
    assert records(url, "word-counts") == []
    assert records(url, "app-counts-changelog") == []
    assert app.stop(timeout=10)  # the final commit flushes the cache
    assert records(url, "word-counts") == [("a", 2), ("b", 2), ("c", 1)]
    assert records(url, "app-counts-changelog") == [("a", 2), ("b", 2), ("c", 1)]


def test_without_a_cache_every_update_is_forwarded_at_once_and_logged_at_the_commit(
    url: str, make_app: Callable[..., ks.KafkaStreams]
) -> None:
    """The output gets every update; the changelog, written at the commit, each key's latest only."""
    ks.produce("sentences", SENTENCES, bootstrap_servers=url)
    app = make_app(word_count_topology(), statestore_cache_max_bytes=0, commit_interval_ms=60_000)
    app.start().wait_until_running(30)
    wait_for(lambda: len(records(url, "word-counts")) == 5, what="every update")
    assert records(url, "word-counts") == EVERY_UPDATE
    assert records(url, "app-counts-changelog") == []
    assert app.stop(timeout=10)
    assert records(url, "app-counts-changelog") == [("a", 2), ("b", 2), ("c", 1)]


def test_a_small_cache_forwards_on_eviction_before_the_commit(
    url: str, make_app: Callable[..., ks.KafkaStreams]
) -> None:
    # "x" is updated three times in a row between new words: the cache (room for two entries) keeps one x
    sentences = [f"x x x w{i:02d}" for i in range(30)]
    expected = {"x": 90, **{f"w{i:02d}": 1 for i in range(30)}}
    ks.produce("sentences", sentences, bootstrap_servers=url)
    app = make_app(word_count_topology(), statestore_cache_max_bytes=600, commit_interval_ms=60_000)
    app.start().wait_until_running(30)
    # no commit for a minute: what reaches the output before the stop was flushed by evictions
    wait_for(lambda: records(url, "word-counts"), what="output forwarded on eviction")
    wait_for(lambda: counts_in_store(app) == expected, what="final counts")
    assert app.stop(timeout=10)
    out = records(url, "word-counts")
    assert dict(out) == expected
    assert len(out) < 120  # evicting one dirty entry flushes them all: far fewer than the 120 updates
    assert [value for key, value in out if key == "x"] == sorted({value for key, value in out if key == "x"})
    assert dict(records(url, "app-counts-changelog")) == expected


def table_count_topology() -> ks.Topology:
    b = ks.StreamsBuilder()
    b.table("users", store="users").group_by(lambda user, region: (region, user)).count(
        store="per-region"
    ).to_stream().to("region-counts")
    return b.build()


USERS = [("u1", "eu"), ("u2", "eu"), ("u3", "us"), ("u1", "us")]


def test_cached_table_source_and_table_count(url: str, make_app: Callable[..., ks.KafkaStreams]) -> None:
    ks.produce("users", USERS, bootstrap_servers=url)
    app = make_app(table_count_topology(), statestore_cache_max_bytes=10_000_000, commit_interval_ms=1_000)
    app.start().wait_until_running(30)
    wait_for(lambda: len(records(url, "region-counts")) >= 2, timeout=20, what="the counts")
    assert app.stop(timeout=10)
    # the table source flushed u2, u3 and u1 (latest: us) once; the count then flushed once per region
    assert records(url, "region-counts") == [("eu", 1), ("us", 2)]
    assert records(url, "app-users-changelog") == [("u2", "eu"), ("u3", "us"), ("u1", "us")]


@pytest.mark.parametrize("cache_max_bytes", [0, 10_000_000])
def test_the_test_driver_emits_every_update(cache_max_bytes: int) -> None:
    config = {"statestore_cache_max_bytes": cache_max_bytes}
    with ks.TopologyTestDriver(word_count_topology(), config) as driver:
        sentences = driver.create_input_topic("sentences")
        out = driver.create_output_topic("word-counts")
        sentences.pipe_value_list(SENTENCES)
        assert out.read_key_values_to_list() == EVERY_UPDATE
        assert dict(driver.get_key_value_store("counts").all()) == {"a": 2, "b": 2, "c": 1}
    with ks.TopologyTestDriver(table_count_topology(), config) as driver:
        users = driver.create_input_topic("users")
        out = driver.create_output_topic("region-counts")
        users.pipe_key_value_list(USERS)
        assert out.read_key_values_to_list() == [("eu", 1), ("eu", 2), ("us", 1), ("eu", 1), ("us", 2)]


def test_wait_until_idle_waits_for_the_cached_results(url: str, make_app: Callable[..., ks.KafkaStreams]) -> None:
    """Idle means the results are out: with updates still in the record cache, wait_until_idle asks for a
    commit (long before the 60 s commit interval) and returns once the outputs are written."""
    ks.produce("sentences", SENTENCES, bootstrap_servers=url)
    app = make_app(word_count_topology(), statestore_cache_max_bytes=10_000_000, commit_interval_ms=60_000)
    app.start().wait_until_running(30).wait_until_idle(10)
    assert records(url, "word-counts") == [("a", 2), ("b", 2), ("c", 1)]


# ---- window stores ----------------------------------------------------------------------------------

CLICKS = [("a", 1), ("a", 1), ("b", 1), ("a", 1)]
CLICK_TIMES = [1_000, 2_000, 3_000, 12_000]  # windows of 10 s: a@0 twice, b@0, a@10000


def windowed_count_topology(suppressed: bool = False) -> ks.Topology:
    b = ks.StreamsBuilder()
    counts = b.stream("clicks").group_by_key().windowed_by(ks.TimeWindows.of(10_000).grace(0)).count(store="wc")
    if suppressed:
        counts = counts.suppress(ks.until_window_closes())
    counts.to_stream().map(lambda w, n: (f"{w.key}@{w.start}", n)).to("window-counts")
    return b.build()


def test_cached_windowed_count_forwards_and_logs_one_update_per_window_per_commit(
    url: str, make_app: Callable[..., ks.KafkaStreams]
) -> None:
    """Kafka's CachingWindowStore: writes stay in the cache (interactive queries see them) until the commit,
    which forwards and logs each window's latest count once, in the order of the windows' last updates."""
    ks.produce("clicks", CLICKS, bootstrap_servers=url, timestamps=CLICK_TIMES)
    app = make_app(windowed_count_topology(), statestore_cache_max_bytes=10_000_000, commit_interval_ms=60_000)
    app.start().wait_until_running(30)
    expected = [("a", 0, 10_000, 2), ("a", 10_000, 20_000, 1), ("b", 0, 10_000, 1)]
    wait_for(lambda: app.store("wc").all() == expected, what="the cached windows in the store")
    assert app.store("wc").fetch("a") == [(0, 10_000, 2), (10_000, 20_000, 1)]
    assert records(url, "window-counts") == []
    assert records(url, "app-wc-changelog", key_serde="bytes") == []
    assert app.stop(timeout=10)
    assert records(url, "window-counts") == [("a@0", 2), ("b@0", 1), ("a@10000", 1)]
    # changelog keys: the key's bytes and the window start (8 bytes, big-endian)
    window = (10_000).to_bytes(8, "big")
    assert records(url, "app-wc-changelog", key_serde="bytes") == [
        (b"a" + bytes(8), 2),
        (b"b" + bytes(8), 1),
        (b"a" + window, 1),
    ]

    # the flushed changelog restores the (in-memory) windows: a restarted app counts on from them (the window
    # within the store's retention: [0, 10 s) is past it behind the restored windows' stream time, as in Kafka)
    ks.produce("clicks", [("a", 1)], bootstrap_servers=url, timestamps=[12_500])
    again = make_app(windowed_count_topology(), statestore_cache_max_bytes=10_000_000)
    again.start().wait_until_running(30)
    wait_for(lambda: ("a@10000", 2) in records(url, "window-counts"), what="the count restored and updated")


@pytest.mark.parametrize("cache_max_bytes", [0, 300, 10_000_000], ids=["no-cache", "evicting", "cached"])
def test_final_window_results_are_the_same_with_and_without_a_cache(
    url: str, make_app: Callable[..., ks.KafkaStreams], cache_max_bytes: int
) -> None:
    """until_window_closes() emits the same final counts whether the window store caches, evicts or not."""
    keys = [f"k{i % 7}" for i in range(200)]
    times = [i * 137 % 30_000 + (i // 40) * 10_000 for i in range(200)]  # out of order, some late
    ks.produce("clicks", list(zip(keys, [1] * 200, strict=True)), bootstrap_servers=url, timestamps=times)
    ks.produce("clicks", [("flush", 1)], bootstrap_servers=url, timestamps=[200_000])
    app = make_app(windowed_count_topology(suppressed=True), statestore_cache_max_bytes=cache_max_bytes)
    app.start().wait_until_running(30)
    app.wait_until_idle(30)
    expected: dict[str, int] = {}
    stream_time = -1
    for key, ts in zip(keys, times, strict=True):
        stream_time = max(stream_time, ts)
        start = ts - ts % 10_000
        if start + 10_000 > stream_time:  # grace 0: a window takes records until stream time reaches its end
            expected[f"{key}@{start}"] = expected.get(f"{key}@{start}", 0) + 1
    assert sorted(records(url, "window-counts")) == sorted(expected.items())


def test_changes_of_one_input_record_are_logged_once_per_key_in_the_topology_test_driver() -> None:
    """The driver commits after every input record: the three updates of "k" that one sentence makes are all
    forwarded, and the changelog gets the last of them (each key's latest at each commit)."""
    b = ks.StreamsBuilder()
    b.stream("sentences").flat_map_values(str.split).group_by_key().count(store="counts").to_stream().to("out")
    with ks.TopologyTestDriver(b.build(), {"application_id": "app"}) as driver:
        sentences = driver.create_input_topic("sentences")
        sentences.pipe_input("k", "a b a", timestamp=5)
        sentences.pipe_input("k", "c", timestamp=9)
        out = driver.create_output_topic("out")
        assert out.read_key_values_to_list() == [("k", 1), ("k", 2), ("k", 3), ("k", 4)]
        changelog = driver.create_output_topic("app-counts-changelog").read_records_to_list()
    assert [(r.key, r.value, r.timestamp) for r in changelog] == [("k", 3, 5), ("k", 4, 9)]
