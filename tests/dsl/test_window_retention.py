"""Window-store retention of windowed aggregations: ``retention=`` (Kafka's ``Materialized.withRetention``).

Kafka's rules (``WindowStoreMaterializer``, ``SlidingWindowStoreMaterializer``, ``SessionStoreMaterializer``):
the default retention is size + grace (time windows), 2 * time difference + grace (sliding windows), gap +
grace (sessions); a shorter retention is refused when the aggregation is defined. Kafka's default store
drops windows a segment (``max(retention / 2, 60 s)``) at a time: a window is kept retention + one segment.
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


def _windows_after(topology: ks.Topology, timestamps: list[int]) -> list[tuple[Any, int, int, Any]]:
    with ks.TopologyTestDriver(topology) as d:
        topic = d.create_input_topic("in")
        for ts in timestamps:
            topic.pipe_input("k", "v", timestamp=ts)
        store = d.get_state_store("c")
        return [(k, s, s + 10, vt.value) for k, s, vt in store.all()]


def test_default_retention_keeps_a_window_size_plus_grace_plus_one_segment() -> None:
    # retention 10 ms (size, no grace): window [0, 10) is kept 10 + 60_000 ms behind the latest window start
    topology = _tumbling_count()
    assert _windows_after(topology, [0, 60_005]) == [("k", 0, 10, 1), ("k", 60_000, 60_010, 1)]
    assert _windows_after(topology, [0, 60_015]) == [("k", 60_010, 60_020, 1)]


def test_a_longer_retention_keeps_old_windows_for_queries() -> None:
    topology = _tumbling_count(retention="2m")  # kept 120_000 + 60_000 ms
    assert _windows_after(topology, [0, 60_015, 179_995]) == [
        ("k", 0, 10, 1),
        ("k", 60_010, 60_020, 1),
        ("k", 179_990, 180_000, 1),
    ]
    assert _windows_after(topology, [0, 60_015, 180_005]) == [("k", 60_010, 60_020, 1), ("k", 180_000, 180_010, 1)]
    with ks.TopologyTestDriver(topology) as d:
        topic = d.create_input_topic("in")
        for ts in (3, 7, 60_015, 100_000):
            topic.pipe_input("k", "v", timestamp=ts)
        assert d.get_state_store("c").fetch("k", 0) == ks.ValueAndTimestamp(2, 7)


def test_retention_sets_the_changelog_retention() -> None:
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
