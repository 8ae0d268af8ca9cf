"""Join errors and table-driven join semantics not expressed by the conformance cases."""

from __future__ import annotations

import pandas as pd
import pytest

import kstream_nb as ks
from kstream_nb.processor.windows import JoinWindows


def _joiner(left: object, right: object) -> str:
    return f"{left}+{right}"


def test_stream_stream_join_without_windows_is_a_clear_error() -> None:
    b = ks.StreamsBuilder()
    with pytest.raises(TypeError, match="needs windows"):
        b.stream("a").join(b.stream("b"), _joiner)


def test_outer_join_with_a_table_is_a_clear_error() -> None:
    b = ks.StreamsBuilder()
    with pytest.raises(TypeError, match="only defined between two streams"):
        b.stream("a").outer_join(b.table("t"), _joiner, JoinWindows.of(10))  # type: ignore[arg-type]


def test_windows_on_a_stream_table_join_are_rejected() -> None:
    b = ks.StreamsBuilder()
    with pytest.raises(TypeError, match="windows apply only to stream-stream joins"):
        b.stream("a").join(b.table("t"), _joiner, JoinWindows.of(10))


def test_join_windows_must_not_be_negative() -> None:
    with pytest.raises(ValueError, match="negative"):
        JoinWindows(-10, 5)


def test_stream_table_join_table_updates_never_emit() -> None:
    b = ks.StreamsBuilder()
    b.stream("s").left_join(b.table("t"), _joiner).to("out")
    with ks.TopologyTestDriver(b.build()) as d:
        s, t = d.create_input_topic("s"), d.create_input_topic("t")
        out = d.create_output_topic("out")
        s.pipe_input("k", "A", timestamp=1)
        t.pipe_input("k", "x", timestamp=2)
        t.pipe_input("k", "y", timestamp=3)
        assert [(r.key, r.value, r.timestamp) for r in out.read_records_to_list()] == [("k", "A+None", 1)]
        s.pipe_input("k", "B", timestamp=4)
        t.pipe_input("k", None, timestamp=5)
        s.pipe_input("k", "C", timestamp=6)
        got = [(r.key, r.value, r.timestamp) for r in out.read_records_to_list()]
    assert got == [("k", "B+y", 4), ("k", "C+None", 6)]


def test_stream_table_inner_join_skips_missing_rows_and_null_values() -> None:
    b = ks.StreamsBuilder()
    b.stream("s").join(b.table("t"), _joiner).to("out")
    with ks.TopologyTestDriver(b.build()) as d:
        s, t = d.create_input_topic("s"), d.create_input_topic("t")
        s.pipe_input("k", "A", timestamp=1)
        t.pipe_input("k", "x", timestamp=2)
        s.pipe_input("k", None, timestamp=3)
        s.pipe_input("k", "B", timestamp=4)
        got = [(r.key, r.value, r.timestamp) for r in d.create_output_topic("out").read_records_to_list()]
    assert got == [("k", "B+x", 4)]


def _table_join(kind: str) -> list[tuple[object, object, int]]:
    b = ks.StreamsBuilder()
    left, right = b.table("l"), b.table("r")
    getattr(left, kind)(right, _joiner).to_stream().to("out")
    with ks.TopologyTestDriver(b.build()) as d:
        li, ri = d.create_input_topic("l"), d.create_input_topic("r")
        li.pipe_input("k", "L1", timestamp=1)
        ri.pipe_input("k", "R1", timestamp=5)
        li.pipe_input("k", "L2", timestamp=3)
        ri.pipe_input("k", None, timestamp=6)
        li.pipe_input("k", None, timestamp=7)
        ri.pipe_input("k", "R2", timestamp=8)
        return [(r.key, r.value, r.timestamp) for r in d.create_output_topic("out").read_records_to_list()]


def test_table_table_inner_join_tombstones() -> None:
    assert _table_join("join") == [
        ("k", "L1+R1", 5),
        ("k", "L2+R1", 5),  # max(3, 5)
        ("k", None, 6),  # right delete while the left row exists: tombstone
    ]


def test_table_table_left_join_tombstones() -> None:
    assert _table_join("left_join") == [
        ("k", "L1+None", 1),
        ("k", "L1+R1", 5),
        ("k", "L2+R1", 5),
        ("k", "L2+None", 6),  # right delete: left row remains, padded with None
        ("k", None, 7),  # left delete: tombstone
    ]


def test_table_table_outer_join_tombstones() -> None:
    assert _table_join("outer_join") == [
        ("k", "L1+None", 1),
        ("k", "L1+R1", 5),
        ("k", "L2+R1", 5),
        ("k", "L2+None", 6),
        ("k", None, 7),  # neither side remains
        ("k", "None+R2", 8),
    ]


def test_join_buffer_emits_closed_records_behind_an_open_one() -> None:
    """Kafka scans the whole outer buffer: an open right record at 0 does not hold back a closed left one at 5."""
    from kstream_nb.state.join_buffer import JoinBuffer

    buffer = JoinBuffer("b")
    buffer.add(0, False, "r", "right")  # right side: open while 0 + before(100) >= stream time
    buffer.add(5, True, "l", "left")  # left side: closed once 5 + after(0) < stream time
    buffer.advance_stream_time(10)
    assert buffer.expired(after_ms=0, before_ms=100, grace_ms=0) == [(5, True, "l", "left")]
    assert len(buffer) == 1


def test_merge_joiner_joins_dict_values_as_pandas_merge_does() -> None:
    b = ks.StreamsBuilder()
    b.stream("orders").left_join(b.table("users"), ks.merge_joiner()).to("out")
    with ks.TopologyTestDriver(b.build()) as d:
        orders, users = d.create_input_topic("orders"), d.create_input_topic("users")
        users.pipe_input("u1", {"name": "Ann", "id": 7}, timestamp=1)
        orders.pipe_input("u1", {"id": 1, "qty": 2}, timestamp=2)
        orders.pipe_input("u2", {"id": 2, "qty": 5}, timestamp=3)
        got = [(r.key, r.value) for r in d.create_output_topic("out").read_records_to_list()]
    left = pd.DataFrame([{"key": "u1", "id": 1, "qty": 2}, {"key": "u2", "id": 2, "qty": 5}])
    right = pd.DataFrame([{"key": "u1", "name": "Ann", "id": 7}])
    merged = left.merge(right, on="key", how="left", suffixes=("", "_right"))
    expected = [
        (row["key"], {k: int(v) if isinstance(v, float) else v for k, v in row.items() if k != "key" and v == v})
        for row in merged.to_dict("records")
    ]
    assert got == expected
    assert list(got[0][1]) == ["id", "qty", "name", "id_right"]


def test_merge_joiner_names_a_value_that_is_not_a_dict() -> None:
    with pytest.raises(ks.StreamsError, match="dict values, got a str on the right"):
        ks.merge_joiner()({"a": 1}, "x")
    with pytest.raises(ValueError, match="two different suffixes"):
        ks.merge_joiner(("_x", "_x"))
