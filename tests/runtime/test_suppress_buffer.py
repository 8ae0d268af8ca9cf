"""The suppression buffer is a change-logged store: updates held back survive a restart or a task move.

Kafka Streams logs the buffer (``<application_id>-<store>-changelog``); without it, the final result of
every window still open when an instance stopped would never be emitted, while the input offsets behind
it are committed.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

import kstream_nb as ks
from tests.helpers import wait_for
from tests.runtime.test_record_cache import records

STORE = "final-store"  # suppress(name="final") names its buffer store "<name>-store", as Kafka does


def final_counts_topology() -> ks.Topology:
    b = ks.StreamsBuilder()
    (
        b.stream("clicks")
        .group_by_key()
        .windowed_by(ks.TimeWindows.of(10_000).grace(0))
        .count(store="wc")
        .suppress(ks.until_window_closes(), name="final")
        .to_stream()
        .map(lambda w, n: (f"{w.key}@{w.start}", n))
        .to("window-counts")
    )
    return b.build()


def latest_per_key_topology() -> ks.Topology:
    b = ks.StreamsBuilder()
    b.table("prices").suppress(ks.until_time_limit(5_000), name="final").to_stream().to("latest-prices")
    return b.build()


@pytest.mark.parametrize("cache_max_bytes", [0, 10_000_000], ids=["no-cache", "cached"])
def test_final_results_held_at_a_restart_are_emitted_after_it(
    url: str, make_app: Callable[..., ks.KafkaStreams], cache_max_bytes: int
) -> None:
    ks.produce("clicks", [("a", 1), ("a", 1), ("b", 1)], bootstrap_servers=url, timestamps=[1_000, 2_000, 3_000])
    app = make_app(final_counts_topology(), statestore_cache_max_bytes=cache_max_bytes)
    app.start().wait_until_running(30)
    app.wait_until_idle(30)
    assert app.stop(timeout=10)
    assert records(url, "window-counts") == []
    # the buffer's changelog holds the two windows' latest counts, keyed by window
    held = ks.read_topic(f"app-{STORE}-changelog", bootstrap_servers=url, key_serde="bytes", value_serde="bytes")
    assert len(held) >= 2 and held["value"].notna().all()

    ks.produce("clicks", [("a", 1), ("c", 1)], bootstrap_servers=url, timestamps=[4_000, 25_000])
    again = make_app(final_counts_topology(), statestore_cache_max_bytes=cache_max_bytes)
    again.start().wait_until_running(30)
    wait_for(lambda: len(records(url, "window-counts")) >= 2, what="the windows closed after the restart")
    again.wait_until_idle(30)
    assert sorted(records(url, "window-counts")) == [("a@0", 3), ("b@0", 1)]
    assert again.stop(timeout=10)
    # emitted keys are deleted from the buffer: its changelog ends with their tombstones
    log = ks.read_topic(f"app-{STORE}-changelog", bootstrap_servers=url, key_serde="bytes", value_serde="bytes")
    latest = log.sort_values("offset").drop_duplicates("key", keep="last")["value"]
    assert latest.isna().sum() == 2  # a@0 and b@0 released; c@20000 still held
    assert latest.notna().sum() == 1


def test_a_time_limited_buffer_keeps_each_keys_buffer_time_across_a_restart(
    url: str, make_app: Callable[..., ks.KafkaStreams]
) -> None:
    """until_time_limit releases a key 5 s after it entered the buffer, even if the app restarted meanwhile."""
    ks.produce("prices", [("x", 10), ("x", 11)], bootstrap_servers=url, timestamps=[1_000, 3_000])
    app = make_app(latest_per_key_topology())
    app.start().wait_until_running(30)
    app.wait_until_idle(30)
    assert app.stop(timeout=10)
    ks.produce("prices", [("y", 1)], bootstrap_servers=url, timestamps=[6_000])  # x entered at 1000: due at 6000
    again = make_app(latest_per_key_topology())
    again.start().wait_until_running(30)
    wait_for(lambda: records(url, "latest-prices") != [], what="x released after the restart")
    again.wait_until_idle(30)
    assert records(url, "latest-prices") == [("x", 11)]


def test_held_results_follow_their_task_to_another_instance(
    url: str, make_app: Callable[..., ks.KafkaStreams]
) -> None:
    """An instance leaves the group with windows buffered; the one that takes its tasks releases them."""
    ks.produce("clicks", [("a", 1), ("b", 1)], bootstrap_servers=url, partitions=2, timestamps=[1_000, 2_000])
    first = make_app(final_counts_topology())
    first.start().wait_until_running(30)
    first.wait_until_idle(30)
    second = make_app(final_counts_topology())
    second.start()
    assert first.stop(timeout=10)
    wait_for(
        lambda: sum(len(tasks) for tasks in second.assignment().values()) == 2,
        what="both tasks on the second instance",
    )
    ks.produce("clicks", [("a", 1), ("b", 1)], bootstrap_servers=url, timestamps=[30_000, 30_000])
    wait_for(lambda: len(records(url, "window-counts")) == 2, what="the held windows released")
    assert sorted(records(url, "window-counts")) == [("a@0", 1), ("b@0", 1)]


def test_the_buffer_logs_each_held_key_once_per_commit(url: str, make_app: Callable[..., ks.KafkaStreams]) -> None:
    """50 updates of one window within a commit: one changelog record, the latest (Kafka logs dirty keys
    at the commit), not one per update."""
    ks.produce("clicks", [("a", 1)] * 50, bootstrap_servers=url, timestamps=list(range(1_000, 1_050)))
    app = make_app(final_counts_topology(), commit_interval_ms=60_000)
    app.start().wait_until_running(30)
    app.wait_until_idle(30)
    buffer = app.metrics()["stores"][STORE]  # one task; the window is held, written 50 times
    assert (buffer["scope"], buffer["entries"], buffer["put_total"], buffer["delete_total"]) == (
        "in-memory-suppression",
        1,
        50,
        0,
    )
    assert app.stop(timeout=10)  # the final commit
    log = ks.read_topic(f"app-{STORE}-changelog", bootstrap_servers=url, key_serde="bytes", value_serde="bytes")
    assert len(log) == 1
    assert log["timestamp"].iloc[0] == 1_049  # the last update's
    again = make_app(final_counts_topology())
    again.start().wait_until_running(30)
    ks.produce("clicks", [("b", 1)], bootstrap_servers=url, timestamps=[30_000])
    wait_for(lambda: records(url, "window-counts") == [("a@0", 50)], what="the restored count released")
