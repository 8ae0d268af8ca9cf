"""Window-store retention of windowed aggregations: ``retention=`` (Kafka's ``Materialized.withRetention``).

Kafka's rules (``WindowStoreMaterializer``, ``SlidingWindowStoreMaterializer``, ``SessionStoreMaterializer``):
the default retention is size + grace (time windows), 2 * time difference + grace (sliding windows), gap +
grace (sessions); a shorter retention is refused when the aggregation is defined. The store contents and
final results below are what Kafka Streams 4.4 (TopologyTestDriver, default store, no cache) answers to the
same inputs, run with the reference runner (tests/reference): ``all()`` sees windows within the retention
behind the latest window start, and so does a single ``fetch``; emit-on-close time and sliding window
aggregations emit only closed windows within the retention (start >= stream time - retention), session
aggregations the sessions kept after the closing record's own update.
"""

from __future__ import annotations

from typing import Any

import pytest

import kstream_nb as ks
from kstream_nb.dsl.window_stores import RetentionError, minimum_retention_ms
from kstream_nb.state.builders import changelog_topic_config


def _tumbling_count(**retention: Any) -> ks.Topology:
    b = ks.StreamsBuilder()
    b.stream("in").group_by_key().windowed_by(ks.TimeWindows.of(10)).count(store="c", **retention)
    return b.build()


def _windows_after(topology: ks.Topology, timestamps: list[int]) -> list[tuple[int, Any]]:
    """(window start, count) of every window ``all()`` returns after the records (key "k") at ``timestamps``."""
    with ks.TopologyTestDriver(topology, {"statestore_cache_max_bytes": 0}) as d:
        topic = d.create_input_topic("in")
        for ts in timestamps:
            topic.pipe_input("k", "v", timestamp=ts)
        return [(s, vt.value) for _, s, vt in d.get_state_store("c").all()]


@pytest.mark.parametrize(
    ("retention", "timestamps", "windows"),
    [
        (None, [0, 25], [(20, 1)]),  # default retention: size 10 + grace 0
        (None, [0, 60_005], [(60_000, 1)]),
        (100, [0, 25], [(0, 1), (20, 1)]),
        (100, [0, 115], [(110, 1)]),
        (100, [0, 200], [(200, 1)]),
        ("2m", [0, 60_015, 179_995], [(60_010, 1), (179_990, 1)]),
        ("2m", [0, 60_015, 180_005], [(60_010, 1), (180_000, 1)]),
        ("2m", [0, 3, 60_015, 100_000], [(0, 2), (60_010, 1), (100_000, 1)]),
    ],
)
def test_queries_see_the_windows_within_the_retention(retention: Any, timestamps: list[int], windows: Any) -> None:
    topology = _tumbling_count() if retention is None else _tumbling_count(retention=retention)
    assert _windows_after(topology, timestamps) == windows


def test_a_window_past_the_retention_is_not_read_alone_either() -> None:
    """Kafka 4.4's segmented store hides a window past the retention from a single fetch as well (no cache)."""
    with ks.TopologyTestDriver(_tumbling_count()) as d:
        topic = d.create_input_topic("in")
        for ts in (3, 7, 25):
            topic.pipe_input("k", "v", timestamp=ts)
        store = d.get_state_store("c")
        assert [s for _, s, _ in store.all()] == [20]
        assert store.fetch("k", 0) is None
        assert store.fetch("k", 20) == ks.ValueAndTimestamp(1, 25)


def test_with_the_record_cache_windows_past_the_retention_are_read_from_the_cache() -> None:
    """Kafka 4.4 with its record cache (TopologyTestDriver, 10 MB): flushed windows stay in the cache and every
    read sees the cache over the store, so windows past the retention stay visible while cached."""
    with ks.TopologyTestDriver(_tumbling_count(), {"statestore_cache_max_bytes": 10 * 1024 * 1024}) as d:
        topic = d.create_input_topic("in")
        for ts in (3, 7, 25):
            topic.pipe_input("k", "v", timestamp=ts)
        store = d.get_state_store("c")
        assert [s for _, s, _ in store.all()] == [0, 20]
        assert store.fetch("k", 0) == ks.ValueAndTimestamp(2, 7)
        topic.pipe_input("k", "v", timestamp=60_015)
        assert [s for _, s, _ in store.all()] == [0, 20, 60_010]
        assert store.fetch("k", 0) == ks.ValueAndTimestamp(2, 7)
        assert store.fetch_range("k", 0, 30) == [
            (0, ks.ValueAndTimestamp(2, 7)),
            (20, ks.ValueAndTimestamp(1, 25)),
        ]


def _emitted(windows: Any, records: list[tuple[str, int]], **retention: Any) -> list[tuple[Any, ...]]:
    """(key, start, end, count) of the final results of an emit-on-close count over ``records``."""
    b = ks.StreamsBuilder()
    windowed = b.stream("in").group_by_key().windowed_by(windows).emit_strategy("on_window_close")
    windowed.count(store="c", **retention).to_stream().to("out")
    with ks.TopologyTestDriver(b.build(), {"statestore_cache_max_bytes": 0}) as d:
        topic = d.create_input_topic("in")
        for key, ts in records:
            topic.pipe_input(key, "v", timestamp=ts)
        out = d.create_output_topic("out").read_records_to_list()
    return [(r.key["key"], r.key["start"], r.key["end"], r.value) for r in out]


@pytest.mark.parametrize(
    ("windows", "records", "retention", "emitted"),
    [
        (ks.TimeWindows.of(10), [("b", 0), ("b", 0), ("b", 10)], None, [("b", 0, 10, 2)]),
        (ks.TimeWindows.of(10), [("b", 0), ("b", 0), ("b", 19)], None, [("b", 0, 10, 2)]),
        (ks.TimeWindows.of(30), [("b", 0), ("b", 0), ("b", 249)], 1000, [("b", 0, 30, 2)]),
        (ks.SlidingWindows.of(10), [("b", 0), ("b", 0), ("b", 30)], None, [("b", 0, 10, 2)]),
        # a time or sliding window closed by a jump past the retention is never emitted (Kafka's time-ordered
        # emit-on-close store reads start >= stream time - retention)
        (ks.TimeWindows.of(10), [("b", 0), ("b", 0), ("b", 20)], None, []),
        (ks.SlidingWindows.of(10), [("b", 0), ("b", 0), ("b", 31)], None, []),
        (ks.TimeWindows.of(10), [("b", 0), ("b", 0), ("b", 60_010)], None, []),
        # sessions are emitted while kept: until the 60 s segment holding their end is dropped (as Kafka)
        (ks.SessionWindows.with_gap(10), [("b", 0), ("b", 0), ("b", 60_000)], None, [("b", 0, 0, 2)]),
        (ks.SessionWindows.with_gap(10), [("b", 0), ("b", 0), ("b", 60_010)], None, []),
        # by end, start, then key (as Kafka)
        (
            ks.SessionWindows.with_gap(10),
            [("b", 5), ("a", 0), ("a", 5), ("c", 5), ("d", 3), ("z", 100)],
            None,
            [("d", 3, 3, 1), ("a", 0, 5, 2), ("b", 5, 5, 1), ("c", 5, 5, 1)],
        ),
    ],
)
def test_emit_on_close_emits_closed_windows_the_store_keeps(
    windows: Any, records: list[tuple[str, int]], retention: Any, emitted: list[tuple[Any, ...]]
) -> None:
    kwargs = {} if retention is None else {"retention": retention}
    assert _emitted(windows, records, **kwargs) == emitted


def test_retention_sets_the_changelog_retention_plus_one_segment() -> None:
    builder = _tumbling_count(retention="1h").store_builders["c"]
    assert changelog_topic_config(builder, 86_400_000) == {
        "cleanup.policy": "compact,delete",
        "retention.ms": str(3_600_000 + 1_800_000 + 86_400_000),
    }


@pytest.mark.parametrize(
    ("windows", "minimum", "what"),
    [
        (ks.TimeWindows.of(10).grace(5), 15, "window size plus the grace period"),
        (ks.TimeWindows.of(10).advance_by(2).grace(5), 15, "window size plus the grace period"),
        (ks.SlidingWindows.of(10).grace(2), 22, "2 \\* time difference plus the grace period"),
        (ks.SessionWindows.with_gap(10).grace(5), 15, "session inactivity gap plus the grace period"),
    ],
)
def test_retention_shorter_than_the_windows_stay_open_is_refused(windows: Any, minimum: int, what: str) -> None:
    assert minimum_retention_ms(windows) == minimum

    def count(retention: int) -> None:
        b = ks.StreamsBuilder()
        b.stream("in").group_by_key().windowed_by(windows).count(store="counts", retention=retention)

    message = f"'counts' must be no smaller than .*{what}.*retention={minimum - 1} ms"
    with pytest.raises(RetentionError, match=message):
        count(minimum - 1)
    count(minimum)  # the least that holds every open window is accepted


def test_retention_error_is_a_build_error_and_a_value_error() -> None:
    b = ks.StreamsBuilder()
    windowed = b.stream("in").group_by_key().windowed_by(ks.TimeWindows.of("1m"))
    with pytest.raises(ks.TopologyError):
        windowed.reduce(lambda a, v: v, retention="30s")
    with pytest.raises(ValueError, match="retention"):
        windowed.aggregate(lambda: 0, lambda k, v, a: a + 1, retention="59s")
    with pytest.raises(ValueError, match="retention: cannot parse"):
        windowed.count(retention="soon")


def test_session_and_sliding_stores_keep_their_retention() -> None:
    b = ks.StreamsBuilder()
    grouped = b.stream("in").group_by_key()
    grouped.windowed_by(ks.SessionWindows.with_gap(10)).count(store="sessions", retention="10m")
    grouped.windowed_by(ks.SlidingWindows.of(10)).count(store="sliding")
    stores = b.build().store_builders
    assert getattr(stores["sessions"], "retention_ms") == 600_000 + 300_000  # noqa: B009
    assert getattr(stores["sliding"], "retention_ms") == 20 + 60_000  # noqa: B009
