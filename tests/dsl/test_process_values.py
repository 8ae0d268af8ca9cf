"""``KStream.process_values`` (Kafka's KIP-820): fixed-key processors change values, timestamps and headers,
never keys, and do not mark the stream for repartitioning (Kafka's ``KStreamImpl.processValues``)."""

from __future__ import annotations

from typing import Any

import pytest

import kstream_nb as ks
from kstream_nb.runtime.test_driver import TestRecord


class Upper(ks.FixedKeyProcessor):
    def process(self, record: ks.FixedKeyRecord) -> None:
        self.context.forward(record.with_value(record.value.upper()))


class RunningCount(ks.FixedKeyProcessor):
    """Counts records per key in store "seen"; forwards "<value>#<count>", one ms later."""

    def init(self, context: ks.FixedKeyProcessorContext) -> None:
        super().init(context)
        self.seen: Any = context.get_state_store("seen")

    def process(self, record: ks.FixedKeyRecord) -> None:
        count = (self.seen.get(record.key) or 0) + 1
        self.seen.put(record.key, count)
        self.context.forward(record.with_value(f"{record.value}#{count}").with_timestamp(record.timestamp + 1))


class Buffered(ks.FixedKeyProcessor):
    """Holds records and forwards them from a stream-time punctuator every 10 ms (keys stay the input's)."""

    def init(self, context: ks.FixedKeyProcessorContext) -> None:
        super().init(context)
        self.held: list[ks.FixedKeyRecord] = []
        context.schedule(10, ks.STREAM_TIME, self.flush)

    def process(self, record: ks.FixedKeyRecord) -> None:
        self.held.append(record)

    def flush(self, timestamp: int) -> None:
        for record in self.held:
            self.context.forward(record.with_timestamp(timestamp).with_headers((("flushed", b"1"),)))
        self.held = []


class ChangesKey(ks.FixedKeyProcessor):
    def process(self, record: ks.FixedKeyRecord) -> None:
        self.context.forward(ks.Record("other", record.value, record.timestamp))


def _pipe(topology: ks.Topology, records: list[tuple[Any, Any, int]]) -> list[TestRecord]:
    with ks.TopologyTestDriver(topology) as d:
        topic = d.create_input_topic("in")
        for key, value, ts in records:
            topic.pipe_input(key, value, timestamp=ts)
        return d.create_output_topic("out").read_records_to_list()


def test_values_change_keys_and_timestamps_stay() -> None:
    b = ks.StreamsBuilder()
    b.stream("in").process_values(Upper).to("out")
    assert _pipe(b.build(), [("a", "x", 5), (None, "y", 3), ("b", "z", 9)]) == [
        TestRecord("a", "X", 5),
        TestRecord(None, "Y", 3),
        TestRecord("b", "Z", 9),
    ]


def test_a_processor_with_a_store_and_new_timestamps() -> None:
    b = ks.StreamsBuilder()
    seen = ks.Stores.key_value_store_builder(ks.Stores.in_memory_key_value_store("seen"))
    b.stream("in").process_values(RunningCount, stores=[seen]).to("out")
    assert _pipe(b.build(), [("a", "x", 5), ("b", "y", 6), ("a", "z", 7)]) == [
        TestRecord("a", "x#1", 6),
        TestRecord("b", "y#1", 7),
        TestRecord("a", "z#2", 8),
    ]


def test_records_held_and_forwarded_by_a_punctuator_keep_their_keys() -> None:
    b = ks.StreamsBuilder()
    b.stream("in").process_values(Buffered).to("out")
    flushed = (("flushed", b"1"),)
    # stream-time punctuation fires after the first record (stream time 0), then at 10 (here: 12)
    assert _pipe(b.build(), [("a", 1, 0), ("b", 2, 4), ("c", 3, 9), ("d", 4, 12)]) == [
        TestRecord("a", 1, 0, flushed),
        TestRecord("b", 2, 12, flushed),
        TestRecord("c", 3, 12, flushed),
        TestRecord("d", 4, 12, flushed),
    ]


def test_no_repartition_after_process_values() -> None:
    b = ks.StreamsBuilder()
    b.stream("in").process_values(Upper).group_by_key().count(store="counts")
    assert b.build().repartition_topics == {}
    b = ks.StreamsBuilder()
    b.stream("in").process(Upper).group_by_key().count(store="counts")
    assert list(b.build().repartition_topics) == ["counts-repartition"]


def test_a_key_change_before_still_repartitions() -> None:
    b = ks.StreamsBuilder()
    b.stream("in").select_key(lambda k, v: v).process_values(Upper).group_by_key().count(store="counts")
    b.stream("other").process_values(Upper).to("out")
    topology = b.build()
    assert list(topology.repartition_topics) == ["counts-repartition"]
    with ks.TopologyTestDriver(topology) as d:
        d.create_input_topic("in").pipe_input("x", "k", timestamp=1)
        d.create_input_topic("in").pipe_input("y", "k", timestamp=2)
        assert d.get_key_value_store("counts").get("k") == 2


def test_key_serde_is_kept_value_serde_is_not() -> None:
    b = ks.StreamsBuilder()
    source = b.stream("in", key_serde="string", value_serde="string")
    processed = source.process_values(Upper)
    assert processed.key_serde is source.key_serde and processed.value_serde is None
    assert processed.repartition_required is False


def test_forwarding_a_record_that_could_change_the_key_fails_naming_the_processor() -> None:
    b = ks.StreamsBuilder()
    b.stream("in").process_values(ChangesKey, name="rekey").to("out")
    message = r"rekey.*cannot change keys; use process\(\)"
    with ks.TopologyTestDriver(b.build()) as d, pytest.raises(ks.ProcessingError, match=message):
        d.create_input_topic("in").pipe_input("a", "x", timestamp=1)


def test_fixed_key_records_are_made_by_the_runtime_only() -> None:
    with pytest.raises(TypeError, match="with_value"):
        ks.FixedKeyRecord("k", "v", 0)


def test_describe_names_the_node_and_its_stores() -> None:
    b = ks.StreamsBuilder()
    seen = ks.Stores.key_value_store_builder(ks.Stores.in_memory_key_value_store("seen"))
    b.stream("in").process_values(RunningCount, stores=[seen]).to("out")
    (sub,) = b.build().describe().to_dict()["subtopologies"]
    node = sub["nodes"][1]
    assert (node["name"], node["stores"]) == ("KSTREAM-PROCESSVALUES-0000000001", ["seen"])


def test_bad_supplier() -> None:
    b = ks.StreamsBuilder()
    with pytest.raises(TypeError, match="process_values needs a processor class"):
        b.stream("in").process_values(Upper())  # type: ignore[arg-type]
    b.stream("x").process_values(lambda: object()).to("out")
    with pytest.raises(TypeError, match="not a FixedKeyProcessor"):
        ks.TopologyTestDriver(b.build())
