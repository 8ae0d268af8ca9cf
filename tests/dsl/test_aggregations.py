"""Grouped stream and grouped table aggregations: count, reduce, aggregate (Kafka's KGroupedStream/Table)."""

from __future__ import annotations

from typing import Any

import kstream_nb as ks
from kstream_nb.runtime.test_driver import TestRecord

# Seed 000: the same five records read as a KStream and as a KTable, summed per key.
SEED_RECORDS = [("Jack", 1), ("Lily", 2), ("Mike", 4), ("Jack", 3), ("Lily", 5)]


def _pipe(d: ks.TopologyTestDriver, topic: str, records: list[tuple[Any, Any, int]]) -> None:
    i = d.create_input_topic(topic)
    for key, value, ts in records:
        i.pipe_input(key, value, timestamp=ts)


def _seed() -> list[tuple[Any, Any, int]]:
    return [(k, v, ts) for ts, (k, v) in enumerate(SEED_RECORDS, start=1)]


def test_seed_000_summing_a_kstream_adds_every_record() -> None:
    b = ks.StreamsBuilder()
    b.stream("sales").group_by_key().reduce(lambda a, v: a + v, store="stream-sums").to_stream().to("out")
    with ks.TopologyTestDriver(b.build()) as d:
        _pipe(d, "sales", _seed())
        assert d.create_output_topic("out").read_records_to_list() == [
            TestRecord("Jack", 1, 1),
            TestRecord("Lily", 2, 2),
            TestRecord("Mike", 4, 3),
            TestRecord("Jack", 4, 4),
            TestRecord("Lily", 7, 5),
        ]
        store = d.get_key_value_store("stream-sums")
        assert {k: store.get(k) for k in ("Jack", "Lily", "Mike")} == {"Jack": 4, "Lily": 7, "Mike": 4}


def test_seed_000_summing_a_kstream_with_aggregate_gives_the_same() -> None:
    b = ks.StreamsBuilder()
    b.stream("sales").group_by_key().aggregate(lambda: 0, lambda k, v, agg: agg + v, store="s")
    with ks.TopologyTestDriver(b.build()) as d:
        _pipe(d, "sales", _seed())
        store = d.get_key_value_store("s")
        assert {k: store.get(k) for k in ("Jack", "Lily", "Mike")} == {"Jack": 4, "Lily": 7, "Mike": 4}


def test_seed_000_summing_a_ktable_replaces_each_keys_value() -> None:
    b = ks.StreamsBuilder()
    (
        b.table("sales")
        .group_by(lambda k, v: (k, v))
        .aggregate(lambda: 0, lambda k, v, agg: agg + v, lambda k, v, agg: agg - v, store="table-sums")
        .to_stream()
        .to("out")
    )
    with ks.TopologyTestDriver(b.build()) as d:
        _pipe(d, "sales", _seed())
        # Jack 1 -> 3 and Lily 2 -> 5 are updates of the same group key: one output each (rule 7)
        assert d.create_output_topic("out").read_records_to_list() == [
            TestRecord("Jack", 1, 1),
            TestRecord("Lily", 2, 2),
            TestRecord("Mike", 4, 3),
            TestRecord("Jack", 3, 4),
            TestRecord("Lily", 5, 5),
        ]
        store = d.get_key_value_store("table-sums")
        assert {k: store.get(k) for k in ("Mike", "Jack", "Lily")} == {"Mike": 4, "Jack": 3, "Lily": 5}


def test_count_reduce_aggregate_skip_null_values_and_keys() -> None:
    b = ks.StreamsBuilder()
    g = b.stream("in").group_by_key()
    g.count(store="count").to_stream().to("count-out")
    g.reduce(lambda a, v: f"{a}+{v}", store="reduce")
    g.aggregate(lambda: "0", lambda k, v, agg: f"{agg}+{v}", store="agg")
    with ks.TopologyTestDriver(b.build()) as d:
        _pipe(d, "in", [("a", "x", 1), ("a", None, 2), (None, "y", 3), ("a", "z", 4)])
        assert d.create_output_topic("count-out").read_records_to_list() == [
            TestRecord("a", 1, 1),
            TestRecord("a", 2, 4),
        ]
        assert d.get_key_value_store("count").get("a") == 2
        assert d.get_key_value_store("reduce").get("a") == "x+z"
        assert d.get_key_value_store("agg").get("a") == "0+x+z"
        assert d.dropped_records_total == 6  # two skipped records, in each of three aggregations


def test_reduce_result_timestamp_is_max_of_previous_and_record() -> None:
    # Kafka's KGroupedStreamImplTest.shouldReduceAndMaterializeResults (conformance
    # grouped-stream-reduce-table-state).
    b = ks.StreamsBuilder()
    b.stream("topic").group_by_key().reduce(lambda v1, v2: f"{v1}+{v2}", store="reduce")
    records = [("1", "A", 5), ("2", "B", 1), ("1", "C", 3), ("1", "D", 10), ("3", "E", 8), ("3", "F", 9)]
    with ks.TopologyTestDriver(b.build()) as d:
        _pipe(d, "topic", [*records, ("3", None, 11)])
        store = d.get_timestamped_key_value_store("reduce")
        assert store.get("1") == ks.ValueAndTimestamp("A+C+D", 10)
        assert store.get("2") == ks.ValueAndTimestamp("B", 1)
        assert store.get("3") == ks.ValueAndTimestamp("E+F", 9)


def test_out_of_order_record_does_not_move_the_result_timestamp_back() -> None:
    b = ks.StreamsBuilder()
    b.stream("in").group_by_key().count().to_stream().to("out")
    with ks.TopologyTestDriver(b.build()) as d:
        _pipe(d, "in", [("k", "a", 100), ("k", "b", 40), ("k", "c", 150)])
        assert d.create_output_topic("out").read_records_to_list() == [
            TestRecord("k", 1, 100),
            TestRecord("k", 2, 100),
            TestRecord("k", 3, 150),
        ]


def _word_count() -> ks.StreamsBuilder:
    b = ks.StreamsBuilder()
    (
        b.stream("lines")
        .flat_map_values(lambda line: line.lower().split())
        .group_by(lambda k, word: word)
        .count(store="word-counts")
        .to_stream()
        .to("counts")
    )
    return b


def test_stream_group_by_repartitions_into_two_subtopologies() -> None:
    topology = _word_count().build()
    text = str(topology.describe())
    assert "Sub-topology: 0" in text and "Sub-topology: 1" in text
    assert "Sub-topology: 2" not in text
    [topic] = topology.repartition_topics
    assert topic.endswith("-repartition")
    assert f"(topic: {topic})" in text and f"(topics: [{topic}])" in text
    subs = topology.subtopologies()
    assert subs[0].sink_topics == (topic,)
    assert subs[1].source_topics == (topic,) and subs[1].stores == ("word-counts",)


def test_stream_group_by_counts_by_the_new_key() -> None:
    with ks.TopologyTestDriver(_word_count().build()) as d:
        _pipe(d, "lines", [(None, "the cat", 1), ("x", "The dog", 2), (None, "a cat", 3)])
        assert d.create_output_topic("counts").read_records_to_list() == [
            TestRecord("the", 1, 1),
            TestRecord("cat", 1, 1),
            TestRecord("the", 2, 2),
            TestRecord("dog", 1, 2),
            TestRecord("a", 1, 3),
            TestRecord("cat", 2, 3),
        ]
        store = d.get_key_value_store("word-counts")
        assert (store.get("the"), store.get("cat"), store.get("dog")) == (2, 2, 1)


def test_group_by_key_after_key_change_repartitions_and_drops_null_keys() -> None:
    b = ks.StreamsBuilder()
    b.stream("in").select_key(lambda k, v: v.get("user")).group_by_key().count(store="per-user")
    topology = b.build()
    assert len(topology.subtopologies()) == 2
    with ks.TopologyTestDriver(topology) as d:
        _pipe(d, "in", [("1", {"user": "u1"}, 1), ("2", {"user": None}, 2), ("3", {"user": "u1"}, 3)])
        assert d.get_key_value_store("per-user").get("u1") == 2


def test_group_by_key_without_key_change_does_not_repartition() -> None:
    b = ks.StreamsBuilder()
    b.stream("in").map_values(lambda v: v).group_by_key().count()
    assert len(b.build().subtopologies()) == 1


def test_grouped_table_rekey_subtracts_from_old_key_then_adds_to_new_key() -> None:
    # Kafka's KTableAggregateTest.testAggRepartition (conformance grouped-table-aggregate-rekey-subtract-then-add).
    def mapper(key: str, value: str) -> Any:
        if key == "null":
            return None, value
        if key == "NULL":
            return None
        return value, value

    b = ks.StreamsBuilder()
    (
        b.table("topic1")
        .group_by(mapper)
        .aggregate(lambda: "0", lambda k, v, agg: f"{agg}+{v}", lambda k, v, agg: f"{agg}-{v}")
        .to_stream()
        .to("out")
    )
    inputs = [
        ("A", "1", 10),
        ("A", None, 15),
        ("A", "1", 12),
        ("B", "2", 20),
        ("null", "3", 25),
        ("B", "4", 23),
        ("NULL", "5", 24),
        ("B", "7", 22),
    ]
    with ks.TopologyTestDriver(b.build(), {"default_key_serde": "string"}) as d:  # Kafka's test: String keys
        _pipe(d, "topic1", inputs)
        assert d.create_output_topic("out").read_records_to_list() == [
            TestRecord("1", "0+1", 10),
            TestRecord("1", "0+1-1", 15),
            TestRecord("1", "0+1-1+1", 15),
            TestRecord("2", "0+2", 20),
            TestRecord("2", "0+2-2", 23),
            TestRecord("4", "0+4", 23),
            TestRecord("4", "0+4-4", 23),
            TestRecord("7", "0+7", 22),
        ]


def test_grouped_table_count_moving_rows_and_reaching_zero() -> None:
    b = ks.StreamsBuilder()
    (
        b.table("users")
        .group_by(lambda user, region: (region, user))
        .count(store="per-region")
        .to_stream()
        .to("out")
    )
    with ks.TopologyTestDriver(b.build()) as d:
        _pipe(d, "users", [("alice", "eu", 1), ("bob", "eu", 2), ("alice", "us", 3), ("bob", None, 4)])
        assert d.create_output_topic("out").read_records_to_list() == [
            TestRecord("eu", 1, 1),
            TestRecord("eu", 2, 2),
            TestRecord("eu", 1, 3),  # alice leaves eu: subtraction first ...
            TestRecord("us", 1, 3),  # ... then the addition to the new group
            TestRecord("eu", 0, 4),  # zero is a value, not a delete
        ]
        store = d.get_key_value_store("per-region")
        assert (store.get("eu"), store.get("us")) == (0, 1)


def test_grouped_table_reduce_with_subtractor() -> None:
    b = ks.StreamsBuilder()
    (
        b.table("in")
        .group_by(lambda k, v: (k[0], v))
        .reduce(lambda a, v: a + v, lambda a, v: a - v, store="by-initial")
        .to_stream()
        .to("out")
    )
    with ks.TopologyTestDriver(b.build()) as d:
        _pipe(d, "in", [("ab", 5, 1), ("ac", 2, 2), ("ab", 1, 3), ("ac", None, 4)])
        assert d.create_output_topic("out").read_records_to_list() == [
            TestRecord("a", 5, 1),
            TestRecord("a", 7, 2),
            TestRecord("a", 3, 3),  # same group key: one output, 7 - 5 + 1
            TestRecord("a", 1, 4),
        ]
