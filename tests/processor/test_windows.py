"""Window math, grace/late drops and window-store retention, with exact inputs and outputs."""

from __future__ import annotations

import pytest

import kstream_nb as ks
from kstream_nb.processor.windows import SessionWindows, SlidingWindows, TimeWindows, Windowed


def test_hopping_window_starts_at_zero_and_boundaries() -> None:
    w = TimeWindows.of(10).advance_by(5)
    assert list(w.window_starts(0)) == [0]  # no negative-start window [-5, 5)
    assert list(w.window_starts(4)) == [0]
    assert list(w.window_starts(5)) == [0, 5]
    assert list(w.window_starts(9)) == [0, 5]
    assert list(w.window_starts(10)) == [5, 10]  # end is exclusive: 10 is not in [0, 10)
    assert list(w.window_starts(14)) == [5, 10]


def test_tumbling_window_starts() -> None:
    w = TimeWindows.of(10)
    assert list(w.window_starts(0)) == [0]
    assert list(w.window_starts(9)) == [0]
    assert list(w.window_starts(10)) == [10]


def test_hopping_window_starts_with_uneven_advance() -> None:
    assert list(TimeWindows.of(10).advance_by(3).window_starts(10)) == [3, 6, 9]


def test_window_definitions_reject_bad_sizes() -> None:
    with pytest.raises(ValueError, match="size"):
        TimeWindows(0)
    with pytest.raises(ValueError, match="advance"):
        TimeWindows.of(10).advance_by(11)
    with pytest.raises(ValueError, match="time difference"):
        SlidingWindows(0)
    with pytest.raises(ValueError, match="gap"):
        SessionWindows(0)


def _hopping_count(grace: int) -> tuple[ks.TopologyTestDriver, list[ks.Record]]:
    b = ks.StreamsBuilder()
    out: list[ks.Record] = []
    (
        b.stream("in")
        .group_by_key()
        .windowed_by(TimeWindows.of(10).advance_by(5).grace(grace))
        .count(store="c")
        .to_stream()
        .foreach(lambda k, v: out.append((k, v)))  # type: ignore[arg-type]
    )
    return ks.TopologyTestDriver(b.build()), out


def test_late_record_is_dropped_per_skipped_window() -> None:
    driver, out = _hopping_count(grace=0)
    with driver as d:
        i = d.create_input_topic("in")
        i.pipe_input("k", "a", timestamp=20)
        assert d.dropped_records_total == 0
        i.pipe_input("k", "late", timestamp=12)  # [5,15) closed (15 <= 20); [10,20) closed (20 <= 20)
        assert d.dropped_records_total == 2
        i.pipe_input("k", "partly", timestamp=16)  # [10,20) closed -> 1 drop; [15,25) open -> updated
        assert d.dropped_records_total == 3
    assert out == [
        (Windowed("k", 15, 25), 1),
        (Windowed("k", 20, 30), 1),
        (Windowed("k", 15, 25), 2),
    ]


def test_grace_keeps_window_open_until_end_plus_grace() -> None:
    driver, out = _hopping_count(grace=5)
    with driver as d:
        i = d.create_input_topic("in")
        i.pipe_input("k", "a", timestamp=20)
        i.pipe_input("k", "b", timestamp=14)  # [5,15): 15 + 5 <= 20 closed; [10,20): 25 > 20 open
        assert d.dropped_records_total == 1
        i.pipe_input("k", "c", timestamp=16)  # [10,20) and [15,25) open
        assert d.dropped_records_total == 1
        i.pipe_input("k", "d", timestamp=25)
        i.pipe_input("k", "e", timestamp=16)  # [10,20): 20 + 5 <= 25 closed; [15,25) open
        assert d.dropped_records_total == 2
    assert out[-1] == (Windowed("k", 15, 25), 3)


def test_window_store_keeps_state_until_window_can_no_longer_be_emitted() -> None:
    """on_window_close still emits a window whose close time is far behind its end (store keeps it)."""
    b = ks.StreamsBuilder()
    (
        b.stream("in")
        .group_by_key()
        .windowed_by(TimeWindows.of(10).grace(100))
        .emit_strategy("on_window_close")
        .count(store="c")
        .to_stream()
        .to("out")
    )
    with ks.TopologyTestDriver(b.build()) as d:
        i = d.create_input_topic("in")
        i.pipe_input("k", "a", timestamp=1)
        i.pipe_input("k", "b", timestamp=109)
        assert d.create_output_topic("out").read_records_to_list() == []
        i.pipe_input("k", "c", timestamp=110)
        got = d.create_output_topic("out").read_records_to_list()
    assert [(r.key, r.value, r.timestamp) for r in got] == [({"key": "k", "start": 0, "end": 10}, 1, 1)]
