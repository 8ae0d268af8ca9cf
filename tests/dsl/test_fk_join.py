"""Foreign-key table-table joins (KIP-213): scenarios of Kafka's KTableKTableForeignKeyJoinIntegrationTest,
stale responses, timestamps, the internal topics, and a live run over differently partitioned topics.
"""

from __future__ import annotations

import uuid
from typing import Any

import pandas as pd
import pytest

import kstream_nb as ks
from kstream_nb.cluster.connection import connect
from kstream_nb.cluster.serdes import JsonSerde
from kstream_nb.processor.fk_join import (
    SubscriptionResponse,
    SubscriptionResponseSerde,
    ValueHasher,
    subscribers_of,
)
from kstream_nb.runtime.test_driver import TestRecord

LEFT, RIGHT, OUT, REJOIN_OUT = "left_table", "right_table", "output-topic", "rejoin-output-topic"


def _s(v: Any) -> str:
    return "null" if v is None else str(v)


def joiner(a: Any, b: Any) -> str:
    return f"({_s(a)},{_s(b)})"


def rejoiner(a: Any, b: Any) -> str:
    return f"rejoin({_s(a)},{_s(b)})"


def extractor(value: str) -> str:
    return value.split("|")[1]


def topology(left_join: bool, store: str | None = None, rejoin: bool = False) -> ks.Topology:
    """Kafka's getTopology: String tables, extractor ``value.split("|")[1]``, joiner ``(l,r)``."""
    b = ks.StreamsBuilder()
    left = b.table(LEFT)
    right = b.table(RIGHT)
    join = left.left_join if left_join else left.join
    fk_join = join(right, joiner, store=store, foreign_key_extractor=extractor)
    fk_join.to_stream().to(OUT)
    if rejoin:  # a primary-key join of the result with the left table: both are keyed and partitioned alike
        again = fk_join.left_join if left_join else fk_join.join
        again(left, rejoiner).to_stream().to(REJOIN_OUT)
    return b.build()


@pytest.fixture(params=[False, True], ids=["inner", "left"])
def left_join(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


@pytest.fixture(params=[None, "store"], ids=["unnamed", "materialized"])
def store(request: pytest.FixtureRequest) -> str | None:
    name: str | None = request.param
    return name


class Driver:
    """The driver with the two inputs, the output and (when materialized) the result store."""

    def __init__(self, left_join: bool, store: str | None, rejoin: bool = False) -> None:
        self.d = ks.TopologyTestDriver(topology(left_join, store, rejoin))
        self.left = self.d.create_input_topic(LEFT)
        self.right = self.d.create_input_topic(RIGHT)
        self.out = self.d.create_output_topic(OUT)
        self.rejoin_out = self.d.create_output_topic(REJOIN_OUT)
        self.store = store

    def read(self) -> dict[str, Any]:
        return self.out.read_key_values_to_map()

    def stored(self) -> dict[str, Any] | None:
        return None if self.store is None else dict(self.d.get_key_value_store(self.store).all())

    def __enter__(self) -> Driver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.d.close()


def check(t: Driver, output: dict[str, Any], table: dict[str, Any]) -> None:
    assert t.read() == output
    if t.store is not None:
        assert t.stored() == table


@pytest.mark.parametrize("rejoin", [False, True], ids=["plain", "rejoin"])
def test_join_from_left_then_delete_left_entity(left_join: bool, store: str | None, rejoin: bool) -> None:
    with Driver(left_join, store, rejoin) as t:
        t.right.pipe_input("rhs1", "rhsValue1")
        t.right.pipe_input("rhs2", "rhsValue2")
        t.right.pipe_input("rhs3", "rhsValue3")  # never referenced: never in any result
        check(t, {}, {})

        t.left.pipe_input("lhs1", "lhsValue1|rhs1")
        t.left.pipe_input("lhs2", "lhsValue2|rhs2")
        expected = {"lhs1": "(lhsValue1|rhs1,rhsValue1)", "lhs2": "(lhsValue2|rhs2,rhsValue2)"}
        check(t, expected, expected)
        if rejoin:
            assert t.rejoin_out.read_key_values_to_map() == {
                "lhs1": "rejoin((lhsValue1|rhs1,rhsValue1),lhsValue1|rhs1)",
                "lhs2": "rejoin((lhsValue2|rhs2,rhsValue2),lhsValue2|rhs2)",
            }

        t.left.pipe_input("lhs3", "lhsValue3|rhs1")  # another reference to an existing fk
        check(t, {"lhs3": "(lhsValue3|rhs1,rhsValue1)"}, {**expected, "lhs3": "(lhsValue3|rhs1,rhsValue1)"})
        if rejoin:
            assert t.rejoin_out.read_key_values_to_map() == {
                "lhs3": "rejoin((lhsValue3|rhs1,rhsValue1),lhsValue3|rhs1)"
            }

        t.left.pipe_input("lhs1", None)  # the delete reaches the output
        check(t, {"lhs1": None}, {"lhs2": "(lhsValue2|rhs2,rhsValue2)", "lhs3": "(lhsValue3|rhs1,rhsValue1)"})
        if rejoin:
            assert t.rejoin_out.read_key_values_to_map() == {"lhs1": None}


def test_join_from_right_then_delete_right_entity(left_join: bool, store: str | None) -> None:
    with Driver(left_join, store) as t:
        t.left.pipe_input("lhs1", "lhsValue1|rhs1")
        t.left.pipe_input("lhs2", "lhsValue2|rhs2")
        t.left.pipe_input("lhs3", "lhsValue3|rhs1")
        half = {
            "lhs1": "(lhsValue1|rhs1,null)",
            "lhs2": "(lhsValue2|rhs2,null)",
            "lhs3": "(lhsValue3|rhs1,null)",
        }
        check(t, half if left_join else {}, half if left_join else {})

        t.right.pipe_input("rhs1", "rhsValue1")  # one right row updates both left rows pointing at it
        both = {"lhs1": "(lhsValue1|rhs1,rhsValue1)", "lhs3": "(lhsValue3|rhs1,rhsValue1)"}
        check(t, both, {**half, **both} if left_join else both)

        t.right.pipe_input("rhs2", "rhsValue2")
        full = {**both, "lhs2": "(lhsValue2|rhs2,rhsValue2)"}
        check(t, {"lhs2": "(lhsValue2|rhs2,rhsValue2)"}, full)

        t.right.pipe_input("rhs3", "rhsValue3")  # unreferenced
        check(t, {}, full)

        t.right.pipe_input("rhs1", None)  # every left row on rhs1 gets a tombstone (inner) / a half join (left)
        if left_join:
            gone = {"lhs1": "(lhsValue1|rhs1,null)", "lhs3": "(lhsValue3|rhs1,null)"}
            check(t, gone, {**gone, "lhs2": "(lhsValue2|rhs2,rhsValue2)"})
        else:
            check(t, {"lhs1": None, "lhs3": None}, {"lhs2": "(lhsValue2|rhs2,rhsValue2)"})


def test_deleting_a_non_joining_record_emits_a_tombstone(left_join: bool, store: str | None) -> None:
    with Driver(left_join, store) as t:
        t.left.pipe_input("lhs1", "lhsValue1|rhs1")
        expected = {"lhs1": "(lhsValue1|rhs1,null)"} if left_join else {}
        check(t, expected, expected)
        # inner: an unnecessary tombstone (whether a result was emitted before is unknown); left: necessary
        t.left.pipe_input("lhs1", None)
        check(t, {"lhs1": None}, {})
        t.left.pipe_input("lhs1", None)  # deleting again is idempotent
        check(t, {}, {})


def test_deleting_a_non_existing_record_emits_nothing(left_join: bool, store: str | None) -> None:
    with Driver(left_join, store) as t:
        t.left.pipe_input("lhs1", None)
        check(t, {}, {})


def test_moving_to_non_matching_foreign_keys_produces_nulls(left_join: bool, store: str | None) -> None:
    with Driver(left_join, store) as t:
        t.left.pipe_input("lhs1", "lhsValue1|rhs1")  # inner: nothing for a new row on a missing fk
        expected = {"lhs1": "(lhsValue1|rhs1,null)"} if left_join else {}
        check(t, expected, expected)

        t.left.pipe_input("lhs1", "lhsValue1|rhs2")  # fk change to a missing fk: tombstone / half join
        check(t, {"lhs1": "(lhsValue1|rhs2,null)" if left_join else None},
              {"lhs1": "(lhsValue1|rhs2,null)"} if left_join else {})  # fmt: skip
        t.left.pipe_input("lhs1", "lhsValue1|rhs3")
        check(t, {"lhs1": "(lhsValue1|rhs3,null)" if left_join else None},
              {"lhs1": "(lhsValue1|rhs3,null)"} if left_join else {})  # fmt: skip

        t.right.pipe_input("rhs1", "rhsValue1")  # referenced before, not now: no change
        check(t, {}, {"lhs1": "(lhsValue1|rhs3,null)"} if left_join else {})

        t.left.pipe_input("lhs1", "lhsValue1|rhs1")  # to an existing fk: the join completes
        check(t, {"lhs1": "(lhsValue1|rhs1,rhsValue1)"}, {"lhs1": "(lhsValue1|rhs1,rhsValue1)"})

        t.left.pipe_input("lhs1", "lhsValue1|rhs2")  # and away again
        check(t, {"lhs1": "(lhsValue1|rhs2,null)" if left_join else None},
              {"lhs1": "(lhsValue1|rhs2,null)"} if left_join else {})  # fmt: skip


def test_fk_change_unsubscribes_the_old_foreign_key(left_join: bool, store: str | None) -> None:
    with Driver(left_join, store) as t:
        t.right.pipe_input("rhs1", "rhsValue1")
        t.right.pipe_input("rhs2", "rhsValue2")
        check(t, {}, {})
        t.left.pipe_input("lhs1", "lhsValue1|rhs1")
        check(t, {"lhs1": "(lhsValue1|rhs1,rhsValue1)"}, {"lhs1": "(lhsValue1|rhs1,rhsValue1)"})
        t.left.pipe_input("lhs1", "lhsValue1|rhs2")  # the row moves to rhs2
        check(t, {"lhs1": "(lhsValue1|rhs2,rhsValue2)"}, {"lhs1": "(lhsValue1|rhs2,rhsValue2)"})
        t.right.pipe_input("rhs1", "rhsValue1Delta")  # the old fk no longer reaches lhs1
        check(t, {}, {"lhs1": "(lhsValue1|rhs2,rhsValue2)"})
        (name,) = [s for s in t.d.topology.store_builders if "SUBSCRIPTION-STATE-STORE" in s]
        sub_store = t.d.get_state_store(name)
        assert [pk for pk, _ in subscribers_of(sub_store, "rhs1")] == []
        assert [pk for pk, _ in subscribers_of(sub_store, "rhs2")] == ["lhs1"]


def test_one_right_update_reaches_every_left_row_and_keeps_old_values_downstream() -> None:
    """Many rows on one fk; old values flow, so a group_by/aggregate over the result stays right."""
    b = ks.StreamsBuilder()
    orders = b.table("orders")
    customers = b.table("customers")
    enriched = orders.join(
        customers,
        lambda o, c: {"amount": o["amount"], "tier": c["tier"]},
        foreign_key_extractor=lambda o: o["customer"],
    )
    enriched.to_stream().to("enriched")
    totals = enriched.group_by(lambda k, v: (v["tier"], v["amount"])).reduce(
        lambda a, v: a + v, lambda a, v: a - v, store="per-tier"
    )
    totals.to_stream().to("totals")
    with ks.TopologyTestDriver(b.build()) as d:
        c, o = d.create_input_topic("customers"), d.create_input_topic("orders")
        c.pipe_input("ann", {"tier": "gold"}, timestamp=1)
        for i, amount in enumerate([10, 20, 30]):
            o.pipe_input(f"o{i}", {"customer": "ann", "amount": amount}, timestamp=10 + i)
        o.pipe_input("o9", {"customer": "bob", "amount": 99}, timestamp=20)  # bob unknown: inner emits nothing
        assert d.get_key_value_store("per-tier").get("gold") == 60
        c.pipe_input("ann", {"tier": "silver"}, timestamp=30)
        out = d.create_output_topic("enriched").read_records_to_list()
        assert out[-3:] == [
            TestRecord(f"o{i}", {"amount": a, "tier": "silver"}, 30) for i, a in enumerate([10, 20, 30])
        ]
        per_tier = d.get_key_value_store("per-tier")
        assert (per_tier.get("gold"), per_tier.get("silver")) == (0, 60)
        c.pipe_input("bob", {"tier": "gold"}, timestamp=40)
        assert per_tier.get("gold") == 99


def test_result_timestamps_follow_kafka() -> None:
    """Left-triggered: max(left ts, right ts); right-triggered: the right update's ts."""
    with Driver(False, None) as t:
        t.right.pipe_input("r", "R1", timestamp=50)
        t.left.pipe_input("a", "A|r", timestamp=10)
        t.left.pipe_input("b", "B|r", timestamp=70)
        t.right.pipe_input("r", "R2", timestamp=60)
        assert t.out.read_records_to_list() == [
            TestRecord("a", "(A|r,R1)", 50),
            TestRecord("b", "(B|r,R1)", 70),
            TestRecord("a", "(A|r,R2)", 60),
            TestRecord("b", "(B|r,R2)", 60),
        ]


def test_stale_responses_are_dropped_by_value_hash() -> None:
    """A response for a left value that has changed since is dropped; a current one is joined."""
    with Driver(True, "store") as t:
        t.right.pipe_input("r1", "R1")
        t.left.pipe_input("k", "old|r1")
        t.left.pipe_input("k", "new|r1")
        assert t.read() == {"k": "(new|r1,R1)"}
        (name,) = [n for n in t.d.topology.repartition_topics if "SUBSCRIPTION-RESPONSE" in n]
        topic = f"topology-test-driver-{name}"
        serde, key = SubscriptionResponseSerde(JsonSerde()), JsonSerde().serialize(topic, "k")
        hasher = ValueHasher(None)
        stale = SubscriptionResponse(hasher("old|r1"), "late", 0)
        t.d.pipe_raw(topic, key, serde.serialize(topic, stale), 100)
        assert t.read() == {}
        assert t.stored() == {"k": "(new|r1,R1)"}
        current = SubscriptionResponse(hasher("new|r1"), "R1b", 0)
        t.d.pipe_raw(topic, key, serde.serialize(topic, current), 101)
        assert t.read() == {"k": "(new|r1,R1b)"}


def test_extractor_may_take_the_key_and_null_fks() -> None:
    """``fn(key, value)`` extractors; a None fk: inner drops (tombstone when it had a fk), left half-joins."""
    b = ks.StreamsBuilder()
    left, right = b.table("l"), b.table("r")
    fk = lambda k, v: v.get("fk")  # noqa: E731
    left.join(right, joiner, foreign_key_extractor=fk).to_stream().to("inner")
    left.left_join(right, joiner, foreign_key_extractor=fk).to_stream().to("left")
    with ks.TopologyTestDriver(b.build()) as d:
        lt, rt = d.create_input_topic("l"), d.create_input_topic("r")
        inner, outer = d.create_output_topic("inner"), d.create_output_topic("left")
        rt.pipe_input("x", "X")
        lt.pipe_input("a", {"fk": None})
        assert inner.read_key_values_to_list() == []
        assert outer.read_key_values_to_list() == [("a", "({'fk': None},null)")]
        lt.pipe_input("a", {"fk": "x"})
        assert inner.read_key_values_to_list() == [("a", "({'fk': 'x'},X)")]
        assert outer.read_key_values_to_list() == [("a", "({'fk': 'x'},X)")]
        lt.pipe_input("a", {"fk": None})
        assert inner.read_key_values_to_list() == [("a", None)]
        assert outer.read_key_values_to_list() == [("a", "({'fk': None},null)")]


def test_internal_topics_and_describe() -> None:
    b = ks.StreamsBuilder()
    b.table("l").join(b.table("r"), joiner, foreign_key_extractor=extractor).to_stream().to("o")
    topo = b.build()
    assert set(topo.repartition_topics) == {
        "KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-0000000006-topic",
        "KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-0000000014-topic",
    }
    subs = topo.subtopologies()
    assert len(subs) == 2
    by_topic = {t: s.id for s in subs for t in s.source_topics}
    assert by_topic["l"] == by_topic["KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-0000000014-topic"]
    assert by_topic["r"] == by_topic["KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-0000000006-topic"]
    assert "SUBSCRIPTION-REGISTRATION-0000000006-topic" in str(topo.describe())
    with pytest.raises(TypeError, match="foreign_key_extractor"):
        b.table("x").join(b.table("y"), joiner, foreign_key_extractor="not a function")  # type: ignore[arg-type]


# ---- live: differently partitioned topics ---------------------------------------------------------


def _final(df: pd.DataFrame) -> dict[Any, Any]:
    """The last value per key of a topic read with ``read_topic`` (per key, partitions keep order)."""
    last: dict[Any, Any] = {}
    for key, value in zip(df["key"], df["value"], strict=True):
        last[key] = value
    return {k: v for k, v in last.items() if v is not None}


def _enrich(order: dict[str, Any], customer: dict[str, Any] | None) -> dict[str, Any]:
    return {
        "qty": order["qty"],
        "customer": order["customer"],
        "name": None if customer is None else customer["name"],
    }


@pytest.mark.parametrize("left_join", [False, True], ids=["inner", "left"])
def test_live_fk_join_over_3_and_2_partitions_matches_a_pandas_merge(left_join: bool) -> None:
    url = f"memory://fk-{uuid.uuid4().hex[:8]}"
    customers = [(f"c{i}", {"name": f"name-{i}"}) for i in range(12)]
    orders = [(f"o{i}", {"customer": f"c{i % 15}", "qty": i}) for i in range(60)]  # c12..c14 do not exist
    ks.produce("customers", customers, bootstrap_servers=url, partitions=2)
    ks.produce("orders", orders, bootstrap_servers=url, partitions=3)

    b = ks.StreamsBuilder()
    o, c = b.table("orders"), b.table("customers")
    join = o.left_join if left_join else o.join
    join(c, _enrich, store="enriched", foreign_key_extractor=lambda v: v["customer"]).to_stream().to("out")
    app = ks.KafkaStreams(b.build(), f"fk-{'left' if left_join else 'inner'}", url, num_stream_threads=2)
    try:
        app.start().wait_until_running()
        app.wait_until_idle()
        # second round while running: fk changes, right updates and deletes, left deletes, new rows
        changes_c: list[tuple[str, dict[str, Any] | None]] = [
            ("c1", {"name": "renamed-1"}),
            ("c2", None),
            ("c13", {"name": "late-13"}),
            ("c3", None),
        ]
        changes_o: list[tuple[str, dict[str, Any] | None]] = [
            (f"o{i}", {"customer": f"c{(i * 7) % 15}", "qty": 100 + i}) for i in range(0, 60, 4)
        ]
        changes_o += [(f"o{i}", None) for i in range(1, 60, 9)] + [("o99", {"customer": "c1", "qty": 99})]
        ks.produce("customers", changes_c, bootstrap_servers=url)
        ks.produce("orders", changes_o, bootstrap_servers=url)
        ks.produce("customers", [("c3", {"name": "back-3"})], bootstrap_servers=url)
        app.wait_until_idle()

        final_c: dict[str, dict[str, Any] | None] = dict(customers)
        final_o: dict[str, dict[str, Any] | None] = dict(orders)
        for k, v in [*changes_c, ("c3", {"name": "back-3"})]:
            final_c[k] = v
        for k, v in changes_o:
            final_o[k] = v
        left_df = pd.DataFrame([{"key": k, **v} for k, v in final_o.items() if v is not None])
        right_df = pd.DataFrame([{"customer": k, **v} for k, v in final_c.items() if v is not None])
        merged = left_df.merge(right_df, on="customer", how="left" if left_join else "inner")
        expected = {
            r.key: {"qty": r.qty, "customer": r.customer, "name": None if pd.isna(r.name) else r.name}
            for r in merged.itertuples()
        }
        assert len(expected) == (
            len(left_df) if left_join else len(left_df[left_df.customer.isin(right_df.customer)])
        )
        assert _final(ks.read_topic("out", bootstrap_servers=url)) == expected
        assert dict(app.store("enriched").all()) == expected
        # the response topic is sized like the left (orders) topic, the registration topic like the right
        admin = connect(url).admin()
        counts = {
            kind: admin.partition_count(t)
            for t in admin.list_topics()
            for kind in ("registration", "response")
            if f"SUBSCRIPTION-{kind.upper()}-" in t
        }
        assert counts == {"registration": 2, "response": 3}
    finally:
        assert app.stop()


def _orders_by_customer(url: str, app_id: str) -> ks.KafkaStreams:
    """Orders re-keyed through an aggregation (the left table reads a repartition topic), FK-joined."""
    b = ks.StreamsBuilder()
    orders = b.stream("events").group_by(lambda k, v: v["order"]).reduce(lambda old, new: new)
    orders.join(
        b.table("customers"), _enrich, store="enriched", foreign_key_extractor=lambda v: v["customer"]
    ).to_stream().to("out")
    return ks.KafkaStreams(b.build(), app_id, url)


def test_live_left_table_from_a_repartition_topic_and_restart_restores_subscriptions() -> None:
    """The response topic follows the left table's repartition topic (3), not the right topic (2); after a
    restart the subscription store comes back from its changelog, so a right update reaches old rows.
    """
    url = f"memory://fk-{uuid.uuid4().hex[:8]}"
    events = [(f"e{i}", {"order": f"o{i}", "customer": f"c{i % 4}", "qty": i}) for i in range(24)]
    ks.produce("events", events, bootstrap_servers=url, partitions=3)
    ks.produce("customers", [(f"c{i}", {"name": f"n{i}"}) for i in range(4)], bootstrap_servers=url, partitions=2)
    app = _orders_by_customer(url, "fk-rekeyed")
    try:
        app.start().wait_until_running()
        app.wait_until_idle()
        assert len(dict(app.store("enriched").all())) == 24
    finally:
        assert app.stop()
    admin = connect(url).admin()
    topics = {kind: t for t in admin.list_topics() for kind in ("registration", "response") if kind in t.lower()}
    assert admin.partition_count(topics["response"]) == 3
    assert admin.partition_count(topics["registration"]) == 2

    ks.produce("customers", [("c1", {"name": "renamed"})], bootstrap_servers=url)
    app = _orders_by_customer(url, "fk-rekeyed")
    try:
        app.start().wait_until_running()
        app.wait_until_idle()
        names = {k: v["name"] for k, v in _final(ks.read_topic("out", bootstrap_servers=url)).items()}
        assert names == {f"o{i}": "renamed" if i % 4 == 1 else f"n{i % 4}" for i in range(24)}
    finally:
        assert app.stop()


def test_live_fk_join_started_before_the_left_topic_exists() -> None:
    """The response topic must get the left topic's partition count, so it is created only once the left
    topic exists (before, it was sized from the right side and the join failed when orders arrived)."""
    url = f"memory://fk-{uuid.uuid4().hex[:8]}"
    ks.produce(
        "customers", [(f"c{i}", {"name": f"name-{i}"}) for i in range(4)], bootstrap_servers=url, partitions=2
    )
    b = ks.StreamsBuilder()
    o, c = b.table("orders"), b.table("customers")
    o.join(c, _enrich, store="enriched", foreign_key_extractor=lambda v: v["customer"]).to_stream().to("out")
    app = ks.KafkaStreams(b.build(), "fk-late", url, missing_source_topic_timeout_ms=60_000)
    try:
        app.start()
        orders = [(f"o{i}", {"customer": f"c{i % 4}", "qty": i}) for i in range(12)]
        ks.produce("orders", orders, bootstrap_servers=url, partitions=3)
        app.wait_until_running().wait_until_idle()
        expected = {k: _enrich(v, {"name": f"name-{int(v['customer'][1:])}"}) for k, v in orders}
        assert dict(app.store("enriched").all()) == expected
        admin = connect(url).admin()
        response = [t for t in admin.list_topics() if "RESPONSE" in t]
        assert response and all(admin.partition_count(t) == 3 for t in response)
    finally:
        app.stop()
