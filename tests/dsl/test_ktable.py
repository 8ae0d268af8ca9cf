"""KTable: upsert/delete semantics of a table source, filter and map_values, to_stream."""

from __future__ import annotations

from typing import Any

import kstream_nb as ks
from kstream_nb.runtime.test_driver import TestRecord


def test_table_source_upserts_deletes_and_to_stream_emits_every_update() -> None:
    b = ks.StreamsBuilder()
    b.table("in", store="t").to_stream().to("out")
    with ks.TopologyTestDriver(b.build()) as d:
        i, o = d.create_input_topic("in"), d.create_output_topic("out")
        i.pipe_input("a", 1, timestamp=10)
        i.pipe_input("b", 2, timestamp=11)
        i.pipe_input("a", 3, timestamp=5)  # older timestamp still applied (non-versioned table)
        i.pipe_input("b", None, timestamp=12)
        assert o.read_records_to_list() == [
            TestRecord("a", 1, 10),
            TestRecord("b", 2, 11),
            TestRecord("a", 3, 5),
            TestRecord("b", None, 12),
        ]
        store = d.get_key_value_store("t")
        assert store.get("a") == 3
        assert store.get("b") is None
        assert d.get_timestamped_key_value_store("t").get("a") == ks.ValueAndTimestamp(3, 5)
        assert d.dropped_records_total == 0


def test_table_source_drops_null_keys_and_counts_them() -> None:
    b = ks.StreamsBuilder()
    b.table("in", store="t").to_stream().to("out")
    with ks.TopologyTestDriver(b.build()) as d:
        i, o = d.create_input_topic("in"), d.create_output_topic("out")
        i.pipe_input(None, 1, timestamp=1)
        i.pipe_input("k", 2, timestamp=2)
        i.pipe_input(None, 3, timestamp=3)
        assert o.read_records_to_list() == [TestRecord("k", 2, 2)]
        assert d.dropped_records_total == 2


def _filter_topology(materialize: str | None) -> ks.Topology:
    b = ks.StreamsBuilder()
    b.table("in").filter(lambda k, v: v % 2 == 0, store=materialize).to_stream().to("out")
    return b.build()


def _filter_run(topology: ks.Topology) -> list[TestRecord]:
    # KTableFilterTest.doTestKTable in Apache Kafka: same inputs, same outputs.
    with ks.TopologyTestDriver(topology) as d:
        i, o = d.create_input_topic("in"), d.create_output_topic("out")
        for key, value, ts in [
            ("A", 1, 10),
            ("B", 2, 5),
            ("C", 3, 8),
            ("D", 4, 14),
            ("A", None, 18),
            ("B", None, 15),
        ]:
            i.pipe_input(key, value, timestamp=ts)
        return o.read_records_to_list()


# Kafka (KTableFilter without sendOldValues, materialized or not) forwards a delete for every update
# that does not pass the filter, even for a row that never matched: the downstream cannot know.
KAFKA_FILTER_OUTPUT = [
    TestRecord("A", None, 10),
    TestRecord("B", 2, 5),
    TestRecord("C", None, 8),
    TestRecord("D", 4, 14),
    TestRecord("A", None, 18),
    TestRecord("B", None, 15),
]


def test_ktable_filter_emits_tombstones_like_kafka() -> None:
    assert _filter_run(_filter_topology(None)) == KAFKA_FILTER_OUTPUT


def test_materialized_ktable_filter_emits_same_and_stores_only_matching_rows() -> None:
    topology = _filter_topology("evens")
    assert _filter_run(topology) == KAFKA_FILTER_OUTPUT
    b = ks.StreamsBuilder()
    b.table("in").filter(lambda k, v: v % 2 == 0, store="evens").to_stream().to("out")
    with ks.TopologyTestDriver(b.build()) as d:
        i = d.create_input_topic("in")
        i.pipe_input("A", 2, timestamp=1)
        i.pipe_input("B", 3, timestamp=2)
        i.pipe_input("C", 4, timestamp=3)
        i.pipe_input("C", 5, timestamp=4)  # stops matching: deleted from the filtered table
        store = d.get_key_value_store("evens")
        assert (store.get("A"), store.get("B"), store.get("C")) == (2, None, None)


def test_ktable_filter_row_that_stops_matching_is_deleted_downstream() -> None:
    b = ks.StreamsBuilder()
    b.table("in").filter(lambda k, v: v > 10).to_stream().to("out")
    with ks.TopologyTestDriver(b.build()) as d:
        i, o = d.create_input_topic("in"), d.create_output_topic("out")
        i.pipe_input("x", 20, timestamp=1)
        i.pipe_input("x", 30, timestamp=2)
        i.pipe_input("x", 5, timestamp=3)
        assert o.read_records_to_list() == [
            TestRecord("x", 20, 1),
            TestRecord("x", 30, 2),
            TestRecord("x", None, 3),
        ]


def test_ktable_filter_not() -> None:
    b = ks.StreamsBuilder()
    b.table("in").filter_not(lambda k, v: v % 2 == 0).to_stream().to("out")
    with ks.TopologyTestDriver(b.build()) as d:
        i, o = d.create_input_topic("in"), d.create_output_topic("out")
        i.pipe_input("A", 1, timestamp=10)
        i.pipe_input("B", 2, timestamp=5)
        assert o.read_records_to_list() == [TestRecord("A", 1, 10), TestRecord("B", None, 5)]


def test_filtered_table_aggregation_subtracts_row_that_stops_matching() -> None:
    """Through a filter, a grouped-table aggregation sees a row leave and never-matching rows not at all."""
    b = ks.StreamsBuilder()
    (
        b.table("in")
        .filter(lambda k, v: v > 0)
        .group_by(lambda k, v: ("all", v))
        .reduce(lambda a, v: a + v, lambda a, v: a - v, store="sum")
        .to_stream()
        .to("out")
    )
    with ks.TopologyTestDriver(b.build()) as d:
        i, o = d.create_input_topic("in"), d.create_output_topic("out")
        i.pipe_input("a", 5, timestamp=1)
        i.pipe_input("b", -3, timestamp=2)  # never matches: no update of the sum
        i.pipe_input("c", 2, timestamp=3)
        i.pipe_input("a", -1, timestamp=4)  # stops matching: subtract 5
        i.pipe_input("b", None, timestamp=5)  # delete of a never-matching row: nothing
        assert o.read_records_to_list() == [
            TestRecord("all", 5, 1),
            TestRecord("all", 7, 3),
            TestRecord("all", 2, 4),
        ]
        assert d.get_key_value_store("sum").get("all") == 2


def test_ktable_map_values_keeps_tombstones_and_detects_arity() -> None:
    calls: list[Any] = []

    def mapper(v: Any) -> Any:
        calls.append(v)
        return v * 10

    b = ks.StreamsBuilder()
    t = b.table("in")
    t.map_values(mapper).to_stream().to("out1")
    t.map_values(lambda k, v: f"{k}={v}", store="mapped").to_stream().to("out2")
    with ks.TopologyTestDriver(b.build()) as d:
        i = d.create_input_topic("in")
        i.pipe_input("a", 1, timestamp=1)
        i.pipe_input("a", 2, timestamp=2)
        i.pipe_input("a", None, timestamp=3)
        assert d.create_output_topic("out1").read_records_to_list() == [
            TestRecord("a", 10, 1),
            TestRecord("a", 20, 2),
            TestRecord("a", None, 3),
        ]
        assert d.create_output_topic("out2").read_values_to_list() == ["a=1", "a=2", None]
        assert d.get_key_value_store("mapped").get("a") is None
        assert None not in calls  # the mapper is never called with a tombstone


def test_stream_to_table_latest_value_wins() -> None:
    b = ks.StreamsBuilder()
    b.stream("in").to_table(store="latest").to_stream().to("out")
    with ks.TopologyTestDriver(b.build()) as d:
        i, o = d.create_input_topic("in"), d.create_output_topic("out")
        i.pipe_input("k", "v1", timestamp=5)
        i.pipe_input("k", "v2", timestamp=1)
        assert d.get_key_value_store("latest").get("k") == "v2"
        i.pipe_input("k", None, timestamp=6)
        assert d.get_key_value_store("latest").get("k") is None
        assert o.read_values_to_list() == ["v1", "v2", None]
