"""``KTable.transform_values`` (Kafka's ``KTable.transformValues`` / ``KTableTransformValues``): the
transformer sees every update, deletes too; its context cannot forward; materialized, the node keeps its
results in its store and old values come from there; otherwise a downstream that uses old values (group_by)
gets the transformer applied to the old value, and one that does not (to_stream) calls it once per update."""

from __future__ import annotations

from typing import Any

import pytest

import kstream_nb as ks
from kstream_nb.runtime.test_driver import TestRecord


class Exclaim(ks.ValueTransformerWithKey):
    """Kafka's test ExclamationValueTransformer: key->value!, deletes included."""

    def transform(self, read_only_key: Any, value: Any) -> Any:
        return f"{read_only_key}->{value}!"


class Counter(ks.ValueTransformerWithKey):
    """Kafka's test StatefulTransformer: ignores the value, returns how often it was called."""

    def init(self, context: ks.ProcessorContext) -> None:
        super().init(context)
        self.calls = 0

    def transform(self, read_only_key: Any, value: Any) -> Any:
        self.calls += 1
        return self.calls


class Lengths(ks.ValueTransformerWithKey):
    """Stateless: the value's length, a delete stays a delete."""

    def transform(self, read_only_key: Any, value: Any) -> Any:
        return None if value is None else len(value)


def _pipe(topology: ks.Topology, records: list[tuple[Any, Any, int]], out: str = "out") -> list[TestRecord]:
    with ks.TopologyTestDriver(topology) as d:
        topic = d.create_input_topic("in")
        for key, value, ts in records:
            topic.pipe_input(key, value, timestamp=ts)
        return d.create_output_topic(out).read_records_to_list()


def test_transformer_sees_updates_and_deletes_with_the_key() -> None:
    b = ks.StreamsBuilder()
    b.table("in").transform_values(Exclaim).to_stream().to("out")
    assert _pipe(b.build(), [("A", "a", 5), ("B", "b", 10), ("A", None, 15)]) == [
        TestRecord("A", "A->a!", 5),
        TestRecord("B", "B->b!", 10),
        TestRecord("A", "A->None!", 15),  # the transformer decides what a delete becomes
    ]


def test_a_stateful_transformer_is_called_once_per_update_when_no_old_value_is_needed() -> None:
    b = ks.StreamsBuilder()
    b.table("in").transform_values(Counter).to_stream().to("out")
    got = _pipe(b.build(), [("A", "x", 5), ("A", "y", 15), ("A", "z", 10)])
    assert got == [TestRecord("A", 1, 5), TestRecord("A", 2, 15), TestRecord("A", 3, 10)]


def test_materialized_old_values_come_from_the_store_even_if_stateful() -> None:
    # Kafka's shouldCalculateCorrectOldValuesIfMaterializedEvenIfStateful
    b = ks.StreamsBuilder()
    (
        b.table("in")
        .transform_values(Counter, store="counted")
        .group_by(lambda k, v: (k, v))
        .reduce(lambda a, v: a + v, lambda a, v: a - v, store="sums")
        .to_stream()
        .to("out")
    )
    topology = b.build()
    got = _pipe(topology, [("A", "ignored", 5), ("A", "ignored", 15), ("A", "ignored", 10)])
    assert got == [TestRecord("A", 1, 5), TestRecord("A", 2, 15), TestRecord("A", 3, 15)]
    with ks.TopologyTestDriver(topology) as d:
        for ts in (5, 15, 10):
            d.create_input_topic("in").pipe_input("A", "ignored", timestamp=ts)
        assert d.get_timestamped_key_value_store("counted").get("A") == ks.ValueAndTimestamp(3, 10)


def test_not_materialized_old_values_are_transformed_for_a_group_by() -> None:
    # Kafka's shouldCalculateCorrectOldValuesIfNotStatefulEvenIfNotMaterialized
    b = ks.StreamsBuilder()
    (
        b.table("in")
        .transform_values(Lengths)
        .group_by(lambda k, v: ("total", v))
        .reduce(lambda a, v: a + v, lambda a, v: a - v)
        .to_stream()
        .to("out")
    )
    got = _pipe(b.build(), [("A", "aaa", 5), ("B", "bb", 6), ("A", "a", 7), ("B", None, 8)])
    # A's update is one change of group "total" (KIP-904): the old length out, the new one in
    assert got == [
        TestRecord("total", 3, 5),
        TestRecord("total", 5, 6),
        TestRecord("total", 3, 7),
        TestRecord("total", 1, 8),
    ]


def test_the_transformer_is_called_for_old_values_only_if_a_downstream_uses_them() -> None:
    calls: list[tuple[Any, Any]] = []

    class Recording(ks.ValueTransformerWithKey):
        def transform(self, read_only_key: Any, value: Any) -> Any:
            calls.append((read_only_key, value))
            return value

    b = ks.StreamsBuilder()
    b.table("in").transform_values(Recording).filter(lambda k, v: v is not None).to_stream().to("out")
    _pipe(b.build(), [("A", "x", 1), ("A", "y", 2)])
    assert calls == [("A", "x"), ("A", "y")]
    calls.clear()
    b = ks.StreamsBuilder()
    b.table("in").transform_values(Recording).group_by(lambda k, v: (v, v)).count()
    with ks.TopologyTestDriver(b.build()) as d:
        d.create_input_topic("in").pipe_input("A", "x", timestamp=1)
        d.create_input_topic("in").pipe_input("A", "y", timestamp=2)
    assert calls == [("A", "x"), ("A", None), ("A", "y"), ("A", "x")]


class StoreBacked(ks.ValueTransformerWithKey):
    """Keeps the last value per key in its own store "last"; returns "<previous>><value>"."""

    def init(self, context: ks.ProcessorContext) -> None:
        super().init(context)
        self.last: Any = context.get_state_store("last")

    def transform(self, read_only_key: Any, value: Any) -> Any:
        previous = self.last.get(read_only_key)
        self.last.put(read_only_key, value)
        return f"{previous}>{value}"


def test_transformer_stores_and_a_queryable_result() -> None:
    b = ks.StreamsBuilder()
    last = ks.Stores.key_value_store_builder(ks.Stores.in_memory_key_value_store("last"))
    b.table("in").transform_values(StoreBacked, store="chain", stores=[last]).to_stream().to("out")
    topology = b.build()
    assert [n["stores"] for n in topology.describe().to_dict()["subtopologies"][0]["nodes"][2:3]] == [
        ["last", "chain"]
    ]
    with ks.TopologyTestDriver(topology) as d:
        topic = d.create_input_topic("in")
        for value, ts in (("a", 1), ("b", 2), ("c", 3)):
            topic.pipe_input("k", value, timestamp=ts)
        assert d.create_output_topic("out").read_values_to_list() == ["None>a", "a>b", "b>c"]
        assert d.get_key_value_store("chain").get("k") == "b>c"
        assert d.get_key_value_store("last").get("k") == "c"


def test_the_transformer_cannot_forward() -> None:
    class Forwarding(ks.ValueTransformerWithKey):
        def transform(self, read_only_key: Any, value: Any) -> Any:
            self.context.forward(ks.Record("other", value, 0))
            return value

    b = ks.StreamsBuilder()
    b.table("in").transform_values(Forwarding, name="tv").to_stream().to("out")
    message = r"forward\(\) is not supported from a value transformer's context.*processor=tv"
    with ks.TopologyTestDriver(b.build()) as d, pytest.raises(ks.ProcessingError, match=message):
        d.create_input_topic("in").pipe_input("k", "v", timestamp=0)


def test_node_name_and_bad_suppliers() -> None:
    b = ks.StreamsBuilder()
    table = b.table("in").transform_values(Exclaim)
    assert table.node == "KTABLE-TRANSFORMVALUES-0000000003" and table.store_name is None
    with pytest.raises(TypeError, match="transform_values needs a processor class"):
        table.transform_values(Exclaim())  # type: ignore[arg-type]
    b.table("x").transform_values(lambda: object())
    with pytest.raises(TypeError, match="not a ValueTransformerWithKey"):
        ks.TopologyTestDriver(b.build())
