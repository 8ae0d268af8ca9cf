"""Versioned tables (KIP-914) and stream-table joins with a grace period (KIP-923) on the test driver.

Cases marked "Kafka:" transcribe the named test of Kafka Streams (KStreamKTableJoinTest, KTableAggregateTest)
with its inputs and expected outputs; the others follow the rules read in Kafka's KTableSource,
KTableFilter, KTableRepartitionMap, KTableKTable*Join, KStreamKTableJoinProcessor and
RocksDBTimeOrderedKeyValueBuffer.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import kstream_nb as ks
from kstream_nb.errors import TopologyError
from kstream_nb.state.versioned import VersionedRecord

MINUTES_5 = 300_000


def versioned(name: str = "versioned", retention: Any = MINUTES_5) -> Any:
    return ks.Stores.persistent_versioned_key_value_store(name, retention)


def plus(left: Any, right: Any) -> str:
    """Kafka's MockValueJoiner.TOSTRING_JOINER."""
    return f"{left}+{right}"


def records(driver: ks.TopologyTestDriver, topic: str = "out") -> list[tuple[Any, Any, int]]:
    return [(r.key, r.value, r.timestamp) for r in driver.create_output_topic(topic).read_records_to_list()]


@pytest.fixture
def drivers() -> Iterator[list[ks.TopologyTestDriver]]:
    made: list[ks.TopologyTestDriver] = []
    yield made
    for driver in made:
        driver.close()


def drive(
    drivers: list[ks.TopologyTestDriver], builder: ks.StreamsBuilder, **config: Any
) -> ks.TopologyTestDriver:
    driver = ks.TopologyTestDriver(builder.build(), {"statestore_cache_max_bytes": 0, **config})
    drivers.append(driver)
    return driver


# ---- the table source --------------------------------------------------------------------------


def test_versioned_source_forwards_what_the_store_put(drivers) -> None:
    b = ks.StreamsBuilder()
    b.table("t", store=versioned(retention=100)).to_stream().to("out")
    driver = drive(drivers, b)
    table = driver.create_input_topic("t")
    table.pipe_input("a", "v10", timestamp=10)
    table.pipe_input("a", "v5", timestamp=5)  # out of order: history, still forwarded (to_stream emits all)
    table.pipe_input("a", "v200", timestamp=200)
    table.pipe_input("a", "v99", timestamp=99)  # 99 < 200 - 100: older than the grace period, not put
    table.pipe_input("a", "v100", timestamp=100)  # exactly stream time - grace: put
    table.pipe_input("a", None, timestamp=150)  # an out-of-order delete
    assert records(driver) == [("a", "v10", 10), ("a", "v5", 5), ("a", "v200", 200), ("a", "v100", 100),
                               ("a", None, 150)]  # fmt: skip
    assert driver.dropped_records_total == 1
    store = driver.get_state_store("versioned")
    assert store.get("a") == VersionedRecord("v200", 200)
    assert store.get("a", 120) == VersionedRecord("v100", 100, 150)
    assert store.get("a", 160) is None
    assert store.get("a", 99) is None  # history older than stream time - retention is not read


def test_out_of_order_updates_carry_the_latest_value_as_old_value(drivers) -> None:
    changes: list[Any] = []

    class Capture(ks.Processor):
        def process(self, record: ks.Record) -> None:
            changes.append((type(record.value).__name__, tuple(record.value), record.timestamp))

    b = ks.StreamsBuilder()
    table = b.table("t", store=versioned())
    table.enable_sending_old_values()  # as a downstream group_by/suppress would: Kafka sends none otherwise
    b.topology.add_processor("capture", Capture, table.node)
    driver = drive(drivers, b)
    t = driver.create_input_topic("t")
    t.pipe_input("a", "x", timestamp=10)
    t.pipe_input("a", "y", timestamp=8)
    t.pipe_input("a", "z", timestamp=12)
    assert changes == [
        ("Change", ("x", None), 10),
        ("OutOfOrderChange", ("y", "x"), 8),
        ("Change", ("z", "x"), 12),
    ]


def test_filter_and_map_values_keep_out_of_order_updates(drivers) -> None:
    b = ks.StreamsBuilder()
    b.table("t", store=versioned()).filter(lambda k, v: v != "drop").map_values(str.upper).to_stream().to("out")
    driver = drive(drivers, b)
    t = driver.create_input_topic("t")
    t.pipe_input("a", "x", timestamp=10)
    t.pipe_input("a", "y", timestamp=5)
    t.pipe_input("a", "drop", timestamp=4)
    assert records(driver) == [("a", "X", 10), ("a", "Y", 5), ("a", None, 4)]


def test_a_non_versioned_materialization_makes_updates_latest(drivers) -> None:
    b = ks.StreamsBuilder()
    filtered = b.table("t", store=versioned()).filter(lambda k, v: True, store="plain")
    filtered.group_by(lambda k, v: ("all", v)).reduce(lambda a, v: a + v, lambda a, v: a.replace(v, "", 1)) \
        .to_stream().to("out")  # fmt: skip
    driver = drive(drivers, b)
    t = driver.create_input_topic("t")
    t.pipe_input("a", "x", timestamp=10)
    t.pipe_input("a", "y", timestamp=5)  # out of order, but the plain store takes it as the latest row
    assert driver.get_key_value_store("plain").get("a") == "y"
    assert records(driver) == [("all", "x", 10), ("all", "y", 10)]  # subtract "x", add "y": one update


# ---- aggregations (Kafka: KTableAggregateTest) ------------------------------------------------


def test_count_of_versioned_table_ignores_out_of_order_updates(drivers) -> None:
    """Kafka: KTableAggregateTest.testCountOfVersionedStore."""
    b = ks.StreamsBuilder()
    b.table("input", store=versioned()).group_by(lambda k, v: (v, v)).count().to_stream().to("out")
    driver = drive(drivers, b)
    t = driver.create_input_topic("input")
    for key, value, ts in [("A", "green", 10), ("B", "green", 9), ("A", "blue", 12), ("A", "blue", 11),
                           ("C", "yellow", 15), ("D", "green", 11)]:  # fmt: skip
        t.pipe_input(key, value, timestamp=ts)
    assert records(driver) == [("green", 1, 10), ("green", 2, 10), ("green", 1, 12), ("blue", 1, 12),
                               ("yellow", 1, 15), ("green", 2, 12)]  # fmt: skip


def test_aggregate_of_versioned_table_ignores_out_of_order_updates(drivers) -> None:
    """Kafka: KTableAggregateTest.testAggOfVersionedStore."""

    def regroup(key: str, value: str) -> Any:
        if key == "null":
            return (None, value)
        if key == "NULL":
            return None
        return (value, value)

    b = ks.StreamsBuilder()
    (
        b.table("topic1", store=versioned())
        .group_by(regroup)
        .aggregate(lambda: "0", lambda k, v, agg: f"{agg}+{v}", lambda k, v, agg: f"{agg}-{v}")
        .to_stream()
        .to("out")
    )
    driver = drive(drivers, b, default_key_serde="string")  # Kafka's test: String keys
    t = driver.create_input_topic("topic1")
    for key, value, ts in [("A", "1", 10), ("A", None, 15), ("A", "1", 12), ("B", "2", 20), ("null", "3", 25),
                           ("B", "4", 23), ("NULL", "5", 24), ("B", "7", 22)]:  # fmt: skip
        t.pipe_input(key, value, timestamp=ts)
    assert records(driver) == [("1", "0+1", 10), ("1", "0+1-1", 15), ("2", "0+2", 20), ("2", "0+2-2", 23),
                               ("4", "0+4", 23)]  # fmt: skip


# ---- table-table joins -------------------------------------------------------------------------


def test_table_table_join_drops_out_of_order_updates_of_the_versioned_side(drivers) -> None:
    b = ks.StreamsBuilder()
    left = b.table("left", store=versioned("left-store"))
    right = b.table("right")
    left.join(right, plus).to_stream().to("out")
    driver = drive(drivers, b)
    lt, rt = driver.create_input_topic("left"), driver.create_input_topic("right")
    rt.pipe_input("a", "r1", timestamp=1)
    lt.pipe_input("a", "l10", timestamp=10)
    lt.pipe_input("a", "l5", timestamp=5)  # out of order on the versioned side: dropped
    rt.pipe_input("a", "r2", timestamp=2)  # the other side joins the latest left row
    assert records(driver) == [("a", "l10+r1", 10), ("a", "l10+r2", 10)]
    assert driver.dropped_records_total == 1


# ---- stream-table joins ------------------------------------------------------------------------


def test_stream_table_join_reads_a_versioned_table_as_of_the_record(drivers) -> None:
    b = ks.StreamsBuilder()
    table = b.table("prices", store=versioned("prices"))
    stream = b.stream("orders")
    stream.join(table, plus).to("inner")
    stream.left_join(table, plus).to("left")
    driver = drive(drivers, b)
    prices, orders = driver.create_input_topic("prices"), driver.create_input_topic("orders")
    prices.pipe_input("x", "p10", timestamp=10)
    prices.pipe_input("x", "p20", timestamp=20)
    prices.pipe_input("x", None, timestamp=30)
    for ts in (15, 25, 5, 35, 20):
        orders.pipe_input("x", f"o{ts}", timestamp=ts)
    assert records(driver, "inner") == [("x", "o15+p10", 15), ("x", "o25+p20", 25), ("x", "o20+p20", 20)]
    assert records(driver, "left") == [("x", "o15+p10", 15), ("x", "o25+p20", 25), ("x", "o5+None", 5),
                                       ("x", "o35+None", 35), ("x", "o20+p20", 20)]  # fmt: skip


def _grace_join(drivers: list[ks.TopologyTestDriver], grace: int, left: bool = False) -> ks.TopologyTestDriver:
    """Kafka's KStreamKTableJoinTest.makeJoin: table "tableTopic2" in a 5-minute versioned store "V-grace"."""
    b = ks.StreamsBuilder()
    table = b.table("tableTopic2", store=versioned("V-grace"))
    stream = b.stream("streamTopic")
    (stream.left_join if left else stream.join)(table, plus, grace=grace).to("out")
    return drive(drivers, b)


def _push(topic: Any, count: int, prefix: str, timestamps: Any) -> None:
    for i in range(count):
        topic.pipe_input(i, f"{prefix}{i}", timestamp=timestamps(i))


def test_join_is_delayed_by_the_grace_period(drivers) -> None:
    """Kafka: KStreamKTableJoinTest.shouldDelayJoinByGracePeriod."""
    driver = _grace_join(drivers, 2)
    table, stream = driver.create_input_topic("tableTopic2"), driver.create_input_topic("streamTopic")
    _push(table, 4, "Y", lambda i: 0)
    assert records(driver) == []
    _push(stream, 4, "X", lambda i: i)
    assert records(driver) == [(0, "X0+Y0", 0), (1, "X1+Y1", 1)]
    _push(table, 4, "YY", lambda i: 0)
    assert records(driver) == []
    _push(stream, 4, "X", lambda i: i)
    assert records(driver) == [(0, "X0+YY0", 0), (1, "X1+YY1", 1)]
    stream.pipe_input(5, "test", timestamp=7)
    assert records(driver) == [(2, "X2+YY2", 2), (2, "X2+YY2", 2), (3, "X3+YY3", 3), (3, "X3+YY3", 3)]
    _push(table, 4, "YYY", lambda i: 0)
    assert records(driver) == []


def test_late_records_join_at_once_with_a_grace_period(drivers) -> None:
    """Kafka: KStreamKTableJoinTest.shouldHandleLateJoinsWithGracePeriod."""
    driver = _grace_join(drivers, 2)
    table, stream = driver.create_input_topic("tableTopic2"), driver.create_input_topic("streamTopic")
    _push(table, 4, "Y", lambda i: 0)
    _push(stream, 4, "X", lambda i: i)
    assert records(driver) == [(0, "X0+Y0", 0), (1, "X1+Y1", 1)]
    _push(stream, 1, "X", lambda i: i)  # joined at once, evicts nothing
    assert records(driver) == [(0, "X0+Y0", 0)]


def test_buffered_records_join_the_table_as_of_their_own_time_in_time_order(drivers) -> None:
    driver = _grace_join(drivers, 10, left=True)
    table, stream = driver.create_input_topic("tableTopic2"), driver.create_input_topic("streamTopic")
    table.pipe_input("k", "t0", timestamp=0)
    table.pipe_input("k", "t6", timestamp=6)
    stream.pipe_input("k", "s7", timestamp=7, headers=[("h", b"7")])
    stream.pipe_input("k", "s3", timestamp=3)
    stream.pipe_input("b", "s3b", timestamp=3)
    stream.pipe_input("a", "s3a", timestamp=3)
    table.pipe_input("k", "t2", timestamp=2)  # arrives later, but is valid from 2: s3 joins it
    assert records(driver) == []
    stream.pipe_input("z", "s17", timestamp=17)  # buffer stream time 17: everything at or before 7 goes
    out = driver.create_output_topic("out").read_records_to_list()
    assert [(r.key, r.value, r.timestamp) for r in out] == [
        ("a", "s3a+None", 3), ("b", "s3b+None", 3), ("k", "s3+t2", 3), ("k", "s7+t6", 7)
    ]  # fmt: skip
    assert out[-1].headers == (("h", b"7"),)


def test_null_values_are_dropped_and_do_not_advance_the_buffer(drivers) -> None:
    driver = _grace_join(drivers, 5)
    table, stream = driver.create_input_topic("tableTopic2"), driver.create_input_topic("streamTopic")
    table.pipe_input("k", "t", timestamp=0)
    stream.pipe_input("k", "s1", timestamp=1)
    stream.pipe_input("k", None, timestamp=100)  # dropped (null value): the buffer's stream time stays 1
    assert records(driver) == [] and driver.dropped_records_total == 1
    stream.pipe_input("k", "s6", timestamp=6)
    assert records(driver) == [("k", "s1+t", 1)]


# ---- what Kafka refuses --------------------------------------------------------------------------


def test_grace_needs_a_versioned_table() -> None:
    b = ks.StreamsBuilder()
    with pytest.raises(
        TopologyError, match=r"^KTable must be versioned to use a grace period in a stream table join\.$"
    ):
        b.stream("topic").join(b.table("topic2"), plus, grace=6)


def test_a_materialization_that_is_not_versioned_is_not_versioned() -> None:
    """Kafka: shouldFailIfTableIsNotVersionedButMaterializationIsInherited (an in-memory store, then a filter)."""
    b = ks.StreamsBuilder()
    table = b.table("topic2", store="tableB").filter(lambda k, v: True)
    with pytest.raises(TopologyError, match="must be versioned"):
        b.stream("topic").join(table, plus, grace=6)


def test_versioned_semantics_are_inherited_through_a_filter(drivers) -> None:
    """Kafka: shouldNotFailIfTableIsVersionedButMaterializationIsInherited; the join reads as of the record."""
    b = ks.StreamsBuilder()
    table = b.table("topic2", store=versioned("tableB")).filter(lambda k, v: v != "hidden")
    b.stream("topic").join(table, plus, grace=6).to("out")
    driver = drive(drivers, b)
    t, s = driver.create_input_topic("topic2"), driver.create_input_topic("topic")
    t.pipe_input("k", "v1", timestamp=1)
    t.pipe_input("k", "hidden", timestamp=5)
    s.pipe_input("k", "a", timestamp=2)
    s.pipe_input("k", "b", timestamp=6)
    s.pipe_input("k", "c", timestamp=20)
    assert records(driver) == [("k", "a+v1", 2)]  # b at 6 sees the filtered-out row: no inner join result


def test_grace_longer_than_history_retention_is_refused() -> None:
    """Kafka: shouldFailIfGracePeriodIsLongerThanHistoryRetention (and ...AndInheritedStore)."""
    b = ks.StreamsBuilder()
    with pytest.raises(TopologyError, match=r"^History retention must be at least grace period\.$"):
        b.stream("topic").join(b.table("topic2", store=versioned("tableB")), plus, grace=MINUTES_5 + 60_000)
    inherited = b.table("topic3", store=versioned("V-grace", 0)).filter(lambda k, v: True)
    with pytest.raises(TopologyError, match="History retention must be at least grace period"):
        b.stream("topic4").join(inherited, plus, grace=6)


def test_suppress_refuses_versioned_tables() -> None:
    b = ks.StreamsBuilder()
    table = b.table("t", store=versioned()).map_values(str.upper)
    with pytest.raises(TopologyError, match=r"only supported for non-versioned KTables"):
        table.suppress(ks.until_time_limit(10))


def test_grace_applies_to_stream_table_joins_only() -> None:
    b = ks.StreamsBuilder()
    with pytest.raises(TypeError, match="grace"):
        b.stream("a").join(b.stream("b"), plus, ks.JoinWindows.of(10), grace=5)


def test_to_table_with_a_versioned_store(drivers) -> None:
    b = ks.StreamsBuilder()
    table = b.stream("s").to_table(store=versioned("latest"))
    assert table.versioned and table.queryable_store_name() == "latest"
    b.stream("q").join(table, plus).to("out")
    driver = drive(drivers, b)
    s, q = driver.create_input_topic("s"), driver.create_input_topic("q")
    s.pipe_input("k", "v9", timestamp=9)
    s.pipe_input("k", "v3", timestamp=3)
    q.pipe_input("k", "x", timestamp=4)
    assert records(driver) == [("k", "x+v3", 4)]


def test_describe_lists_the_versioned_store_and_the_buffer() -> None:
    b = ks.StreamsBuilder()
    table = b.table("t", store=versioned("prices"))
    b.stream("s").join(table, plus, grace=10).to("out")
    stores = b.build().store_builders
    assert "prices" in stores and any(name.endswith("-Buffer") for name in stores)


def test_versioned_stores_have_no_record_cache(drivers) -> None:
    """With the record cache on, a versioned table still forwards each update at once (Kafka: same outputs)."""
    b = ks.StreamsBuilder()
    b.table("t", store=versioned()).to_stream().to("out")
    driver = ks.TopologyTestDriver(b.build(), {"statestore_cache_max_bytes": 10 * 1024 * 1024})
    drivers.append(driver)
    t = driver.create_input_topic("t")
    t.pipe_input("a", "x", timestamp=10)
    t.pipe_input("a", "y", timestamp=5)
    t.pipe_input("a", "z", timestamp=12)
    assert records(driver) == [("a", "x", 10), ("a", "y", 5), ("a", "z", 12)]
