"""emit_strategy("on_window_close") across a restart: emission takes up where it stopped, each final result
once, from the last emit time committed with the offsets (Kafka's processor metadata)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

import kstream_nb as ks
from tests.runtime.test_record_cache import records

WINDOWS = {
    "tumbling": lambda: ks.TimeWindows.of(10_000).grace(0),
    "sliding": lambda: ks.SlidingWindows.of_time_difference_and_grace(10_000, 0),
    "session": lambda: ks.SessionWindows.of_inactivity_gap_and_grace(5_000, 0),
}


def final_counts(kind: str) -> ks.Topology:
    b = ks.StreamsBuilder()
    (
        b.stream("clicks")
        .group_by_key()
        .windowed_by(WINDOWS[kind]())
        .emit_strategy("on_window_close")
        .count(store="wc", retention="1m")  # keeps the windows a jump of stream time closes (as Kafka's store)
        .to_stream()
        .map(lambda w, n: (f"{w.key}@{w.start}", n))
        .to("final-counts")
    )
    return b.build()


def run_once(make_app: Callable[..., ks.KafkaStreams], kind: str, guarantee: str) -> None:
    app = make_app(final_counts(kind), processing_guarantee=guarantee)
    app.start().wait_until_running(30)
    app.wait_until_idle(30)
    assert app.stop(timeout=10)


@pytest.mark.parametrize("kind", list(WINDOWS))
def test_exactly_once_emits_each_final_result_once_across_a_restart(
    url: str, make_app: Callable[..., ks.KafkaStreams], kind: str
) -> None:
    ks.produce("clicks", [("a", 1), ("b", 1), ("c", 1)], bootstrap_servers=url, timestamps=[1_000, 2_000, 40_000])
    run_once(make_app, kind, "exactly_once_v2")
    first = records(url, "final-counts")
    assert {k.split("@")[0] for k, _ in first} == {"a", "b"}
    # after the restart: a late record for a closed window is dropped, c's window closes, nothing repeats
    ks.produce("clicks", [("a", 1), ("d", 1)], bootstrap_servers=url, timestamps=[3_000, 55_000])
    run_once(make_app, kind, "exactly_once_v2")
    after = records(url, "final-counts")
    assert after[: len(first)] == first
    emitted = [k for k, _ in after]
    assert len(emitted) == len(set(emitted)), f"a final result emitted twice: {after}"
    assert any(k.startswith("c@") for k in emitted[len(first) :])


def test_at_least_once_takes_up_emission_from_the_commit_metadata(
    url: str, make_app: Callable[..., ks.KafkaStreams]
) -> None:
    ks.produce("clicks", [("a", 1), ("b", 1), ("c", 1)], bootstrap_servers=url, timestamps=[1_000, 2_000, 25_000])
    run_once(make_app, "tumbling", "at_least_once")
    assert records(url, "final-counts") == [("a@0", 1), ("b@0", 1)]
    ks.produce("clicks", [("d", 1)], bootstrap_servers=url, timestamps=[45_000])
    run_once(make_app, "tumbling", "at_least_once")
    assert records(url, "final-counts") == [("a@0", 1), ("b@0", 1), ("c@20000", 1)]


def test_a_restarted_task_takes_up_its_stream_time(url: str, make_app: Callable[..., ks.KafkaStreams]) -> None:
    """Stream time (what stream-time punctuation and timestamp extractors see) is committed with the offsets."""
    ks.produce("clicks", [("a", 1), ("b", 1)], bootstrap_servers=url, timestamps=[7_000, 3_000])
    run_once(make_app, "tumbling", "at_least_once")
    again = make_app(final_counts("tumbling"))
    again.start().wait_until_running(30)
    (task,) = [t for thread in again.threads for t in thread.tasks.values()]
    assert task.stream_time == 7_000


def test_commit_metadata_of_another_client_is_ignored(
    url: str, make_app: Callable[..., ks.KafkaStreams], caplog: pytest.LogCaptureFixture
) -> None:
    ks.produce("clicks", [("a", 1), ("b", 1), ("c", 1)], bootstrap_servers=url, timestamps=[1_000, 2_000, 25_000])
    from kstream_nb.cluster import connect
    from kstream_nb.cluster.records import TopicPartition

    consumer = connect(url).consumer("app")
    consumer.commit({TopicPartition("clicks", 0): 1}, {TopicPartition("clicks", 0): "written by another tool"})
    consumer.close()
    run_once(make_app, "tumbling", "at_least_once")
    assert records(url, "final-counts") == [("b@0", 1)]  # a was before the committed offset
    assert "commit metadata of clicks-0 not understood" in caplog.text
