"""The Processor API: seed 000's WordCountProcessor, punctuation by stream and wall-clock time, context."""

from __future__ import annotations

from typing import Any

import pytest

import kstream_nb as ks
from kstream_nb.runtime.test_driver import TestRecord


class WordCountProcessor(ks.Processor):
    """Seed 000: counts words into "Counts"; every second forwards all counts, deletes them, commits."""

    punctuation_type = ks.STREAM_TIME

    def init(self, context: ks.ProcessorContext) -> None:
        super().init(context)
        self.cancellable = context.schedule(1000, self.punctuation_type, self.punctuate)
        self.kv_store: Any = context.get_state_store("Counts")

    def process(self, record: ks.Record) -> None:
        for word in record.value.lower().split(" "):
            self.kv_store.put(word, (self.kv_store.get(word) or 0) + 1)

    def punctuate(self, timestamp: int) -> None:
        for word, count in list(self.kv_store.all()):
            self.context.forward(ks.Record(word, count, timestamp))
            self.kv_store.delete(word)
        self.context.commit()


class WallClockWordCount(WordCountProcessor):
    punctuation_type = ks.WALL_CLOCK_TIME


def _word_count(processor: type[ks.Processor]) -> ks.Topology:
    b = ks.StreamsBuilder()
    counts = ks.Stores.key_value_store_builder(ks.Stores.in_memory_key_value_store("Counts"))
    b.stream("words").process(processor, stores=[counts]).to("counts")
    return b.build()


def test_word_count_processor_punctuates_by_stream_time() -> None:
    with ks.TopologyTestDriver(_word_count(WordCountProcessor)) as d:
        i, o = d.create_input_topic("words"), d.create_output_topic("counts")
        # stream-time punctuation is aligned to 0: the first record (stream time 0) fires it at once
        i.pipe_input(None, "hello world", timestamp=0)
        assert o.read_records_to_list() == [TestRecord("hello", 1, 0), TestRecord("world", 1, 0)]
        i.pipe_input(None, "Hello Kafka", timestamp=500)
        i.pipe_input(None, "hello", timestamp=999)
        assert o.is_empty()
        assert d.get_key_value_store("Counts").get("hello") == 2
        i.pipe_input(None, "kafka streams", timestamp=1000)
        assert o.read_records_to_list() == [
            TestRecord("hello", 2, 1000),
            TestRecord("kafka", 2, 1000),
            TestRecord("streams", 1, 1000),
        ]
        store = d.get_key_value_store("Counts")
        assert store.get("hello") is None and store.get("kafka") is None  # deleted after forwarding
        # an out-of-order record does not move stream time back, so no punctuation
        i.pipe_input(None, "late", timestamp=200)
        assert o.is_empty()
        # a jump over several intervals fires once, with the current stream time
        i.pipe_input(None, "jump", timestamp=3500)
        # (the in-memory store iterates in key order, as Kafka's)
        assert o.read_records_to_list() == [TestRecord("jump", 1, 3500), TestRecord("late", 1, 3500)]


def test_word_count_processor_punctuates_by_wall_clock_time() -> None:
    with ks.TopologyTestDriver(_word_count(WallClockWordCount), initial_wall_clock_ms=0) as d:
        i, o = d.create_input_topic("words"), d.create_output_topic("counts")
        i.pipe_input(None, "a b a", timestamp=5000)  # stream time does not drive wall-clock punctuators
        assert o.is_empty()
        d.advance_wall_clock_time(999)
        assert o.is_empty()
        d.advance_wall_clock_time(1)
        assert o.read_records_to_list() == [TestRecord("a", 2, 1000), TestRecord("b", 1, 1000)]
        i.pipe_input(None, "c", timestamp=6000)
        d.advance_wall_clock_time("1s")
        assert o.read_records_to_list() == [TestRecord("c", 1, 2000)]
        d.advance_wall_clock_time("1s")
        assert o.is_empty()  # the store was emptied: nothing to forward


class CancelAfterFirst(ks.Processor):
    fired: list[int]

    def init(self, context: ks.ProcessorContext) -> None:
        super().init(context)
        self.fired = FIRED
        self.handle = context.schedule("10ms", ks.STREAM_TIME, self.punctuate)

    def process(self, record: ks.Record) -> None:
        if record.value == "stop":
            self.handle.cancel()

    def punctuate(self, timestamp: int) -> None:
        self.fired.append(timestamp)


FIRED: list[int] = []


def test_cancel_stops_punctuation() -> None:
    FIRED.clear()
    b = ks.StreamsBuilder()
    b.stream("in").process(CancelAfterFirst)
    with ks.TopologyTestDriver(b.build()) as d:
        i = d.create_input_topic("in")
        i.pipe_input("k", "go", timestamp=0)
        i.pipe_input("k", "go", timestamp=10)
        i.pipe_input("k", "stop", timestamp=15)
        i.pipe_input("k", "go", timestamp=20)
        i.pipe_input("k", "go", timestamp=100)
    assert FIRED == [0, 10]


class UsesUnconnectedStore(ks.Processor):
    def init(self, context: ks.ProcessorContext) -> None:
        super().init(context)
        context.get_state_store("Other")

    def process(self, record: ks.Record) -> None:
        pass


def test_get_state_store_of_unconnected_store_is_a_clear_error() -> None:
    b = ks.StreamsBuilder()
    b.add_state_store(ks.Stores.key_value_store_builder(ks.Stores.in_memory_key_value_store("Other")))
    b.stream("in").process(UsesUnconnectedStore, name="needs-other")
    b.stream("in2").process(_Noop, stores=["Other"])
    with pytest.raises(ks.StreamsError) as err:
        ks.TopologyTestDriver(b.build())
    message = str(err.value)
    assert "needs-other" in message and "Other" in message and "not connected" in message


class _Noop(ks.Processor):
    def process(self, record: ks.Record) -> None:
        pass


SEEN: list[Any] = []


class RecordsContext(ks.Processor):
    def init(self, context: ks.ProcessorContext) -> None:
        super().init(context)
        context.schedule(100, ks.STREAM_TIME, self.punctuate)

    def process(self, record: ks.Record) -> None:
        c = self.context
        SEEN.append(("process", c.task_id, c.topic, c.partition, c.offset, c.timestamp, c.headers, record.key))

    def punctuate(self, timestamp: int) -> None:
        c = self.context
        SEEN.append(("punctuate", c.topic, c.record_metadata(), timestamp))


def test_context_metadata_in_process_and_in_punctuate() -> None:
    SEEN.clear()
    b = ks.StreamsBuilder()
    b.stream("meta").process(RecordsContext)
    with ks.TopologyTestDriver(b.build()) as d:
        i = d.create_input_topic("meta")
        i.pipe_input("a", 1, timestamp=50)
        i.pipe_input("b", 2, timestamp=120, headers=(("h", b"v"),))
    assert SEEN == [
        ("process", "0_0", "meta", 0, 0, 50, (), "a"),
        ("punctuate", None, None, 50),
        ("process", "0_0", "meta", 0, 1, 120, (("h", b"v"),), "b"),
        ("punctuate", None, None, 120),
    ]


class Router(ks.Processor):
    def process(self, record: ks.Record) -> None:
        child = "evens" if record.value % 2 == 0 else "odds"
        self.context.forward(record.with_value(record.value * 10), child)


def test_forward_to_a_named_child_only() -> None:
    t = (
        ks.Topology()
        .add_source("src", "in")
        .add_processor("router", Router, "src")
        .add_sink("evens", "even-topic", "router")
        .add_sink("odds", "odd-topic", "router")
    )
    with ks.TopologyTestDriver(t) as d:
        i = d.create_input_topic("in")
        for n, v in enumerate([1, 2, 3]):
            i.pipe_input("k", v, timestamp=n)
        assert d.create_output_topic("even-topic").read_values_to_list() == [20]
        assert d.create_output_topic("odd-topic").read_values_to_list() == [10, 30]


class BadChild(ks.Processor):
    def process(self, record: ks.Record) -> None:
        self.context.forward(record, "nope")


def test_forward_to_unknown_child_names_it() -> None:
    t = ks.Topology().add_source("src", "in").add_processor("p", BadChild, "src").add_sink("s", "out", "p")
    with ks.TopologyTestDriver(t) as d, pytest.raises(ks.StreamsError, match="nope"):
        d.create_input_topic("in").pipe_input("k", 1, timestamp=0)


class Stamped(ks.Processor):
    def process(self, record: ks.Record) -> None:
        self.context.forward(record.with_timestamp(record.timestamp + 5).with_key(record.key * 2))


def test_forwarded_record_timestamp_and_key_reach_the_sink() -> None:
    t = ks.Topology().add_source("src", "in").add_processor("p", Stamped, "src").add_sink("s", "out", "p")
    with ks.TopologyTestDriver(t) as d:
        d.create_input_topic("in").pipe_input("k", "v", timestamp=10)
        assert d.create_output_topic("out").read_records_to_list() == [TestRecord("kk", "v", 15)]


class Failing(ks.Processor):
    def process(self, record: ks.Record) -> None:
        raise RuntimeError("boom")


def test_processor_exception_is_wrapped_with_location() -> None:
    t = ks.Topology().add_source("src", "in").add_processor("failing", Failing, "src")
    with ks.TopologyTestDriver(t) as d, pytest.raises(ks.ProcessingError) as err:
        d.create_input_topic("in").pipe_input("k", "v", timestamp=1)
    assert (err.value.processor, err.value.topic, err.value.offset) == ("failing", "in", 0)
    assert "boom" in str(err.value)
