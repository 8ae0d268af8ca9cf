"""Stateless KStream operations, driven through the TopologyTestDriver (inputs in, records out)."""

from __future__ import annotations

from typing import Any

import pytest

import kstream_nb as ks
from kstream_nb.runtime.test_driver import TestRecord


def run(build: Any, records: list[tuple[Any, Any, int]], outputs: tuple[str, ...] = ("out",)) -> Any:
    """Builds with ``build(stream)``, pipes ``records`` into "in", returns each output topic's records."""
    b = ks.StreamsBuilder()
    build(b.stream("in"))
    with ks.TopologyTestDriver(b.build()) as d:
        i = d.create_input_topic("in")
        outs = [d.create_output_topic(name) for name in outputs]
        for key, value, ts in records:
            i.pipe_input(key, value, timestamp=ts)
        result = [o.read_records_to_list() for o in outs]
    return result[0] if len(outputs) == 1 else result


def test_filter_and_filter_not() -> None:
    records = [("a", 1, 10), ("b", 2, 11), ("c", 3, 12)]
    out = run(lambda s: s.filter(lambda k, v: v % 2 == 1).to("out"), records)
    assert out == [TestRecord("a", 1, 10), TestRecord("c", 3, 12)]
    out = run(lambda s: s.filter_not(lambda k, v: v % 2 == 1).to("out"), records)
    assert out == [TestRecord("b", 2, 11)]


def test_map_values_detects_arity() -> None:
    out = run(lambda s: s.map_values(str.upper).to("out"), [("k", "abc", 5)])
    assert out == [TestRecord("k", "ABC", 5)]
    out = run(lambda s: s.map_values(lambda k, v: f"{k}:{v}").to("out"), [("k", "abc", 5)])
    assert out == [TestRecord("k", "k:abc", 5)]
    out = run(lambda s: s.map_values(lambda v: v * 2).to("out"), [("k", 21, 5)])
    assert out == [TestRecord("k", 42, 5)]


def test_map_values_rejects_three_argument_function() -> None:
    b = ks.StreamsBuilder()
    with pytest.raises(TypeError, match="map_values"):
        b.stream("in").map_values(lambda a, b, c: a)


def test_map_replaces_key_and_value_keeping_timestamp() -> None:
    out = run(lambda s: s.map(lambda k, v: (v, k)).to("out"), [("k", "v", 7)])
    assert out == [TestRecord("v", "k", 7)]
    out = run(lambda s: s.map(lambda k, v: ks.KeyValue(k * 2, v + 1)).to("out"), [("x", 1, 8)])
    assert out == [TestRecord("xx", 2, 8)]


def test_flat_map_emits_each_pair_with_the_input_timestamp() -> None:
    out = run(
        lambda s: s.flat_map(lambda k, v: [(f"{k}{n}", n) for n in range(v)]).to("out"),
        [("a", 3, 100), ("b", 0, 101), ("c", 1, 102)],
    )
    assert out == [
        TestRecord("a0", 0, 100),
        TestRecord("a1", 1, 100),
        TestRecord("a2", 2, 100),
        TestRecord("c0", 0, 102),
    ]


def test_flat_map_values_keeps_key_and_timestamp() -> None:
    out = run(lambda s: s.flat_map_values(str.split).to("out"), [("k", "hello big world", 9)])
    assert out == [TestRecord("k", "hello", 9), TestRecord("k", "big", 9), TestRecord("k", "world", 9)]
    out = run(lambda s: s.flat_map_values(lambda k, v: [k] * v).to("out"), [("z", 2, 3)])
    assert out == [TestRecord("z", "z", 3), TestRecord("z", "z", 3)]


def test_flat_map_values_returning_a_string_is_an_error() -> None:
    with pytest.raises(ks.ProcessingError, match="iterable"):
        run(lambda s: s.flat_map_values(lambda v: v).to("out"), [("k", "abc", 1)])


def test_select_key_replaces_only_the_key() -> None:
    out = run(lambda s: s.select_key(lambda k, v: v["user"]).to("out"), [(None, {"user": "u1", "n": 1}, 4)])
    assert out == [TestRecord("u1", {"user": "u1", "n": 1}, 4)]


def test_peek_sees_every_record_and_forwards_it() -> None:
    seen: list[tuple[Any, Any]] = []
    out = run(lambda s: s.peek(lambda k, v: seen.append((k, v))).to("out"), [("a", 1, 1), ("b", 2, 2)])
    assert seen == [("a", 1), ("b", 2)]
    assert out == [TestRecord("a", 1, 1), TestRecord("b", 2, 2)]


def test_foreach_is_terminal_and_calls_action() -> None:
    seen: list[tuple[Any, Any]] = []
    b = ks.StreamsBuilder()
    result = b.stream("in").foreach(lambda k, v: seen.append((k, v)))
    assert result is None
    with ks.TopologyTestDriver(b.build()) as d:
        d.create_input_topic("in").pipe_input("a", 1, timestamp=0)
        assert d.produced_topic_names() == []
    assert seen == [("a", 1)]


def test_merge_keeps_processing_order_not_timestamp_order() -> None:
    b = ks.StreamsBuilder()
    b.stream("left").merge(b.stream("right")).to("out")
    with ks.TopologyTestDriver(b.build()) as d:
        left, right = d.create_input_topic("left"), d.create_input_topic("right")
        out = d.create_output_topic("out")
        left.pipe_input("A", "l1", timestamp=50)
        right.pipe_input("B", "r1", timestamp=10)
        left.pipe_input("C", "l2", timestamp=30)
        right.pipe_input("D", "r2", timestamp=60)
        assert out.read_records_to_list() == [
            TestRecord("A", "l1", 50),
            TestRecord("B", "r1", 10),
            TestRecord("C", "l2", 30),
            TestRecord("D", "r2", 60),
        ]


def _split_topology(default: bool) -> tuple[ks.Topology, dict[str, ks.KStream]]:
    b = ks.StreamsBuilder()
    split = (
        b.stream("in")
        .split("b-")
        .branch(lambda k, v: v > 10, name="big")
        .branch(lambda k, v: v > 5)  # unnamed: numbered from 1 -> "b-2" (its position)
    )
    branches = split.default_branch() if default else split.no_default_branch()
    for name, stream in branches.items():
        stream.to(name)
    return b.build(), branches


def test_split_first_matching_branch_wins_and_default_gets_the_rest() -> None:
    topology, branches = _split_topology(default=True)
    assert sorted(branches) == ["b-0", "b-2", "b-big"]
    with ks.TopologyTestDriver(topology) as d:
        i = d.create_input_topic("in")
        outs = {n: d.create_output_topic(n) for n in branches}
        for n, (k, v) in enumerate([("a", 20), ("b", 7), ("c", 1), ("d", 11)]):
            i.pipe_input(k, v, timestamp=n)
        # 20 matches both predicates: only the first branch gets it
        assert outs["b-big"].read_key_values_to_list() == [("a", 20), ("d", 11)]
        assert outs["b-2"].read_key_values_to_list() == [("b", 7)]
        assert outs["b-0"].read_key_values_to_list() == [("c", 1)]


def test_split_without_default_drops_unmatched_records() -> None:
    topology, branches = _split_topology(default=False)
    assert sorted(branches) == ["b-2", "b-big"]
    with ks.TopologyTestDriver(topology) as d:
        i = d.create_input_topic("in")
        i.pipe_input("c", 1, timestamp=0)
        i.pipe_input("b", 6, timestamp=1)
        assert d.produced_topic_names() == ["b-2"]
        assert d.create_output_topic("b-2").read_key_values_to_list() == [("b", 6)]


def test_split_unnamed_branches_and_default_names() -> None:
    b = ks.StreamsBuilder()
    branches = b.stream("in").split().branch(lambda k, v: True).branch(lambda k, v: False).default_branch()
    assert sorted(branches) == ["0", "1", "2"]


def test_split_branch_chain_is_applied() -> None:
    b = ks.StreamsBuilder()
    branches = (
        b.stream("in")
        .split("s-")
        .branch(lambda k, v: v > 0, name="pos", chain=lambda s: s.map_values(lambda v: v * 100))
        .default_branch(name="rest")
    )
    branches["s-pos"].to("pos")
    branches["s-rest"].to("rest")
    with ks.TopologyTestDriver(b.build()) as d:
        i = d.create_input_topic("in")
        i.pipe_input("a", 2, timestamp=0)
        i.pipe_input("b", -1, timestamp=0)
        assert d.create_output_topic("pos").read_values_to_list() == [200]
        assert d.create_output_topic("rest").read_values_to_list() == [-1]


def test_headers_are_preserved_through_stateless_operations() -> None:
    b = ks.StreamsBuilder()
    (
        b.stream("in")
        .filter(lambda k, v: True)
        .map_values(lambda v: v + 1)
        .map(lambda k, v: (k.upper(), v))
        .flat_map_values(lambda v: [v, v])
        .to("out")
    )
    headers = (("trace", b"t-1"), ("src", b"x"))
    with ks.TopologyTestDriver(b.build()) as d:
        d.create_input_topic("in").pipe_input("k", 1, timestamp=3, headers=headers)
        assert d.create_output_topic("out").read_records_to_list() == [
            TestRecord("K", 2, 3, headers),
            TestRecord("K", 2, 3, headers),
        ]


def test_mapper_returning_a_non_pair_names_the_processor() -> None:
    b = ks.StreamsBuilder()
    b.stream("in").map(lambda k, v: v, name="bad-mapper").to("out")
    with ks.TopologyTestDriver(b.build()) as d, pytest.raises(ks.ProcessingError) as err:
        d.create_input_topic("in").pipe_input("k", 5, timestamp=0)
    message = str(err.value)
    assert "bad-mapper" in message
    assert "(key, value) pair" in message
    assert err.value.processor == "bad-mapper"


def test_user_function_error_names_processor_topic_partition_and_offset() -> None:
    b = ks.StreamsBuilder()
    b.stream("in").map_values(lambda v: 10 // v, name="divide").to("out")
    with ks.TopologyTestDriver(b.build()) as d:
        i = d.create_input_topic("in")
        i.pipe_input("a", 5, timestamp=0)
        i.pipe_input("b", 2, timestamp=1)
        with pytest.raises(ks.ProcessingError) as err:
            i.pipe_input("c", 0, timestamp=2)
        assert d.create_output_topic("out").read_values_to_list() == [2, 5]
    e = err.value
    assert (e.processor, e.topic, e.partition, e.offset) == ("divide", "in", 0, 2)
    message = str(e)
    for part in ("ZeroDivisionError", "processor=divide", "topic=in", "partition=0", "offset=2"):
        assert part in message
    assert isinstance(e.__cause__, ZeroDivisionError)


def test_non_callable_argument_fails_at_build_time() -> None:
    b = ks.StreamsBuilder()
    with pytest.raises(TypeError, match="filter"):
        b.stream("in").filter(42)  # type: ignore[arg-type]
