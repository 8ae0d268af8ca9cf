"""Cogroup (Kafka's KIP-150): inputs and outputs of Kafka's CogroupedKStreamImplTest and the windowed
cogroup tests (TimeWindowed-, SlidingWindowed-, SessionWindowedCogroupedKStreamImplTest), and the topology
shape of CogroupedStreamAggregateBuilder: one aggregate processor per input on one store, a merge node,
a repartition per key-changed input."""

from __future__ import annotations

from typing import Any

import pytest

import kstream_nb as ks
from kstream_nb.dsl.window_stores import RetentionError


def adder(key: Any, value: Any, agg: str) -> str:  # Kafka's MockAggregator.TOSTRING_ADDER
    return f"{agg}+{value}"


def remover(key: Any, value: Any, agg: str) -> str:  # MockAggregator.TOSTRING_REMOVER
    return f"{agg}-{value}"


def concat(key: Any, value: Any, agg: str) -> str:
    return agg + value


def session_merger(key: Any, one: str, two: str) -> str:
    return f"{one}+{two}"


def _run(topology: ks.Topology, inputs: list[tuple[str, Any, Any, int]]) -> list[tuple[Any, ...]]:
    """Pipes (topic, key, value, timestamp) in order; returns what reached "out" as (key, value, timestamp),
    windowed keys as (key, start, end, value, timestamp)."""
    with ks.TopologyTestDriver(topology) as d:
        topics = {t: d.create_input_topic(t) for t in dict.fromkeys(t for t, *_ in inputs)}
        for topic, key, value, ts in inputs:
            topics[topic].pipe_input(key, value, timestamp=ts)
        out: list[tuple[Any, ...]] = []
        for r in d.create_output_topic("out").read_records_to_list():
            if isinstance(r.key, dict):
                out.append((r.key["key"], r.key["start"], r.key["end"], r.value, r.timestamp))
            else:
                out.append((r.key, r.value, r.timestamp))
        return out


def _two_streams() -> tuple[ks.StreamsBuilder, ks.KGroupedStream, ks.KGroupedStream]:
    b = ks.StreamsBuilder()
    return b, b.stream("one").group_by_key(), b.stream("two").group_by_key()


# ---- aggregation -------------------------------------------------------------------------------------


def test_single_stream_cogroup_is_an_aggregation() -> None:
    b = ks.StreamsBuilder()
    b.stream("one").group_by_key().cogroup(concat).aggregate(lambda: "").to_stream().to("out")
    got = _run(
        b.build(), [("one", "k1", "A", 0), ("one", "k2", "B", 0), ("one", "k2", "B", 0), ("one", "k1", "A", 0)]
    )
    assert got == [("k1", "A", 0), ("k2", "B", 0), ("k2", "BB", 0), ("k1", "AA", 0)]


def test_null_values_and_keys_are_dropped() -> None:
    b = ks.StreamsBuilder()
    b.stream("one").group_by_key().cogroup(concat).aggregate(lambda: "").to_stream().to("out")
    with ks.TopologyTestDriver(b.build()) as d:
        one = d.create_input_topic("one")
        for key, value in [("k1", "A"), ("k2", "B"), ("k2", None), (None, "C"), ("k2", "B"), ("k1", "A")]:
            one.pipe_input(key, value, timestamp=0)
        got = [(r.key, r.value) for r in d.create_output_topic("out").read_records_to_list()]
        assert got == [("k1", "A"), ("k2", "B"), ("k2", "BB"), ("k1", "AA")]
        assert d.dropped_records_total == 2


def test_two_streams_with_distinct_keys_result_timestamp_is_the_largest_seen() -> None:
    b, g1, g2 = _two_streams()
    g1.cogroup(concat).cogroup(g2, concat).aggregate(lambda: "").to_stream().to("out")
    inputs = [("one", "k1", "A", ts) for ts in (0, 1, 10, 100)]
    inputs += [("two", "k2", "B", ts) for ts in (100, 200, 1, 500, 500, 100)]
    assert _run(b.build(), inputs) == [
        ("k1", "A", 0), ("k1", "AA", 1), ("k1", "AAA", 10), ("k1", "AAAA", 100),
        ("k2", "B", 100), ("k2", "BB", 200), ("k2", "BBB", 200), ("k2", "BBBB", 500),
        ("k2", "BBBBB", 500), ("k2", "BBBBBB", 500),
    ]  # fmt: skip


def test_two_streams_with_shared_keys_update_one_aggregate_per_key() -> None:
    b, g1, g2 = _two_streams()
    g1.cogroup(concat).cogroup(g2, concat).aggregate(lambda: "", store="shared").to_stream().to("out")
    inputs = [("one", "k1", "A", 0), ("one", "k2", "A", 1), ("one", "k1", "A", 10), ("one", "k2", "A", 100)]
    keys_and_times = [("k2", 100), ("k2", 200), ("k1", 1), ("k2", 500), ("k1", 500), ("k2", 500), ("k3", 500)]
    inputs += [("two", k, "B", ts) for k, ts in [*keys_and_times, ("k2", 100)]]
    assert _run(b.build(), inputs)[:10] == [
        ("k1", "A", 0), ("k2", "A", 1), ("k1", "AA", 10), ("k2", "AA", 100), ("k2", "AAB", 100),
        ("k2", "AABB", 200), ("k1", "AAB", 10), ("k2", "AABBB", 500), ("k1", "AABB", 500), ("k2", "AABBBB", 500),
    ]  # fmt: skip
    with ks.TopologyTestDriver(b.build()) as d:
        for topic, key, value, ts in inputs:
            d.create_input_topic(topic).pipe_input(key, value, timestamp=ts)
        store = d.get_timestamped_key_value_store("shared")
        assert store.get("k2") == ks.ValueAndTimestamp("AABBBBB", 500)
        assert store.get("k3") == ks.ValueAndTimestamp("B", 500)


def test_each_input_has_its_own_aggregator_and_input_type() -> None:
    b, g1, g2 = _two_streams()
    (
        g1.cogroup(lambda k, v, agg: agg + int(v))  # strings on "one"
        .cogroup(g2, lambda k, v, agg: agg + v)  # numbers on "two"
        .aggregate(lambda: 0, store="sums")
        .to_stream()
        .to("out")
    )
    inputs: list[tuple[str, Any, Any, int]] = [("one", "k1", "1", 0), ("one", "k2", "1", 1)]
    inputs += [("one", "k1", "1", 10)]
    inputs += [("one", "k2", "1", 100)]
    inputs += [("two", k, v, ts) for k, v, ts in
               [("k2", 2, 100), ("k2", 2, 200), ("k1", 2, 1), ("k2", 2, 500), ("k1", 2, 500), ("k2", 3, 500),
                ("k3", 2, 500), ("k2", 2, 100)]]  # fmt: skip
    assert _run(b.build(), inputs) == [
        ("k1", 1, 0), ("k2", 1, 1), ("k1", 2, 10), ("k2", 2, 100), ("k2", 4, 100), ("k2", 6, 200), ("k1", 4, 10),
        ("k2", 8, 500), ("k1", 6, 500), ("k2", 11, 500), ("k3", 2, 500), ("k2", 13, 500),
    ]  # fmt: skip


def test_mixed_aggregators_and_three_inputs() -> None:
    b = ks.StreamsBuilder()
    g1, g2, g3 = (b.stream(t).group_by_key() for t in ("one", "two", "three"))
    g1.cogroup(remover).cogroup(g2, adder).cogroup(g3, concat).aggregate(lambda: "0").to_stream().to("out")
    inputs = [("one", "k1", "1", 0), ("one", "k2", "1", 1), ("one", "k1", "1", 10), ("one", "k2", "1", 100)]
    inputs += [("two", "k1", "2", 500), ("two", "k2", "2", 500), ("two", "k1", "2", 500), ("two", "k2", "2", 100)]
    inputs += [("three", "k1", "x", 7)]
    assert _run(b.build(), inputs) == [
        ("k1", "0-1", 0), ("k2", "0-1", 1), ("k1", "0-1-1", 10), ("k2", "0-1-1", 100),
        ("k1", "0-1-1+2", 500), ("k2", "0-1-1+2", 500), ("k1", "0-1-1+2+2", 500), ("k2", "0-1-1+2+2", 500),
        ("k1", "0-1-1+2+2x", 500),
    ]  # fmt: skip


def test_cogrouping_a_stream_again_replaces_its_aggregator() -> None:
    b, g1, g2 = _two_streams()
    g1.cogroup(concat).cogroup(g2, concat).cogroup(g1, remover).aggregate(lambda: "0").to_stream().to("out")
    assert _run(b.build(), [("one", "k", "a", 0), ("two", "k", "b", 1)]) == [("k", "0-a", 0), ("k", "0-ab", 1)]


# ---- topology --------------------------------------------------------------------------------------


NAMED_DESCRIPTION = """\
Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000000 (topics: [one])
      --> test-cogroup-agg-0
    Source: KSTREAM-SOURCE-0000000001 (topics: [two])
      --> test-cogroup-agg-1
    Processor: test-cogroup-agg-0 (stores: [store])
      --> test-cogroup-merge
      <-- KSTREAM-SOURCE-0000000000
    Processor: test-cogroup-agg-1 (stores: [store])
      --> test-cogroup-merge
      <-- KSTREAM-SOURCE-0000000001
    Processor: test-cogroup-merge (stores: [])
      --> KTABLE-TOSTREAM-0000000002
      <-- test-cogroup-agg-0, test-cogroup-agg-1
    Processor: KTABLE-TOSTREAM-0000000002 (stores: [])
      --> KSTREAM-SINK-0000000003
      <-- test-cogroup-merge
    Sink: KSTREAM-SINK-0000000003 (topic: out)
      <-- KTABLE-TOSTREAM-0000000002
"""


def test_named_processors_and_store() -> None:
    b, g1, g2 = _two_streams()
    g1.cogroup(concat).cogroup(g2, concat).aggregate(lambda: "", store="store", name="test").to_stream().to("out")
    topology = b.build()
    assert str(topology.describe()) == NAMED_DESCRIPTION
    assert topology.copartition_groups() == [["two", "one"]]


def test_generated_names_follow_kafkas_prefixes() -> None:
    b = ks.StreamsBuilder()
    b.stream("one").group_by_key().cogroup(concat).aggregate(lambda: "")
    (sub,) = b.build().describe().to_dict()["subtopologies"]
    assert [(n["name"], n.get("stores")) for n in sub["nodes"]] == [
        ("KSTREAM-SOURCE-0000000000", None),
        ("COGROUPKSTREAM-AGGREGATE-0000000002", ["COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000001"]),
        ("COGROUPKSTREAM-MERGE-0000000003", []),
    ]


def test_a_key_changed_input_is_repartitioned_alone_through_the_store_name() -> None:
    b, _, g2 = _two_streams()
    g1 = b.stream("three").map(lambda k, v: (v, k)).group_by_key()
    g1.cogroup(concat).cogroup(g2, concat).aggregate(lambda: "", store="store").to_stream().to("out")
    topology = b.build()
    assert list(topology.repartition_topics) == ["store-repartition"]
    subs = [{n["name"] for n in s["nodes"]} for s in topology.describe().to_dict()["subtopologies"]]
    aggregating = next(s for s in subs if "store-repartition-source" in s)
    assert {"KSTREAM-SOURCE-0000000001", "COGROUPKSTREAM-AGGREGATE-0000000007"} <= aggregating
    assert "COGROUPKSTREAM-AGGREGATE-0000000008" in aggregating
    assert {"KSTREAM-MAP-0000000003", "store-repartition-filter", "store-repartition-sink"} in [
        s - {"KSTREAM-SOURCE-0000000002"} for s in subs
    ]
    # the value of "three" becomes the key; a null new key is dropped before the repartition topic
    got = _run(topology, [("three", "x", "k", 1), ("two", "k", "B", 2), ("three", "y", None, 3)])
    assert got == [("k", "x", 1), ("k", "xB", 2)]


def test_named_grouping_names_the_repartition_topic() -> None:
    b, _, g2 = _two_streams()
    g1 = b.stream("three").select_key(lambda k, v: v).group_by_key(name="repartition-test")
    g1.cogroup(concat).cogroup(g2, concat).aggregate(lambda: "")
    assert list(b.build().repartition_topics) == ["repartition-test-repartition"]


def test_a_cogroup_aggregated_twice_repartitions_once() -> None:
    b = ks.StreamsBuilder()
    grouped = b.stream("one").map(lambda k, v: (v, k)).group_by_key(name="foo")
    cogrouped = grouped.cogroup(concat)
    cogrouped.aggregate(lambda: "")
    cogrouped.aggregate(lambda: "")
    topology = b.build()
    assert list(topology.repartition_topics) == ["foo-repartition"]
    source = topology.describe().to_dict()["subtopologies"][1]["nodes"][0]
    assert source["name"] == "foo-repartition-source" and len(source["successors"]) == 2


def test_one_grouping_in_two_cogroups_repartitions_per_store() -> None:
    b, _, g2 = _two_streams()
    g1 = b.stream("three").map(lambda k, v: (v, k)).group_by_key()
    g1.cogroup(concat).cogroup(g2, concat).aggregate(lambda: "", store="a")
    g1.cogroup(concat).cogroup(g2, concat).aggregate(lambda: "", store="b")
    assert list(b.build().repartition_topics) == ["a-repartition", "b-repartition"]


def test_two_key_changed_inputs_need_a_name_each() -> None:
    b = ks.StreamsBuilder()
    g1 = b.stream("one").select_key(lambda k, v: v).group_by_key()
    g2 = b.stream("two").select_key(lambda k, v: v).group_by_key()
    with pytest.raises(ks.TopologyError, match=r"'s-repartition' already exists.*group_by_key\(name=\.\.\.\)"):
        g1.cogroup(concat).cogroup(g2, concat).aggregate(lambda: "", store="s")
    b = ks.StreamsBuilder()
    g1 = b.stream("one").select_key(lambda k, v: v).group_by_key()
    g2 = b.stream("two").select_key(lambda k, v: v).group_by_key(name="second")
    g1.cogroup(concat).cogroup(g2, concat).aggregate(lambda: "", store="s").to_stream().to("out")
    topology = b.build()
    assert list(topology.repartition_topics) == ["s-repartition", "second-repartition"]
    assert _run(topology, [("one", None, "k", 1), ("two", None, "k", 2)]) == [("k", "k", 1), ("k", "kk", 2)]


def test_bad_arguments() -> None:
    b, g1, g2 = _two_streams()
    with pytest.raises(TypeError, match="cogroup needs a grouped stream"):
        g1.cogroup(concat).cogroup(b.stream("x"), concat)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="needs a function"):
        g1.cogroup(concat).cogroup(g2, None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="needs a function"):
        g1.cogroup(concat).aggregate(None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="TimeWindows, SlidingWindows or SessionWindows"):
        g1.cogroup(concat).windowed_by(ks.JoinWindows.of(10))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="needs session_merger"):
        g1.cogroup(concat).windowed_by(ks.SessionWindows.with_gap(10)).aggregate(lambda: "")
    with pytest.raises(TypeError, match="only to SessionWindows"):
        g1.cogroup(concat).windowed_by(ks.TimeWindows.of(10)).aggregate(lambda: "", session_merger)
    other = ks.StreamsBuilder().stream("y").group_by_key()
    with pytest.raises(ks.TopologyError, match="different StreamsBuilders"):
        g1.cogroup(concat).cogroup(other, concat)


# ---- windowed ----------------------------------------------------------------------------------------


def _windowed(windows: Any, **aggregate: Any) -> ks.Topology:
    b, g1, g2 = _two_streams()
    table = g1.cogroup(adder).cogroup(g2, remover).windowed_by(windows).aggregate(lambda: "0", **aggregate)
    table.to_stream().to("out")
    return b.build()


def test_tumbling_windows() -> None:
    topology = _windowed(ks.TimeWindows.of(500))
    inputs = [("one", "k1", "A", 0), ("one", "k2", "A", 0), ("one", "k2", "A", 1), ("one", "k1", "A", 2)]
    inputs += [("two", "k1", "B", 3), ("two", "k2", "B", 3), ("two", "k2", "B", 501), ("two", "k1", "B", 501)]
    assert _run(topology, inputs) == [
        ("k1", 0, 500, "0+A", 0), ("k2", 0, 500, "0+A", 0), ("k2", 0, 500, "0+A+A", 1), ("k1", 0, 500, "0+A+A", 2),
        ("k1", 0, 500, "0+A+A-B", 3), ("k2", 0, 500, "0+A+A-B", 3),
        ("k2", 500, 1000, "0-B", 501), ("k1", 500, 1000, "0-B", 501),
    ]  # fmt: skip


def test_hopping_windows() -> None:
    topology = _windowed(ks.TimeWindows.of(500).advance_by(200))
    inputs = [("one", "k1", "A", 0), ("one", "k2", "A", 0), ("one", "k1", "B", 250), ("one", "k2", "B", 250)]
    inputs += [("one", "k2", "A", 500), ("one", "k1", "A", 500)]
    assert _run(topology, inputs) == [
        ("k1", 0, 500, "0+A", 0), ("k2", 0, 500, "0+A", 0),
        ("k1", 0, 500, "0+A+B", 250), ("k1", 200, 700, "0+B", 250),
        ("k2", 0, 500, "0+A+B", 250), ("k2", 200, 700, "0+B", 250),
        ("k2", 200, 700, "0+B+A", 500), ("k2", 400, 900, "0+A", 500),
        ("k1", 200, 700, "0+B+A", 500), ("k1", 400, 900, "0+A", 500),
    ]  # fmt: skip


def test_each_input_keeps_its_own_stream_time_for_late_records() -> None:
    topology = _windowed(ks.TimeWindows.of(10), store="w")
    inputs = [("one", "k", "A", 100), ("two", "k", "B", 5), ("one", "k", "C", 5)]
    with ks.TopologyTestDriver(topology) as d:
        for topic, key, value, ts in inputs:
            d.create_input_topic(topic).pipe_input(key, value, timestamp=ts)
        # "two" has seen nothing later than 5: its window [0, 10) is open; "one" is at 100: closed for it
        got = [(r.key["start"], r.value) for r in d.create_output_topic("out").read_records_to_list()]
        assert got == [(100, "0+A"), (0, "0-B")]
        assert d.dropped_records_total == 1
        # the store's stream time is 100: window 0 is past its retention (10), hidden as in Kafka's store
        assert d.get_state_store("w").fetch("k", 0) is None
        assert d.get_state_store("w").fetch("k", 100) == ks.ValueAndTimestamp("0+A", 100)


def test_sliding_windows() -> None:
    topology = _windowed(ks.SlidingWindows.of_time_difference_and_grace(500, 2000))
    inputs = [("one", "k1", "A", 500), ("one", "k2", "A", 500), ("one", "k1", "B", 750), ("two", "k2", "B", 750)]
    inputs += [("one", "k2", "A", 1000)]
    assert _run(topology, inputs) == [
        ("k1", 0, 500, "0+A", 500), ("k2", 0, 500, "0+A", 500),
        ("k1", 501, 1001, "0+B", 750), ("k1", 250, 750, "0+A+B", 750),
        ("k2", 501, 1001, "0-B", 750), ("k2", 250, 750, "0+A-B", 750),
        ("k2", 501, 1001, "0-B+A", 1000), ("k2", 751, 1251, "0+A", 1000), ("k2", 500, 1000, "0+A-B+A", 1000),
    ]  # fmt: skip


def test_session_windows_merge_sessions_across_inputs() -> None:
    topology = _windowed(ks.SessionWindows.with_gap(100), session_merger=session_merger, store="sessions")
    inputs = [("one", "k1", "A", 0), ("one", "k2", "A", 0), ("one", "k2", "A", 1), ("one", "k1", "A", 2)]
    inputs += [("two", "k1", "B", 3), ("two", "k2", "B", 3), ("two", "k2", "B", 444), ("two", "k1", "B", 444)]
    assert _run(topology, inputs) == [
        ("k1", 0, 0, "0+A", 0), ("k2", 0, 0, "0+A", 0),
        ("k2", 0, 0, None, 0), ("k2", 0, 1, "0+0+A+A", 1),
        ("k1", 0, 0, None, 0), ("k1", 0, 2, "0+0+A+A", 2),
        ("k1", 0, 2, None, 2), ("k1", 0, 3, "0+0+0+A+A-B", 3),
        ("k2", 0, 1, None, 1), ("k2", 0, 3, "0+0+0+A+A-B", 3),
        ("k2", 444, 444, "0-B", 444), ("k1", 444, 444, "0-B", 444),
    ]  # fmt: skip


def test_windowed_store_name_retention_and_close_time() -> None:
    b, g1, g2 = _two_streams()
    cogrouped = g1.cogroup(adder).cogroup(g2, remover)
    windows = ks.TimeWindows.of(500).grace(100)
    with pytest.raises(RetentionError, match="'w' must be no smaller than its window size plus the grace period"):
        cogrouped.windowed_by(windows).aggregate(lambda: "0", store="w", retention=599)
    table = cogrouped.windowed_by(windows).aggregate(lambda: "0", store="w", retention="1h", name="win")
    assert table.window_close_ms == 100 and table.store_name == "w"
    assert getattr(b.build().store_builders["w"], "retention_ms") == 3_600_000 + 1_800_000  # noqa: B009
    session = cogrouped.windowed_by(ks.SessionWindows.with_gap(10).grace(5)).aggregate(lambda: "0", session_merger)
    assert session.window_close_ms == 15


def test_windowed_cogroup_result_can_be_suppressed_until_windows_close() -> None:
    b, g1, g2 = _two_streams()
    (
        g1.cogroup(adder)
        .cogroup(g2, remover)
        .windowed_by(ks.TimeWindows.of(10))
        .aggregate(lambda: "0")
        .suppress(ks.until_window_closes())
        .to_stream()
        .to("out")
    )
    inputs = [("one", "k", "A", 1), ("two", "k", "B", 2), ("one", "k", "C", 12), ("two", "k", "D", 20)]
    assert _run(b.build(), inputs) == [("k", 0, 10, "0+A-B", 2), ("k", 10, 20, "0+C", 12)]
