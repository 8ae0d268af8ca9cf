"""``to(extractor)``: Kafka's ``TopicNameExtractor`` chooses each record's topic; the topics must exist
(Kafka Streams does not create them); ``describe()`` prints ``Sink: <name> (extractor class: <extractor>)``."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

import kstream_nb as ks
from kstream_nb.cluster.memory import reset_cluster
from kstream_nb.processor.topic_extractor_sink import RecordContext
from kstream_nb.runtime.test_driver import TestRecord


def route(key: Any, value: Any, record_context: RecordContext) -> str:
    return f"orders-{value['region']}"


class ByKey:
    """An extractor object without a repr of its own: describe() names its class."""

    def __call__(self, key: Any, value: Any, record_context: RecordContext) -> str:
        return f"out-{key}"


class Fixed:
    def __init__(self, topic: str) -> None:
        self.topic = topic

    def __call__(self, key: Any, value: Any, record_context: RecordContext) -> str:
        return self.topic

    def __repr__(self) -> str:
        return f"Fixed({self.topic!r})"


def _orders() -> list[tuple[str, dict[str, Any], int]]:
    return [
        ("o1", {"region": "eu", "n": 1}, 10),
        ("o2", {"region": "us", "n": 2}, 20),
        ("o3", {"region": "eu"}, 30),
    ]


def test_each_record_goes_to_the_topic_its_extractor_names() -> None:
    b = ks.StreamsBuilder()
    b.stream("orders").to(route)
    with ks.TopologyTestDriver(b.build()) as d:
        topic = d.create_input_topic("orders")
        for key, value, ts in _orders():
            topic.pipe_input(key, value, timestamp=ts)
        assert d.produced_topic_names() == ["orders-eu", "orders-us"]
        assert d.create_output_topic("orders-eu").read_records_to_list() == [
            TestRecord("o1", {"region": "eu", "n": 1}, 10),
            TestRecord("o3", {"region": "eu"}, 30),
        ]
        assert d.create_output_topic("orders-us").read_records_to_list() == [
            TestRecord("o2", {"region": "us", "n": 2}, 20)
        ]


def test_the_extractor_sees_the_record_context() -> None:
    seen: list[RecordContext] = []

    def extractor(key: Any, value: Any, record_context: RecordContext) -> str:
        seen.append(record_context)
        return "out"

    b = ks.StreamsBuilder()
    b.stream("in").map_values(lambda v: v + 1).to(extractor)
    with ks.TopologyTestDriver(b.build()) as d:
        topic = d.create_input_topic("in")
        topic.pipe_input("a", 1, timestamp=5, headers=(("h", b"1"),))
        topic.pipe_input("b", 2, timestamp=7)
        assert d.create_output_topic("out").read_key_values_to_map() == {"a": 2, "b": 3}
    assert seen == [RecordContext("in", 0, 0, 5, (("h", b"1"),)), RecordContext("in", 0, 1, 7, ())]


def test_a_key_value_extractor_works_too() -> None:
    b = ks.StreamsBuilder()
    b.stream("in").to(lambda k, v: "odd" if v % 2 else "even")
    with ks.TopologyTestDriver(b.build()) as d:
        topic = d.create_input_topic("in")
        for i in range(4):
            topic.pipe_input(f"k{i}", i, timestamp=i)
        assert d.create_output_topic("even").read_values_to_list() == [0, 2]
        assert d.create_output_topic("odd").read_values_to_list() == [1, 3]


def test_describe_names_the_extractor_as_kafka_does() -> None:
    b = ks.StreamsBuilder()
    source = b.stream("orders")
    source.to(route)
    source.to(ByKey(), name="by-key")
    source.to(Fixed("audit"), name="fixed")
    text = str(b.build().describe())
    assert f"    Sink: KSTREAM-SINK-0000000001 (extractor class: {route.__module__}.route)\n" in text
    assert f"    Sink: by-key (extractor class: {ByKey.__module__}.ByKey)\n" in text
    assert "    Sink: fixed (extractor class: Fixed('audit'))\n      <-- KSTREAM-SOURCE-0000000000\n" in text
    (sub,) = b.build().describe().to_dict()["subtopologies"]
    sink = sub["nodes"][1]
    assert sink["type"] == "sink" and sink["topic"] is None and sink["topic_extractor"].endswith(".route")
    assert b.build().subtopologies()[0].sink_topics == ()
    assert "-->" in b.build().describe().to_mermaid()


def test_an_extractor_that_returns_no_topic_name_fails_naming_it() -> None:
    b = ks.StreamsBuilder()
    b.stream("in").to(lambda k, v, ctx: None)  # type: ignore[arg-type, return-value]
    with (
        ks.TopologyTestDriver(b.build()) as d,
        pytest.raises(ks.ProcessingError, match="returned None for key 'a'"),
    ):
        d.create_input_topic("in").pipe_input("a", 1, timestamp=0)


def test_bad_topics() -> None:
    b = ks.StreamsBuilder()
    source = b.stream("in")
    with pytest.raises(ks.TopologyError, match="'s': topic must be a name or a topic name extractor, got 42"):
        b.topology.add_sink("s", 42, source.node)  # type: ignore[arg-type]
    with pytest.raises(ks.TopologyError, match="must be a name or a topic name extractor"):
        source.to(42)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="through needs a topic name"):
        source.through(route)  # type: ignore[arg-type]


# ---- on a cluster: the topics must exist ----------------------------------------------------------


@pytest.fixture
def url() -> Iterator[str]:
    address = f"memory://extractor-{uuid.uuid4().hex[:8]}"
    yield address
    reset_cluster(address)


def _wait_for(app: ks.KafkaStreams, done: Any, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not done() and time.monotonic() < deadline:
        time.sleep(0.01)


def test_records_go_to_existing_topics_with_their_partitioner(url: str) -> None:
    ks.produce("orders", [(k, v) for k, v, _ in _orders()], bootstrap_servers=url, timestamps=[10, 20, 30])
    for region in ("eu", "us"):
        ks.produce(f"orders-{region}", [], bootstrap_servers=url, partitions=3)
    b = ks.StreamsBuilder()
    b.stream("orders").to(route, partitioner=lambda k, v, n: n - 1)
    app = ks.KafkaStreams(b.build(), "routing", url)
    try:
        app.start().wait_until_running().wait_until_idle()
        eu = ks.read_topic("orders-eu", bootstrap_servers=url)
        assert eu[["partition", "key", "timestamp"]].values.tolist() == [[2, "o1", 10], [2, "o3", 30]]
        assert ks.read_topic("orders-us", bootstrap_servers=url)["key"].tolist() == ["o2"]
    finally:
        assert app.stop()


def test_a_missing_topic_fails_the_task_naming_the_topic(url: str) -> None:
    ks.produce("orders", [(k, v) for k, v, _ in _orders()], bootstrap_servers=url)
    ks.produce("orders-eu", [], bootstrap_servers=url)
    b = ks.StreamsBuilder()
    b.stream("orders").to(route)
    app = ks.KafkaStreams(b.build(), "routing-missing", url).start()
    try:
        _wait_for(app, lambda: app.state == ks.State.ERROR)
        assert app.state == ks.State.ERROR
        assert isinstance(app.error, ks.ProcessingError)
        assert "topic 'orders-us'" in str(app.error) and "does not exist" in str(app.error)
        with pytest.raises(ks.StreamsError, match="orders-us"):  # not created
            ks.read_topic("orders-us", bootstrap_servers=url)
    finally:
        app.stop()


def test_the_production_handler_may_skip_records_for_missing_topics(url: str) -> None:
    ks.produce("orders", [(k, v) for k, v, _ in _orders()], bootstrap_servers=url)
    ks.produce("orders-eu", [], bootstrap_servers=url)
    b = ks.StreamsBuilder()
    b.stream("orders").to(route)
    app = ks.KafkaStreams(b.build(), "routing-skip", url, default_production_exception_handler="continue")
    try:
        app.start().wait_until_running().wait_until_idle()
        assert ks.read_topic("orders-eu", bootstrap_servers=url)["key"].tolist() == ["o1", "o3"]
        assert app.metrics()["skipped-production-total"] == 1
        assert app.state == ks.State.RUNNING
    finally:
        assert app.stop()
