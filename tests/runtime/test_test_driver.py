"""TopologyTestDriver: input/output topic helpers, timestamps, ordering of repartitioned records."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import pytest

import kstream_nb as ks
from kstream_nb.runtime.test_driver import TestRecord


def _pass_through() -> ks.Topology:
    b = ks.StreamsBuilder()
    b.stream("in").to("out")
    return b.build()


def test_pipe_value_list_uses_null_keys_and_auto_advancing_timestamps() -> None:
    with ks.TopologyTestDriver(_pass_through()) as d:
        i = d.create_input_topic("in", start_timestamp=1000, auto_advance="5s")
        i.pipe_value_list(["a", "b", "c"])
        assert d.create_output_topic("out").read_records_to_list() == [
            TestRecord(None, "a", 1000),
            TestRecord(None, "b", 6000),
            TestRecord(None, "c", 11000),
        ]


def test_pipe_key_value_list_and_explicit_timestamps_do_not_advance_the_clock() -> None:
    with ks.TopologyTestDriver(_pass_through()) as d:
        i = d.create_input_topic("in", start_timestamp=100, auto_advance=10)
        i.pipe_key_value_list([("k1", 1), ("k2", 2)])
        i.pipe_input("k3", 3, timestamp=5)  # explicit: used as is, input clock unchanged
        i.pipe_input("k4", 4)
        i.advance_time(1000)
        i.pipe_input("k5", 5)
        out = d.create_output_topic("out").read_records_to_list()
        assert [(r.key, r.value, r.timestamp) for r in out] == [
            ("k1", 1, 100),
            ("k2", 2, 110),
            ("k3", 3, 5),
            ("k4", 4, 120),
            ("k5", 5, 1130),
        ]


def test_default_start_timestamp_is_the_drivers_wall_clock() -> None:
    with ks.TopologyTestDriver(_pass_through(), initial_wall_clock_ms=42_000) as d:
        d.create_input_topic("in").pipe_input("v")
        assert d.create_output_topic("out").read_record() == TestRecord(None, "v", 42_000)


def test_timestamps_as_datetime_and_iso_string() -> None:
    with ks.TopologyTestDriver(_pass_through()) as d:
        i = d.create_input_topic("in")
        i.pipe_input("k", 1, timestamp=datetime(2024, 1, 1, tzinfo=timezone.utc))
        i.pipe_input("k", 2, timestamp="2024-01-01T00:00:01Z")
        assert [r.timestamp for r in d.create_output_topic("out").read_records_to_list()] == [
            1_704_067_200_000,
            1_704_067_201_000,
        ]


def test_pipe_records_with_headers() -> None:
    with ks.TopologyTestDriver(_pass_through()) as d:
        d.create_input_topic("in").pipe_records([ks.Record("a", 1, 7, (("h", b"x"),)), ks.Record("b", 2, None)])
        assert d.create_output_topic("out").read_records_to_list() == [
            TestRecord("a", 1, 7, (("h", b"x"),)),
            TestRecord("b", 2, 0),
        ]


def test_output_readers_consume_in_order() -> None:
    with ks.TopologyTestDriver(_pass_through()) as d:
        i, o = d.create_input_topic("in"), d.create_output_topic("out")
        i.pipe_key_value_list([("a", 1), ("b", 2), ("a", 3), ("c", 4)])
        assert o.get_queue_size() == 4
        assert o.read_key_value() == ("a", 1)
        assert o.read_value() == 2
        assert o.read_key_values_to_list() == [("a", 3), ("c", 4)]
        assert o.is_empty()


def test_read_key_values_to_map_keeps_the_last_value_per_key() -> None:
    with ks.TopologyTestDriver(_pass_through()) as d:
        d.create_input_topic("in").pipe_key_value_list([("a", 1), ("b", 2), ("a", 3)])
        o = d.create_output_topic("out")
        assert o.read_key_values_to_map() == {"a": 3, "b": 2}
        assert o.is_empty()


def test_reading_an_empty_topic_raises_naming_it() -> None:
    with ks.TopologyTestDriver(_pass_through()) as d:
        o = d.create_output_topic("out")
        with pytest.raises(LookupError, match="out"):
            o.read_record()
        with pytest.raises(LookupError):
            o.read_value()
        assert o.read_records_to_list() == []


def test_unknown_input_topic_is_a_clear_error() -> None:
    with ks.TopologyTestDriver(_pass_through()) as d, pytest.raises(ks.StreamsError, match=r"'nope'.*'in'"):
        d.create_input_topic("nope")


def test_unknown_store_is_a_clear_error() -> None:
    with ks.TopologyTestDriver(_pass_through()) as d, pytest.raises(ks.StreamsError, match="'missing'"):
        d.get_key_value_store("missing")


def test_repartitioned_records_are_processed_right_after_the_triggering_record() -> None:
    log: list[Any] = []
    b = ks.StreamsBuilder()
    (
        b.stream("in")
        .peek(lambda k, v: log.append(("before", k, v)))
        .flat_map(lambda k, v: [(f"{k}{n}", v) for n in range(2)])
        .repartition(name="rekeyed")
        .peek(lambda k, v: log.append(("after", k, v)))
        .to("out")
    )
    with ks.TopologyTestDriver(b.build()) as d:
        i = d.create_input_topic("in")
        i.pipe_input("a", 1, timestamp=10)
        assert log == [("before", "a", 1), ("after", "a0", 1), ("after", "a1", 1)]
        i.pipe_input("b", 2, timestamp=5)
        assert log[3:] == [("before", "b", 2), ("after", "b0", 2), ("after", "b1", 2)]
        assert d.create_output_topic("out").read_records_to_list() == [
            TestRecord("a0", 1, 10),
            TestRecord("a1", 1, 10),
            TestRecord("b0", 2, 5),
            TestRecord("b1", 2, 5),
        ]
        # the internal topic, named <application_id>-<name>-repartition, is readable like any other
        assert d.produced_topic_names() == ["out", "topology-test-driver-rekeyed-repartition"]
        internal = d.create_output_topic("topology-test-driver-rekeyed-repartition")
        assert internal.read_key_values_to_list() == [
            ("a0", 1),
            ("a1", 1),
            ("b0", 2),
            ("b1", 2),
        ]


def test_output_written_and_read_back_through_a_user_topic() -> None:
    b = ks.StreamsBuilder()
    b.stream("in").map_values(lambda v: v + 1).through("mid").map_values(lambda v: v * 10).to("out")
    with ks.TopologyTestDriver(b.build()) as d:
        d.create_input_topic("in").pipe_input("k", 1, timestamp=3)
        assert d.create_output_topic("mid").read_values_to_list() == [2]
        assert d.create_output_topic("out").read_records_to_list() == [TestRecord("k", 20, 3)]


def test_dropped_records_and_metrics() -> None:
    b = ks.StreamsBuilder()
    b.stream("in").group_by_key().count()
    with ks.TopologyTestDriver(b.build()) as d:
        d.create_input_topic("in").pipe_key_value_list([("a", 1), (None, 2), ("a", None)])
        assert d.dropped_records_total == 2
        assert d.metrics()["dropped-records-total"] == 2


def test_read_key_values_to_map_keeps_deleted_keys_and_rejects_null_keys() -> None:
    with ks.TopologyTestDriver(_pass_through()) as d:
        topic, out = d.create_input_topic("in"), d.create_output_topic("out")
        topic.pipe_key_value_list([("a", 1), ("a", None)])
        assert out.read_key_values_to_map() == {"a": None}
        topic.pipe_input(None, 5)
        with pytest.raises(ValueError, match="null key"):
            out.read_key_values_to_map()
