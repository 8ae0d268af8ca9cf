"""Null keys through repartitions and into joins (KIP-962, as Kafka Streams 4): a repartition drops null keys
silently unless a join accepting them is downstream; stream-stream joins advance stream time on every record."""

from __future__ import annotations

from typing import Any

import kstream_nb as ks
from kstream_nb.processor.windows import JoinWindows


def _joiner(left: object, right: object) -> str:
    return f"{left}+{right}"


def _run(b: ks.StreamsBuilder, inputs: list[tuple[str, Any, Any, int]]) -> tuple[list[Any], int]:
    with ks.TopologyTestDriver(b.build()) as d:
        for topic, key, value, ts in inputs:
            d.create_input_topic(topic).pipe_input(key, value, timestamp=ts)
        out = [(r.key, r.value, r.timestamp) for r in d.create_output_topic("out").read_records_to_list()]
        return out, d.dropped_records_total


def test_explicit_repartition_drops_null_keys_without_counting() -> None:
    b = ks.StreamsBuilder()
    b.stream("s").repartition().to("out")
    assert _run(b, [("s", None, "a", 1), ("s", "k", "b", 2)]) == ([("k", "b", 2)], 0)


def test_a_left_join_downstream_keeps_null_keys_through_the_repartition() -> None:
    b = ks.StreamsBuilder()
    keyed = b.stream("s").select_key(lambda k, v: None if k is None else k.upper())
    keyed.left_join(b.stream("r"), _joiner, JoinWindows.of(10)).to("out")
    # the left side forwards the null-key record padded with None at once
    assert _run(b, [("s", None, "a", 1)]) == ([(None, "a+None", 1)], 0)


def test_an_inner_join_downstream_lets_the_repartition_drop_null_keys() -> None:
    b = ks.StreamsBuilder()
    keyed = b.stream("s").select_key(lambda k, v: k)
    keyed.join(b.stream("r"), _joiner, JoinWindows.of(10)).to("out")
    assert _run(b, [("s", None, "a", 1)]) == ([], 0)


def test_a_left_join_further_downstream_keeps_null_keys_through_every_repartition() -> None:
    b = ks.StreamsBuilder()
    twice = b.stream("s").repartition().repartition()
    twice.left_join(b.table("t"), _joiner).to("out")
    assert _run(b, [("s", None, "a", 1)]) == ([(None, "a+None", 1)], 0)


def test_the_right_side_of_an_outer_join_forwards_null_keys() -> None:
    b = ks.StreamsBuilder()
    b.stream("l").outer_join(b.stream("r"), _joiner, JoinWindows.of(10)).to("out")
    assert _run(b, [("r", None, "x", 5)]) == ([(None, "None+x", 5)], 0)


def test_a_null_key_advances_the_join_stream_time() -> None:
    b = ks.StreamsBuilder()
    b.stream("l").left_join(b.stream("r"), _joiner, JoinWindows.of(5).grace(0)).to("out")
    # stream time 30 from the null-key record: the record at 10 (window closed at 15) is padded at once
    got = _run(b, [("l", None, "n", 30), ("l", "k", "a", 10)])
    assert got == ([(None, "n+None", 30), ("k", "a+None", 10)], 0)


def test_a_join_store_no_longer_finds_records_behind_its_retention() -> None:
    b = ks.StreamsBuilder()
    left = b.stream("l")
    left.join(b.stream("r"), _joiner, JoinWindows.of(10).grace(0)).to("out")
    # the right store has seen 40: it keeps before + after + grace = 20 behind, so r@15 is gone for l@20
    got = _run(b, [("r", "k", "x", 15), ("r", "z", "y", 40), ("l", "k", "a", 20)])
    assert got == ([], 0)
