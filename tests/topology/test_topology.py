"""The logical graph: describe() (Kafka's text form), to_dict, to_mermaid, low-level API errors."""

from __future__ import annotations

import re

import pytest

import kstream_nb as ks


def _word_count() -> ks.Topology:
    b = ks.StreamsBuilder()
    (
        b.stream("lines")
        .flat_map_values(lambda line: line.split())
        .group_by(lambda k, w: w)
        .count(store="counts")
        .to_stream()
        .to("out")
    )
    return b.build()


WORD_COUNT_DESCRIPTION = """\
Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000000 (topics: [lines])
      --> KSTREAM-FLATMAPVALUES-0000000001
    Processor: KSTREAM-FLATMAPVALUES-0000000001 (stores: [])
      --> KSTREAM-KEY-SELECT-0000000002
      <-- KSTREAM-SOURCE-0000000000
    Processor: KSTREAM-KEY-SELECT-0000000002 (stores: [])
      --> counts-repartition-filter
      <-- KSTREAM-FLATMAPVALUES-0000000001
    Processor: counts-repartition-filter (stores: [])
      --> counts-repartition-sink
      <-- KSTREAM-KEY-SELECT-0000000002
    Sink: counts-repartition-sink (topic: counts-repartition)
      <-- counts-repartition-filter

   Sub-topology: 1
    Source: counts-repartition-source (topics: [counts-repartition])
      --> KSTREAM-AGGREGATE-0000000003
    Processor: KSTREAM-AGGREGATE-0000000003 (stores: [counts])
      --> KTABLE-TOSTREAM-0000000007
      <-- counts-repartition-source
    Processor: KTABLE-TOSTREAM-0000000007 (stores: [])
      --> KSTREAM-SINK-0000000008
      <-- KSTREAM-AGGREGATE-0000000003
    Sink: KSTREAM-SINK-0000000008 (topic: out)
      <-- KTABLE-TOSTREAM-0000000007
"""


def test_describe_word_count_in_kafkas_text_form() -> None:
    assert str(_word_count().describe()) == WORD_COUNT_DESCRIPTION


def test_describe_to_dict() -> None:
    d = _word_count().describe().to_dict()
    assert d["repartition_topics"] == ["counts-repartition"]
    sub0, sub1 = d["subtopologies"]
    assert (sub0["id"], sub1["id"]) == (0, 1)
    assert sub0["stores"] == [] and sub1["stores"] == ["counts"]
    source = sub0["nodes"][0]
    assert source == {
        "name": "KSTREAM-SOURCE-0000000000",
        "type": "source",
        "topics": ["lines"],
        "successors": ["KSTREAM-FLATMAPVALUES-0000000001"],
        "predecessors": [],
    }
    aggregate = next(n for n in sub1["nodes"] if n["name"] == "KSTREAM-AGGREGATE-0000000003")
    assert aggregate["type"] == "processor" and aggregate["stores"] == ["counts"]
    assert aggregate["predecessors"] == ["counts-repartition-source"]
    sinks = [n for s in d["subtopologies"] for n in s["nodes"] if n["type"] == "sink"]
    assert [(n["name"], n["topic"]) for n in sinks] == [
        ("counts-repartition-sink", "counts-repartition"),
        ("KSTREAM-SINK-0000000008", "out"),
    ]


def test_to_mermaid_has_subgraphs_nodes_topics_and_stores() -> None:
    text = _word_count().describe().to_mermaid()
    lines = text.splitlines()
    assert lines[0] == "flowchart TD"
    assert '  subgraph st0["Sub-topology 0"]' in lines and '  subgraph st1["Sub-topology 1"]' in lines
    for name in ("KSTREAM-SOURCE-0000000000", "KSTREAM-AGGREGATE-0000000003", "KSTREAM-SINK-0000000008"):
        assert f'["{name}"]' in text
    assert '(["lines"])' in text and '(["counts-repartition"])' in text and '(["out"])' in text
    assert '[("counts")]' in text  # the store as a cylinder
    agg_id = re.search(r"(n\d+)\[\"KSTREAM-AGGREGATE-0000000003\"\]", text)
    store_id = re.search(r"(n\d+)\[\(\"counts\"\)\]", text)
    assert agg_id and store_id
    assert f"  {agg_id.group(1)} --- {store_id.group(1)}" in lines


def test_repartition_splits_subtopologies_and_names_the_topic() -> None:
    b = ks.StreamsBuilder()
    b.stream("in").map(lambda k, v: (v, k)).repartition(name="by-value").filter(lambda k, v: True).to("out")
    t = b.build()
    assert t.repartition_topics == {"by-value-repartition": None}
    subs = t.subtopologies()
    assert len(subs) == 2
    assert subs[0].source_topics == ("in",) and subs[0].sink_topics == ("by-value-repartition",)
    assert subs[1].source_topics == ("by-value-repartition",) and subs[1].sink_topics == ("out",)


def test_repartition_with_partition_count_and_duplicate_name() -> None:
    b = ks.StreamsBuilder()
    s = b.stream("in")
    s.repartition(number_of_partitions=4, name="r").to("a")
    assert b.topology.repartition_topics == {"r-repartition": 4}
    with pytest.raises(ks.TopologyError, match="r-repartition"):
        s.repartition(name="r")
    with pytest.raises(ValueError, match="number_of_partitions"):
        s.repartition(number_of_partitions=0)


def test_stateless_topology_is_one_subtopology_and_independent_streams_are_two() -> None:
    b = ks.StreamsBuilder()
    b.stream("a").filter(lambda k, v: True).to("x")
    b.stream("b").to("y")
    subs = b.build().subtopologies()
    assert [s.source_topics for s in subs] == [("a",), ("b",)]


def test_processors_sharing_a_store_are_in_one_subtopology() -> None:
    b = ks.StreamsBuilder()
    b.add_state_store(ks.Stores.key_value_store_builder(ks.Stores.in_memory_key_value_store("shared")))
    b.stream("a").process(_Noop, stores=["shared"])
    b.stream("b").process(_Noop, stores=["shared"])
    subs = b.build().subtopologies()
    assert len(subs) == 1 and set(subs[0].source_topics) == {"a", "b"}


class _Noop(ks.Processor):
    def process(self, record: ks.Record) -> None:
        pass


def test_low_level_unknown_parent_is_named() -> None:
    t = ks.Topology().add_source("src", "in")
    with pytest.raises(ks.TopologyError, match="'ghost'") as err:
        t.add_processor("p", _Noop, "ghost")
    assert "'p'" in str(err.value)
    with pytest.raises(ks.TopologyError, match="'ghost'"):
        t.add_sink("s", "out", "ghost")


def test_low_level_duplicate_name_is_named() -> None:
    t = ks.Topology().add_source("src", "in").add_processor("p", _Noop, "src")
    with pytest.raises(ks.TopologyError, match="'p' already exists"):
        t.add_processor("p", _Noop, "src")
    with pytest.raises(ks.TopologyError, match="'src' already exists"):
        t.add_source("src", "other")


def test_low_level_unknown_store_is_named() -> None:
    t = ks.Topology().add_source("src", "in")
    with pytest.raises(ks.TopologyError, match="'missing'"):
        t.add_processor("p", _Noop, "src", stores=["missing"])


def test_low_level_other_errors() -> None:
    t = ks.Topology().add_source("src", "in").add_sink("sink", "out", "src")
    with pytest.raises(ks.TopologyError, match="'sink' is a sink"):
        t.add_processor("p", _Noop, "sink")
    with pytest.raises(ks.TopologyError, match=r"\['in'\].*'src'"):
        t.add_source("src2", "in")
    with pytest.raises(ks.TopologyError, match="'x'"):
        t.add_processor("x", 42, "src")  # type: ignore[arg-type]
    store = ks.Stores.key_value_store_builder(ks.Stores.in_memory_key_value_store("s"))
    t.add_state_store(store)
    with pytest.raises(ks.TopologyError, match="'s' is already added"):
        t.add_state_store(store)
    with pytest.raises(ks.TopologyError, match="'nobody'"):
        t.connect_processor_and_state_stores("nobody", "s")


COUNTS = ks.Stores.key_value_store_builder(ks.Stores.in_memory_key_value_store("Counts"))


def test_low_level_topology_runs_and_describes() -> None:
    t = (
        ks.Topology()
        .add_source("Source", "src-topic")
        .add_processor("Process", _Upper, "Source")
        .add_state_store(
            ks.Stores.key_value_store_builder(ks.Stores.in_memory_key_value_store("Counts")), "Process"
        )
        .add_sink("Sink", "sink-topic", "Process")
    )
    assert str(t.describe()) == (
        "Topologies:\n"
        "   Sub-topology: 0\n"
        "    Source: Source (topics: [src-topic])\n"
        "      --> Process\n"
        "    Processor: Process (stores: [Counts])\n"
        "      --> Sink\n"
        "      <-- Source\n"
        "    Sink: Sink (topic: sink-topic)\n"
        "      <-- Process\n"
    )
    with ks.TopologyTestDriver(t) as d:
        d.create_input_topic("src-topic").pipe_input("k", "abc", timestamp=1)
        assert d.create_output_topic("sink-topic").read_values_to_list() == ["ABC"]


class _Upper(ks.Processor):
    def process(self, record: ks.Record) -> None:
        self.context.forward(record.with_value(record.value.upper()))
