"""Fused chains of built-ins (``ProcessorNode.entry``): outputs, timestamps, headers, errors and metrics.

The built-ins are written once, as fused steps; these tests check what users see of them: with Processor
API nodes, branches and merges in the chain, aggregations, column batches and bad records.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pandas as pd
import pytest

import kstream_nb as ks
from kstream_nb.cluster.memory import reset_cluster
from kstream_nb.processor.api import Record
from kstream_nb.processor.stream_stateless import KStreamMapValues
from kstream_nb.runtime.test_driver import TestRecord

HEADERS = (("trace", b"t1"),)


@pytest.fixture
def url() -> Iterator[str]:
    address = f"memory://fusion-{uuid.uuid4().hex}"
    yield address
    reset_cluster(address)


class Restamp(ks.Processor):
    """A Processor API node in the middle of a chain: forwards with a new timestamp, key and header."""

    def process(self, record: ks.Record) -> None:
        self.context.forward(
            record.with_timestamp(record.timestamp + 1000)
            .with_key(f"{record.key}!")
            .with_headers((*record.headers, ("seen", b"1")))
        )


def _mixed_topology(seen: list[tuple[Any, ...]]) -> ks.Topology:
    b = ks.StreamsBuilder()
    s = b.stream("in")
    small = s.filter(lambda k, v: v["n"] < 50, name="small").peek(lambda k, v: seen.append(("peek", k, v["n"])))
    big = s.filter_not(lambda k, v: v["n"] < 50, name="big").map_values(lambda k, v: {**v, "k": k}, name="tag")
    merged = small.merge(big, name="merged").select_key(lambda k, v: v["n"] % 3, name="by-mod")
    branches = (
        merged.split("split-")
        .branch(lambda k, v: k == 0, name="zero", chain=lambda st: st.map(lambda k, v: (f"z{k}", v["n"])))
        .branch(lambda k, v: k == 1, name="one")
        .default_branch(name="rest")
    )
    branches["split-zero"].to("zeros")
    (
        branches["split-one"]
        .flat_map_values(lambda v: [v["n"], -v["n"]], name="twice")
        .process(Restamp, name="restamp")
        .map_values(lambda v: v * 10, name="after-api")
        .to("ones")
    )
    rest = branches["split-rest"]
    rest.flat_map(lambda k, v: [(k, v["n"]), (k + 100, None)], name="pairs").to("rest")
    rest.foreach(lambda k, v: seen.append(("foreach", k, v["n"])), name="each")
    rest.map_values(lambda v: v["n"]).group_by_key().count(store="counts").to_stream().to("rest-counts")
    return b.build()


def _run_mixed() -> tuple[dict[str, list[TestRecord]], list[tuple[Any, ...]]]:
    seen: list[tuple[Any, ...]] = []
    with ks.TopologyTestDriver(_mixed_topology(seen)) as d:
        i = d.create_input_topic("in")
        for n in range(0, 120, 7):
            i.pipe_input(f"k{n % 4}", {"n": n}, timestamp=10 * n, headers=HEADERS if n % 2 else ())
        out = {
            t: d.create_output_topic(t).read_records_to_list() for t in ("zeros", "ones", "rest", "rest-counts")
        }
    return out, seen


def test_mixed_topology_with_branches_merge_and_a_processor_node() -> None:
    out, seen = _run_mixed()
    assert all(out.values()) and seen
    # a Processor API node inside the chain still forwards its own timestamp, key and headers downstream
    first_one = out["ones"][0]
    assert first_one.key.endswith("!") and first_one.headers[-1] == ("seen", b"1")
    assert first_one.timestamp % 10 == 0 and first_one.timestamp >= 1000
    # timestamps and headers of the input records reach the sinks through the fused steps
    assert {r.headers for r in out["zeros"]} == {(), HEADERS}
    assert [r.timestamp for r in out["rest"]] == sorted(r.timestamp for r in out["rest"])


@pytest.fixture
def records_created(monkeypatch: pytest.MonkeyPatch) -> Callable[[], int]:
    """Counts ``Record`` objects made from now on; call it for the count so far."""
    created = 0
    original = Record.__init__

    def counting(self: Record, *args: Any, **kwargs: Any) -> None:
        nonlocal created
        created += 1
        original(self, *args, **kwargs)

    monkeypatch.setattr(Record, "__init__", counting)
    return lambda: created


def test_a_fused_chain_creates_no_record_objects(records_created) -> None:
    b = ks.StreamsBuilder()
    b.stream("in").filter(lambda k, v: v > 1).map_values(lambda v: v * 2).peek(lambda k, v: None).to("out")
    with ks.TopologyTestDriver(b.build()) as d:
        d.create_input_topic("in").pipe_value_list([1, 2, 3])
        assert d.create_output_topic("out").read_values_to_list() == [4, 6]
    assert records_created() == 0


def _aggregations(b: ks.StreamsBuilder) -> None:
    """count, aggregate and reduce, each read by to_stream (fused), a table filter and a Processor API node."""
    grouped = b.stream("in").group_by_key()
    grouped.count(store="counts").to_stream().map_values(lambda n: n * 10).to("counts")
    summed = grouped.aggregate(lambda: [], lambda k, v, agg: [*agg, v], store="lists")
    summed.filter(lambda k, agg: len(agg) > 1).to_stream().to("lists")
    grouped.reduce(max, store="max").to_stream().process(Restamp, name="restamp").to("max")


def _run_aggregations(cache_bytes: int) -> tuple[dict[str, list[TestRecord]], int]:
    b = ks.StreamsBuilder()
    _aggregations(b)
    config = {"statestore_cache_max_bytes": cache_bytes, "commit_interval_ms": 100}
    with ks.TopologyTestDriver(b.build(), config) as d:
        i = d.create_input_topic("in")
        # a late record (timestamp 5 after 40) keeps its key's result timestamp at 40
        inputs = [("a", 1, 10), ("b", 2, 20), ("a", 3, 40), ("a", 9, 5), (None, 4, 50), ("b", None, 60)]
        for key, value, ts in inputs:
            i.pipe_input(key, value, timestamp=ts, headers=HEADERS if value == 3 else ())
        d.advance_wall_clock_time(1000)
        out = {t: d.create_output_topic(t).read_records_to_list() for t in ("counts", "lists", "max")}
        return out, d.dropped_records_total


@pytest.mark.parametrize("cache_bytes", [0, 1 << 20], ids=["every-update", "cached"])
def test_aggregations_give_their_updates_timestamps_and_drops(cache_bytes) -> None:
    out, dropped = _run_aggregations(cache_bytes)
    assert dropped == 3 * 2  # the null key and the null value, in each of the three aggregations
    if cache_bytes == 0:
        assert [(r.key, r.value, r.timestamp, r.headers) for r in out["counts"]] == [
            ("a", 10, 10, ()),
            ("b", 10, 20, ()),
            ("a", 20, 40, HEADERS),
            ("a", 30, 40, ()),  # the late record: the result keeps the newer timestamp
        ]
        assert [(r.key, r.value, r.timestamp) for r in out["max"]] == [
            ("a!", 1, 1010),
            ("b!", 2, 1020),
            ("a!", 3, 1040),
            ("a!", 9, 1040),
        ]
    # (the test driver commits after every input record, as Kafka's does: the cache forwards each update too)
    assert {r.key: (r.value, r.timestamp) for r in out["counts"]} == {"a": (30, 40), "b": (10, 20)}
    assert [(r.key, r.value) for r in out["lists"]][-1] == ("a", [1, 3, 9])


def test_a_count_read_as_a_stream_creates_no_record_objects(records_created) -> None:
    b = ks.StreamsBuilder()
    b.stream("in").flat_map_values(str.split).group_by(lambda k, w: w).count().to_stream().to("out")
    with ks.TopologyTestDriver(b.build(), {"statestore_cache_max_bytes": 0}) as d:
        d.create_input_topic("in").pipe_value_list(["a b", "b"])
        assert d.create_output_topic("out").read_key_values_to_list() == [("a", 1), ("b", 1), ("b", 2)]
    assert records_created() == 0


@pytest.mark.parametrize(
    ("build", "processor"),
    [
        (lambda g: g.aggregate(lambda: 0, lambda k, v, agg: agg + 1 / v), "KSTREAM-AGGREGATE-"),
        (lambda g: g.reduce(lambda agg, v: agg + 1 / v), "KSTREAM-REDUCE-"),
    ],
)
def test_errors_in_an_aggregation_name_it_and_the_record(build, processor) -> None:
    b = ks.StreamsBuilder()
    build(b.stream("in").group_by_key()).to_stream().to("out")
    with ks.TopologyTestDriver(b.build(), {"statestore_cache_max_bytes": 0}) as d:
        i = d.create_input_topic("in")
        i.pipe_input("a", 1, timestamp=0)
        with pytest.raises(ks.ProcessingError) as err:
            i.pipe_input("a", 0, timestamp=1)
    e = err.value
    assert e.processor.startswith(processor)
    assert (e.topic, e.partition, e.offset) == ("in", 0, 1)
    assert isinstance(e.__cause__, ZeroDivisionError)


def test_a_processor_api_node_in_a_fused_chain_gets_records_and_forwards() -> None:
    b = ks.StreamsBuilder()
    (
        b.stream("in")
        .filter(lambda k, v: v > 0)
        .process(Restamp, name="restamp")
        .map_values(lambda v: v + 1)
        .to("out")
    )
    with ks.TopologyTestDriver(b.build()) as d:
        i = d.create_input_topic("in")
        i.pipe_input("a", 1, timestamp=5, headers=HEADERS)
        i.pipe_input("b", 0, timestamp=6)
        assert d.create_output_topic("out").read_records_to_list() == [
            TestRecord("a!", 2, 1005, (*HEADERS, ("seen", b"1")))
        ]


class Doubling(KStreamMapValues):
    """A subclass of a built-in that overrides ``process``: it must not be fused past its override."""

    def process(self, record: ks.Record) -> None:
        self.forward(record.with_value(record.value * 2))


def test_a_subclass_of_a_built_in_keeps_its_own_process() -> None:
    t = (
        ks.Topology()
        .add_source("src", "in")
        .add_processor("double", lambda: Doubling(lambda v: v + 100), "src")
        .add_sink("sink", "out", "double")
    )
    with ks.TopologyTestDriver(t) as d:
        d.create_input_topic("in").pipe_value_list([1, 2])
        assert d.create_output_topic("out").read_values_to_list() == [2, 4]


class DoublingFirst(KStreamMapValues):
    """A subclass of a built-in whose ``process`` runs the built-in's own (fused) step on a Record."""

    def process(self, record: ks.Record) -> None:
        super().process(record.with_value(record.value * 2))


def test_a_subclass_of_a_built_in_can_run_the_built_in_on_a_record() -> None:
    t = (
        ks.Topology()
        .add_source("src", "in")
        .add_processor("double", lambda: DoublingFirst(lambda v: v + 100), "src")
        .add_sink("sink", "out", "double")
    )
    with ks.TopologyTestDriver(t) as d:
        i = d.create_input_topic("in")
        i.pipe_value_list([1, 2])
        assert d.create_output_topic("out").read_values_to_list() == [102, 104]
        with pytest.raises(ks.ProcessingError) as err:
            i.pipe_input("k", "x", timestamp=5)
    assert (err.value.processor, err.value.offset) == ("double", 2)
    assert isinstance(err.value.__cause__, TypeError)


@pytest.mark.parametrize(
    ("build", "processor"),
    [
        (lambda s: s.filter(lambda k, v: 1 / v, name="step").to("out"), "step"),
        (lambda s: s.filter_not(lambda k, v: 1 / v, name="step").to("out"), "step"),
        (lambda s: s.map_values(lambda v: 1 / v, name="step").to("out"), "step"),
        (lambda s: s.map_values(lambda k, v: 1 / v, name="step").to("out"), "step"),
        (lambda s: s.map(lambda k, v: (k, 1 / v), name="step").to("out"), "step"),
        (lambda s: s.map(lambda k, v: (k, v) if v else v, name="step").to("out"), "step"),
        (lambda s: s.select_key(lambda k, v: 1 / v, name="step").to("out"), "step"),
        (lambda s: s.peek(lambda k, v: 1 / v, name="step").to("out"), "step"),
        (lambda s: s.flat_map_values(lambda v: [1 / v], name="step").to("out"), "step"),
        (lambda s: s.flat_map(lambda k, v: [(k, 1 / v)], name="step").to("out"), "step"),
        (lambda s: s.filter(lambda k, v: True).map_values(lambda v: v, name="ok").to("out", name="sink"), None),
        (lambda s: s.map_values(lambda v: object() if v == 0 else v).to("out", name="sink"), "sink"),
        (lambda s: s.process(Failing, name="api").map_values(lambda v: v).to("out"), "api"),
        (lambda s: s.process(Passing, name="api").map_values(lambda v: 1 / v, name="after").to("out"), "after"),
    ],
)
def test_errors_in_fused_steps_name_their_processor_and_record(build, processor) -> None:
    b = ks.StreamsBuilder()
    build(b.stream("in"))
    with ks.TopologyTestDriver(b.build()) as d:
        i = d.create_input_topic("in")
        i.pipe_input("a", 1, timestamp=0)
        if processor is None:
            i.pipe_input("b", 0, timestamp=1)
            assert d.create_output_topic("out").read_values_to_list() == [1, 0]
            return
        with pytest.raises(ks.ProcessingError) as err:
            i.pipe_input("b", 0, timestamp=1)
    e = err.value
    assert (e.processor, e.topic, e.partition, e.offset) == (processor, "in", 0, 1)
    assert f"processor={processor}" in str(e)
    assert e.__cause__ is not None and not isinstance(e.__cause__, ks.ProcessingError)


class Failing(ks.Processor):
    def process(self, record: ks.Record) -> None:
        if record.value == 0:
            raise RuntimeError("boom")
        self.context.forward(record)


class Passing(ks.Processor):
    def process(self, record: ks.Record) -> None:
        self.context.forward(record)


def test_a_failing_generator_forwards_what_it_yielded_first() -> None:
    def values(v: int) -> Iterator[int]:
        yield v
        raise ValueError("half way")

    b = ks.StreamsBuilder()
    b.stream("in").flat_map_values(values, name="gen").to("out")
    with ks.TopologyTestDriver(b.build()) as d:
        with pytest.raises(ks.ProcessingError, match="half way") as err:
            d.create_input_topic("in").pipe_input("k", 7, timestamp=0)
        assert d.create_output_topic("out").read_values_to_list() == [7]
    assert err.value.processor == "gen"


def test_production_handler_continue_in_a_fused_sink_skips_the_record() -> None:
    b = ks.StreamsBuilder()
    b.stream("in").map_values(lambda v: object() if v == 2 else v).to("out")
    with ks.TopologyTestDriver(b.build(), {"default_production_exception_handler": "continue"}) as d:
        d.create_input_topic("in").pipe_value_list([1, 2, 3])
        assert d.create_output_topic("out").read_values_to_list() == [1, 3]
        assert sum(t.skipped_production for t in d.tasks) == 1


def _run_app(url: str, topology: ks.Topology, feed: Callable[[str], None], outputs: list[str]) -> dict[str, Any]:
    reset_cluster(url)
    feed(url)
    app = ks.KafkaStreams(topology, application_id="fusion", bootstrap_servers=url, commit_interval_ms=50)
    try:
        app.start().wait_until_running().wait_until_idle(timeout=30)
        metrics = app.metrics()
    finally:
        assert app.stop(timeout=10)
    result: dict[str, Any] = {
        t: sorted(map(repr, ks.read_topic(t, bootstrap_servers=url)[["key", "value"]].itertuples(index=False)))
        for t in outputs
    }
    result["metrics"] = {k: metrics[k] for k in ("process-total", "dropped-records-total")}
    return result


def test_columnar_batches_then_record_steps(url) -> None:
    frame = pd.DataFrame({"key": [f"c{i % 5}" for i in range(300)], "amount": range(300), "qty": [2] * 300})

    def topology() -> ks.Topology:
        b = ks.StreamsBuilder()
        s = b.stream("orders")
        cheap = s[s["amount"] < 200].assign(total=s["amount"] * s["qty"])
        cheap.to("columnar-out")
        cheap.filter(lambda k, v: v["total"] % 3 == 0).map_values(lambda v: v["total"]).to("record-out")
        return b.build()

    def feed(servers: str) -> None:
        ks.produce("orders", frame, bootstrap_servers=servers, partitions=2)

    out = _run_app(url, topology(), feed, ["columnar-out", "record-out"])
    assert len(out["record-out"]) == len([a for a in range(200) if (2 * a) % 3 == 0])


def test_a_bad_record_fails_only_when_reached(url) -> None:
    """Values are decoded as records are processed: the records before a bad one are processed first."""
    ks.produce("in", [1, 2], bootstrap_servers=url, partitions=1)
    ks.produce("in", [b"\xffnot json"], bootstrap_servers=url, value_serde="bytes")
    b = ks.StreamsBuilder()
    b.stream("in").map_values(lambda v: v * 10).to("out")
    app = ks.KafkaStreams(b.build(), application_id="bad", bootstrap_servers=url, commit_interval_ms=50)
    try:
        app.start()
        with pytest.raises(ks.StreamsError):
            app.wait_until_idle(timeout=10)
        assert isinstance(app.error, ks.DeserializationError) and app.error.offset == 2
    finally:
        app.stop(timeout=10)
    assert ks.read_topic("out", bootstrap_servers=url)["value"].tolist() == [10, 20]


def test_a_skipped_bad_record_at_the_end_of_a_partition_is_consumed(url) -> None:
    ks.produce("in", [1, 2], bootstrap_servers=url, partitions=1)
    ks.produce("in", [b"\xffnot json"], bootstrap_servers=url, value_serde="bytes")
    b = ks.StreamsBuilder()
    b.stream("in").map_values(lambda v: v * 10).to("out")
    app = ks.KafkaStreams(
        b.build(),
        application_id="skip-last",
        bootstrap_servers=url,
        commit_interval_ms=50,
        default_deserialization_exception_handler="log_and_continue",
    )
    try:
        app.start().wait_until_running().wait_until_idle(timeout=10)
        metrics = app.metrics()
        assert metrics["skipped-deserialization-total"] == 1
        assert metrics["process-total"] == 2
        assert not any(app.lag().values())
    finally:
        assert app.stop(timeout=10)
    assert ks.read_topic("out", bootstrap_servers=url)["value"].tolist() == [10, 20]


def _run_two_topics() -> tuple[list[TestRecord], int, int]:
    b = ks.StreamsBuilder()
    left = b.stream("left").map_values(lambda v: v + 1000)
    left.merge(b.stream("right")).filter(lambda k, v: v % 2 == 0).map(lambda k, v: (f"{k}-{v}", v // 2)).to("out")
    config = {"default_deserialization_exception_handler": "log_and_continue"}
    with ks.TopologyTestDriver(b.build(), config) as d:
        left_in, right_in = d.create_input_topic("left"), d.create_input_topic("right")
        for n in range(12):
            (right_in if n % 3 == 0 else left_in).pipe_input(
                f"k{n}", n, timestamp=n, headers=HEADERS if n % 4 == 0 else ()
            )
            if n == 5:
                d.pipe_raw("right", b'"bad"', b"\xffnot json", 5)
        out = d.create_output_topic("out").read_records_to_list()
        (task,) = d.tasks
        return out, task.skipped_deserialization, task.processed_total


def test_a_task_reading_two_topics_skips_bad_records() -> None:
    """Two input topics: records are picked one at a time by timestamp (``_process_head``)."""
    out, skipped, processed = _run_two_topics()
    assert (skipped, processed) == (1, 12)
    assert out == [
        TestRecord("k0-0", 0, 0, HEADERS),
        TestRecord("k2-1002", 501, 2),
        TestRecord("k4-1004", 502, 4, HEADERS),
        TestRecord("k6-6", 3, 6),
        TestRecord("k8-1008", 504, 8, HEADERS),
        TestRecord("k10-1010", 505, 10),
    ]
