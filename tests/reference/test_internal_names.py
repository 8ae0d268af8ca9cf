"""Generated names against Kafka Streams 4.4: the processors, stores and internal topics (repartition, changelog,
foreign-key subscription/response) kstream_nb names for DSL calls are the ones Kafka Streams names for the same
calls (``InternalStreamsBuilder``'s one counter, advanced by each operation in Kafka's order).

``test_generated_topologies_agree`` compares the internal topics of generated topologies with the Java reference
runner's ``describe()`` (``python -m tests.reference.names``); the other tests are one topology per operation
family, with the names the Java runner's ``--describe`` printed for the same topology written out literally.
"""

from __future__ import annotations

from typing import Any

import pytest

import kstream_nb as ks
from tests.reference import names
from tests.reference.build import BuildError, ensure_jar
from tests.reference.diff import JavaRunnerError
from tests.reference.generate import generate

#: the generated topologies compared: seed and count, and the least number of them that must agree (reached
#: when this floor was set: a change that loses Kafka's names for some operation breaks it)
SEED, CASES, AGREE_AT_LEAST = 3, 150, 117


def _names(topology: ks.Topology) -> tuple[set[str], set[str]]:
    """(every node's name, the internal topics without the application id prefix)."""
    described = topology.describe()
    nodes = {n["name"] for s in described.subtopologies for n in s["nodes"]}
    topics = set(described.repartition_topics) | {f"{s}-changelog" for s in described.changelog_stores}
    return nodes, topics


def _upper_key(key: Any, value: Any) -> Any:
    return key.upper()


def _window_key(key: ks.Windowed, value: Any) -> tuple[str, Any]:
    return f"{key.key}@{key.start}/{key.end}", value


def _plus(a: Any, b: Any) -> Any:
    return f"{a}+{b}"


def test_generated_topologies_agree() -> None:
    try:
        ensure_jar(quiet=True)
    except (BuildError, JavaRunnerError) as e:
        pytest.fail(f"the Java reference runner does not build:\n{e}", pytrace=False)
    compared, agree, kinds, examples = names.compare(list(generate(SEED, CASES)))
    assert compared >= CASES - 5
    assert agree >= AGREE_AT_LEAST, (
        f"{agree} of {compared} generated topologies have Kafka Streams' internal topic names (at least "
        f"{AGREE_AT_LEAST} did): differing kinds {kinds.most_common(8)}, e.g. {examples[:3]}"
    )


def test_table_source_and_stream_table_join() -> None:
    """``builder.table``: its store name first (``<topic>-STATE-STORE-<n>``), then its two nodes; a stream-table
    join with a key-changed stream repartitions through ``<stream's node>-repartition``."""
    b = ks.StreamsBuilder()
    a = b.stream("a")
    b.stream("b")
    t = b.table("t")
    a.select_key(_upper_key).left_join(t, _plus).to("o")
    assert _names(b.build()) == (
        {
            "KSTREAM-SOURCE-0000000000", "KSTREAM-SOURCE-0000000001", "KSTREAM-SOURCE-0000000003",
            "KTABLE-SOURCE-0000000004", "KSTREAM-KEY-SELECT-0000000005", "KSTREAM-SINK-0000000006",
            "KSTREAM-FILTER-0000000007", "KSTREAM-SOURCE-0000000008", "KSTREAM-LEFTJOIN-0000000009",
            "KSTREAM-SINK-0000000010",
        },
        {"KSTREAM-KEY-SELECT-0000000005-repartition", "t-STATE-STORE-0000000002-changelog"},
    )  # fmt: skip


def test_stream_aggregation_through_a_repartition() -> None:
    """``groupBy().count()``: count burns a number, then the store, the node, the repartition's sink, filter and
    source (the topic named after the store)."""
    b = ks.StreamsBuilder()
    b.stream("a").group_by(_upper_key).count().to_stream().to("o")
    assert _names(b.build()) == (
        {
            "KSTREAM-SOURCE-0000000000", "KSTREAM-KEY-SELECT-0000000001", "KSTREAM-AGGREGATE-0000000004",
            "KSTREAM-SINK-0000000005", "KSTREAM-FILTER-0000000006", "KSTREAM-SOURCE-0000000007",
            "KTABLE-TOSTREAM-0000000008", "KSTREAM-SINK-0000000009",
        },
        {
            "KSTREAM-AGGREGATE-STATE-STORE-0000000003-repartition",
            "KSTREAM-AGGREGATE-STATE-STORE-0000000003-changelog",
        },
    )  # fmt: skip


def test_windowed_aggregations() -> None:
    """A time-windowed count burns a number as the plain count does; a session reduce is KSTREAM-REDUCE."""
    b = ks.StreamsBuilder()
    b.stream("a").group_by(_upper_key).windowed_by(ks.TimeWindows(10)).count().to_stream().map(_window_key).to("o")
    assert _names(b.build()) == (
        {
            "KSTREAM-SOURCE-0000000000", "KSTREAM-KEY-SELECT-0000000001", "KSTREAM-AGGREGATE-0000000004",
            "KSTREAM-SINK-0000000005", "KSTREAM-FILTER-0000000006", "KSTREAM-SOURCE-0000000007",
            "KTABLE-TOSTREAM-0000000008", "KSTREAM-MAP-0000000009", "KSTREAM-SINK-0000000010",
        },
        {
            "KSTREAM-AGGREGATE-STATE-STORE-0000000003-repartition",
            "KSTREAM-AGGREGATE-STATE-STORE-0000000003-changelog",
        },
    )  # fmt: skip
    b = ks.StreamsBuilder()
    sessions = b.stream("a").group_by(_upper_key).windowed_by(ks.SessionWindows(10))
    sessions.reduce(_plus).to_stream().map(_window_key).to("o")
    assert _names(b.build()) == (
        {
            "KSTREAM-SOURCE-0000000000", "KSTREAM-KEY-SELECT-0000000001", "KSTREAM-REDUCE-0000000003",
            "KSTREAM-SINK-0000000004", "KSTREAM-FILTER-0000000005", "KSTREAM-SOURCE-0000000006",
            "KTABLE-TOSTREAM-0000000007", "KSTREAM-MAP-0000000008", "KSTREAM-SINK-0000000009",
        },
        {"KSTREAM-REDUCE-STATE-STORE-0000000002-repartition", "KSTREAM-REDUCE-STATE-STORE-0000000002-changelog"},
    )  # fmt: skip


def test_suppress_after_a_windowed_count() -> None:
    b = ks.StreamsBuilder()
    counts = b.stream("in").group_by_key().windowed_by(ks.TimeWindows(10_000)).count()
    counts.suppress(ks.until_window_closes()).to_stream().map(_window_key).to("out")
    assert _names(b.build()) == (
        {
            "KSTREAM-SOURCE-0000000000", "KSTREAM-AGGREGATE-0000000003", "KTABLE-SUPPRESS-0000000004",
            "KTABLE-TOSTREAM-0000000006", "KSTREAM-MAP-0000000007", "KSTREAM-SINK-0000000008",
        },
        {"KSTREAM-AGGREGATE-STATE-STORE-0000000002-changelog", "KTABLE-SUPPRESS-STATE-STORE-0000000005-changelog"},
    )  # fmt: skip


def test_table_aggregation() -> None:
    """``KTable.groupBy().reduce()``: the store is KTABLE-AGGREGATE-STATE-STORE, then the repartition's sink and
    source, then the node; the grouped source table is materialized (it sends old values)."""
    b = ks.StreamsBuilder()
    grouped = b.table("a").group_by(lambda k, v: (k[:1], v))
    grouped.reduce(_plus, lambda a, b: f"{a}-{b}").to_stream().to("o")
    assert _names(b.build()) == (
        {
            "KSTREAM-SOURCE-0000000001", "KTABLE-SOURCE-0000000002", "KTABLE-SELECT-0000000003",
            "KSTREAM-SINK-0000000005", "KSTREAM-SOURCE-0000000006", "KTABLE-REDUCE-0000000007",
            "KTABLE-TOSTREAM-0000000008", "KSTREAM-SINK-0000000009",
        },
        {
            "KTABLE-AGGREGATE-STATE-STORE-0000000004-repartition",
            "KTABLE-AGGREGATE-STATE-STORE-0000000004-changelog",
            "a-STATE-STORE-0000000000-changelog",
        },
    )  # fmt: skip


def test_to_table_through_a_repartition() -> None:
    """``toTable``: the node's name, then its store's, then the repartition named after the node."""
    b = ks.StreamsBuilder()
    a = b.stream("a")
    b.stream("b")
    a.select_key(_upper_key).to_table().to_stream().to("o")
    assert _names(b.build()) == (
        {
            "KSTREAM-SOURCE-0000000000", "KSTREAM-SOURCE-0000000001", "KSTREAM-KEY-SELECT-0000000002",
            "KSTREAM-TOTABLE-0000000003", "KSTREAM-SINK-0000000005", "KSTREAM-FILTER-0000000006",
            "KSTREAM-SOURCE-0000000007", "KTABLE-TOSTREAM-0000000008", "KSTREAM-SINK-0000000009",
        },
        {"KSTREAM-TOTABLE-0000000003-repartition"},
    )  # fmt: skip


def test_stream_stream_outer_join_of_key_changed_streams() -> None:
    """Both sides repartition through ``<node>-repartition``, then come Kafka's two KSTREAM-WINDOWED numbers
    (nodes kstream_nb folds into the join sides), OUTERTHIS, OUTEROTHER and the merge. Kafka also logs the
    outer join's shared store (KSTREAM-OUTERSHARED-0000000012-store-changelog); kstream_nb's is not logged."""
    b = ks.StreamsBuilder()
    a, other = b.stream("a"), b.stream("b")
    left, right = a.select_key(_upper_key), other.map(lambda k, v: (v, k))
    left.outer_join(right, _plus, ks.JoinWindows(10, 10)).to("o")
    assert _names(b.build()) == (
        {
            "KSTREAM-SOURCE-0000000000", "KSTREAM-SOURCE-0000000001", "KSTREAM-KEY-SELECT-0000000002",
            "KSTREAM-MAP-0000000003", "KSTREAM-SINK-0000000004", "KSTREAM-FILTER-0000000005",
            "KSTREAM-SOURCE-0000000006", "KSTREAM-SINK-0000000007", "KSTREAM-FILTER-0000000008",
            "KSTREAM-SOURCE-0000000009", "KSTREAM-OUTERTHIS-0000000012", "KSTREAM-OUTEROTHER-0000000013",
            "KSTREAM-MERGE-0000000014", "KSTREAM-SINK-0000000015",
        },
        {
            "KSTREAM-KEY-SELECT-0000000002-repartition", "KSTREAM-MAP-0000000003-repartition",
            "KSTREAM-OUTERTHIS-0000000012-store-changelog", "KSTREAM-OUTEROTHER-0000000013-store-changelog",
        },
    )  # fmt: skip
    assert "KSTREAM-OUTERSHARED-0000000012-store" in b.build().store_builders


def test_foreign_key_join() -> None:
    """Kafka's subscription receiver is two nodes (SUBSCRIPTION-PROCESSOR-11 keeps the subscription, -12 looks up
    the right table); kstream_nb's is one, named with the first number."""
    b = ks.StreamsBuilder()
    b.table("l").join(b.table("r"), _plus, foreign_key_extractor=lambda v: v[:1]).to_stream().to("o")
    assert _names(b.build()) == (
        {
            "KSTREAM-SOURCE-0000000001", "KTABLE-SOURCE-0000000002", "KSTREAM-SOURCE-0000000004",
            "KTABLE-SOURCE-0000000005", "KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-0000000007",
            "KTABLE-SINK-0000000008", "KTABLE-SOURCE-0000000009",
            "KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-0000000011", "KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-0000000013",
            "KTABLE-SINK-0000000015", "KTABLE-SOURCE-0000000016",
            "KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-RESOLVER-PROCESSOR-0000000017",
            "KTABLE-FK-JOIN-OUTPUT-0000000018", "KTABLE-TOSTREAM-0000000020", "KSTREAM-SINK-0000000021",
        },
        {
            "KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-0000000006-topic",
            "KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-0000000014-topic",
            "KTABLE-FK-JOIN-SUBSCRIPTION-STATE-STORE-0000000010-changelog",
            "l-STATE-STORE-0000000000-changelog", "r-STATE-STORE-0000000003-changelog",
        },
    )  # fmt: skip


def test_split_branches() -> None:
    """Each branch node is ``<splitter><name>`` and takes a number when it is added."""
    b = ks.StreamsBuilder()
    split = b.stream("a").select_key(_upper_key).split().branch(lambda k, v: k == "a", name="n4")
    branches = split.no_default_branch()
    branches["n4"].merge(b.stream("b")).to("o")
    nodes, _ = _names(b.build())
    assert nodes == {
        "KSTREAM-SOURCE-0000000000", "KSTREAM-KEY-SELECT-0000000001", "KSTREAM-BRANCH-0000000002",
        "KSTREAM-BRANCH-0000000002n4", "KSTREAM-SOURCE-0000000004", "KSTREAM-MERGE-0000000005",
        "KSTREAM-SINK-0000000006",
    }  # fmt: skip
