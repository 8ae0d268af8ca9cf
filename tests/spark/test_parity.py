"""Parity: a backtest on Spark over a topic's history gives what the live run gave over the same records.

Each test runs twice (the ``cluster`` fixture): on the embedded ``memory://`` cluster and on a real
Apache Kafka broker. It runs the topology live (``KafkaStreams``) feeding the inputs in phases
and waiting until idle after each, then backtests the same topology over the topics' history read from
that cluster and compares every output partition record by record (key, value, timestamp, in offset
order) and the final stores.

Why phases: the backtest processes a task's records lowest timestamp first across its partitions with
everything available; live, a task only picks among the records it has fetched. Feeding the inputs in
timestamp order, each phase processed before the next is written, makes the live order the backtest's.
And an output partition is written by one task in these topologies (its key picks the same partition
number as the task's), so its order does not depend on how threads interleave.

Timestamps start at 1, not 0: librdkafka turns a produce timestamp of 0 into "now".

Where a topology has sub-topologies the compiled engine translates (``kstream_nb.spark.compiled``), the
test backtests it with each engine against the same live run ("auto" compiles what compiles, "replay" runs
every task's ``StreamTask``), and checks an independent recount too: live and replay share ``StreamTask``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pandas as pd

import kstream_nb as ks
from kstream_nb.examples import seed_orders
from kstream_nb.spark import backtest
from kstream_nb.spark.result import BacktestResult
from tests.spark.clusters import Cluster
from tests.spark.compiled_helpers import live_run


def _live(
    cluster: Cluster, topology: ks.Topology, phases: list[Callable[[], None]], outputs: list[str],
    stores: list[str], threads: int = 1,
) -> tuple[dict[str, pd.DataFrame], dict[str, pd.DataFrame], int]:  # fmt: skip
    final, dropped = live_run(cluster.app(topology, threads), phases, stores)
    return {t: cluster.read(t) for t in outputs}, final, dropped


def _backtest(
    spark: Any, cluster: Cluster, topology: ks.Topology, application_id: str = "backtest", engine: str = "replay"
) -> BacktestResult:
    return backtest(
        topology, spark, bootstrap_servers=cluster.bootstrap, application_id=application_id,
        client_config=cluster.client_config or None, engine=engine,
    )  # fmt: skip


def _per_partition(frame: pd.DataFrame) -> dict[int, list[tuple[Any, Any, int]]]:
    frame = frame.sort_values(["partition", "offset"])
    return {
        int(p): [(r.key, r.value, int(r.timestamp)) for r in rows.itertuples()]
        for p, rows in frame.groupby("partition")
    }


def _same_stores(backtested: pd.DataFrame, live: pd.DataFrame) -> None:
    key = [c for c in ("key", "start") if c in live.columns]
    a = backtested.sort_values(key, key=lambda s: s.astype(str)).reset_index(drop=True)
    b = live.sort_values(key, key=lambda s: s.astype(str)).reset_index(drop=True)
    pd.testing.assert_frame_equal(a, b, check_dtype=False)


def test_word_count(spark: Any, cluster: Cluster) -> None:
    source, sink = cluster.name("sentences"), cluster.name("word-counts")
    b = ks.StreamsBuilder()
    (
        b.stream(source)
        .flat_map_values(str.split)
        .group_by(lambda k, word: word)
        .count(store="word-counts-store")
        .to_stream()
        .to(sink)
    )
    topology = b.build()
    cluster.produce(source, [], partitions=3)
    cluster.produce(sink, [], partitions=3)
    words = ["kafka", "spark", "stream", "table", "join", "window", "task", "topic"]
    sentences = [" ".join(words[(i * j) % 8] for j in range(1, 2 + i % 5)) for i in range(16)]

    def phase(i: int) -> Callable[[], None]:
        return lambda: cluster.produce(source, [(f"speaker-{i % 5}", sentences[i])], timestamps=[1_000 * (i + 1)])

    phases = [phase(i) for i in range(len(sentences))]
    live, stores, _ = _live(cluster, topology, phases, [sink], ["word-counts-store"])
    recount = pd.Series([w for s in sentences for w in s.split()]).value_counts().to_dict()
    for engine in ("auto", "replay"):  # auto: the count compiles, over what three replayed tasks wrote
        result = _backtest(spark, cluster, topology, engine=engine)
        assert [p.engine for p in result.paths] == (["replay", "compiled"] if engine == "auto" else ["replay"] * 2)
        got = result.outputs[sink].to_pandas()
        assert len(got) == sum(len(s.split()) for s in sentences)
        assert _per_partition(got) == _per_partition(live[sink])
        _same_stores(result.stores["word-counts-store"].to_pandas(), stores["word-counts-store"])
        assert got.groupby("key")["value"].max().to_dict() == recount
        assert result.partition_counts["backtest-word-counts-store-repartition"] == 3


def test_windowed_aggregation_with_late_records(spark: Any, cluster: Cluster) -> None:
    source, sink = cluster.name("clicks"), cluster.name("click-counts")
    b = ks.StreamsBuilder()
    (
        b.stream(source)
        .group_by_key()
        .windowed_by(ks.TimeWindows.of("10s").grace("5s"))
        .count(store="clicks-per-10s")
        .to_stream()
        .map(lambda w, n: (w.key, {"start": w.start, "count": n}))
        .to(sink)
    )
    topology = b.build()
    cluster.produce(source, [], partitions=2)
    cluster.produce(sink, [], partitions=2)
    # stream time reaches 31s; records at 3s and 12s then arrive late: 3s is past 0-10s's grace (dropped),
    # 12s (window 10-20s, open until 25s) is dropped too at stream time 31s; 28s lands in an open window
    times = [1_000, 2_000, 9_500, 11_000, 14_000, 21_000, 31_000, 3_000, 12_000, 28_000, 29_500, 45_000, 33_000]
    users = ["ann", "bob", "cid", "dee"]
    records = [ks.Record(users[i % 4], {"n": i}, t) for i, t in enumerate(times * 2)]

    live, stores, dropped = _live(
        cluster, topology, [lambda: cluster.produce(source, records, partitions=2)], [sink], ["clicks-per-10s"]
    )
    assert dropped > 0
    result = _backtest(spark, cluster, topology)
    assert result.dropped == dropped
    assert _per_partition(result.outputs[sink].to_pandas()) == _per_partition(live[sink])
    _same_stores(result.stores["clicks-per-10s"].to_pandas(), stores["clicks-per-10s"])


def test_stream_table_join(spark: Any, cluster: Cluster) -> None:
    table, source, sink = cluster.name("users"), cluster.name("clicks"), cluster.name("enriched-clicks")
    b = ks.StreamsBuilder()
    users = b.table(table, store="users-store")
    b.stream(source).left_join(users, lambda click, user: {**click, "city": user and user["city"]}).to(sink)
    topology = b.build()
    for topic in (table, source, sink):
        cluster.produce(topic, [], partitions=2)
    names = [f"user-{i}" for i in range(6)]

    def users_at(ts: int, city: str) -> Callable[[], None]:
        return lambda: cluster.produce(
            table, [ks.Record(n, {"city": f"{city}-{i}"}, ts + i) for i, n in enumerate(names[:5])], partitions=2
        )

    def clicks_at(ts: int) -> Callable[[], None]:
        return lambda: cluster.produce(
            source, [ks.Record(names[i % 6], {"page": i}, ts + 10 * i) for i in range(12)], partitions=2
        )

    phases = [users_at(1, "paris"), clicks_at(1_000), users_at(2_000, "rome"), clicks_at(3_000)]
    live, stores, _ = _live(cluster, topology, phases, [sink], ["users-store"])
    result = _backtest(spark, cluster, topology)
    got = result.outputs[sink].to_pandas()
    assert len(got) == 24
    assert _per_partition(got) == _per_partition(live[sink])
    assert {v["city"] for v in got["value"]} == {None, *(f"{c}-{i}" for c in ("paris", "rome") for i in range(5))}
    _same_stores(result.stores["users-store"].to_pandas(), stores["users-store"])


def test_seed_orders_example(spark: Any, cluster: Cluster) -> None:
    """Seed 000: orders join users, repartition by item into 6 partitions, join items, count per hour.

    The counting task reads one partition of a repartition topic written by the six join tasks, which
    two stream threads run at their own pace: the order in which that partition receives their records
    (and so the sequence of intermediate counts) depends on thread timing live. The final counts per hour
    cannot depend on it (the grace of one day keeps every record), so they are what is compared, with
    the final window store and with pandas' independent answer. (The example's topic names are fixed:
    one test of the session uses them on the shared broker.)
    """
    data = seed_orders.generate(seed=0, orders=600)
    topology = seed_orders.build_topology()
    orders = data["orders"]
    items = data["items"].copy()
    items["partition"] = [seed_orders.item_partitioner(k, None, 6) for k in items["key"]]

    cluster.produce("orders", [], partitions=3)

    def tables() -> None:  # as seed_orders.produce_inputs, from timestamp 1
        cluster.produce("users", data["users"], partitions=3, timestamps=1)
        cluster.produce("items", items, partitions=6, timestamps=1)

    columns = ["key", "user", "item", "ts", "quantity"]
    phases = [
        tables,
        lambda: cluster.produce("orders", orders[columns], partitions=3, timestamps=orders["ts"].tolist()),
    ]
    live, stores, _ = _live(cluster, topology, phases, ["matches-per-hour"], ["matches-per-hour"], threads=2)

    def final(frame: pd.DataFrame) -> dict[int, int]:
        last = frame.sort_values(["partition", "offset"]).groupby("key")["value"].last()
        return {int(k): int(v) for k, v in last.items()}

    result = _backtest(spark, cluster, topology, application_id="seed-orders")
    got = result.outputs["matches-per-hour"].to_pandas()
    expected = seed_orders.expected_counts(data)
    assert final(got) == final(live["matches-per-hour"]) == expected
    _same_stores(result.stores["matches-per-hour"].to_pandas(), stores["matches-per-hour"])
    assert result.partition_counts["seed-orders-orderuser-by-item-repartition"] == 6
    # tasks that got records: orders x users (3), the item joins (6), and the count: one of its 6 tasks,
    # since every record is keyed "all" (a task without records has nothing to do)
    assert len(result.tasks) == 3 + 6 + 1


def test_foreign_key_join(spark: Any, cluster: Cluster) -> None:
    """Orders (a table keyed by order id) join the customer their ``customer`` field names (a foreign key).

    The join's two sub-topologies feed each other (subscriptions to the customers' partitions, responses
    back to the orders'), so the backtest runs them to a fixpoint. Compared with the live run: each order's
    sequence of join results (values and timestamps, in offset order, in the same partition), the count per
    partition, and the final result table. Not compared: the interleaving of different orders within a
    partition. Responses reach an order's partition from the two customer tasks; live, the partition gets
    them in the order the stream thread ran those tasks (task by task, each a batch at a time), while the
    backtest merges the two writers lowest timestamp first: the same records, a different interleaving.
    """
    orders_topic, customers_topic = cluster.name("orders"), cluster.name("customers")
    sink = cluster.name("enriched")
    b = ks.StreamsBuilder()
    orders = b.table(orders_topic, store="orders-store")
    customers = b.table(customers_topic, store="customers-store")
    enriched = orders.join(
        customers,
        lambda order, customer: {**order, "tier": customer["tier"]},
        store="enriched-store",
        foreign_key_extractor=lambda order: order["customer"],
    )
    enriched.to_stream().to(sink)
    topology = b.build()
    for topic, partitions in ((orders_topic, 3), (customers_topic, 2), (sink, 3)):
        cluster.produce(topic, [], partitions=partitions)  # the source topics exist before the app starts
    tiers = {"alice": "gold", "dana": "silver", "chen": "bronze", "emma": "gold"}  # partitions 0, 1, 0, 1
    names = list(tiers)

    def customers_at(rows: list[tuple[str, Any]], ts: int) -> Callable[[], None]:
        records = [ks.Record(c, tier and {"tier": tier}, ts + i) for i, (c, tier) in enumerate(rows)]
        return lambda: cluster.produce(customers_topic, records, partitions=2)

    def orders_at(rows: list[tuple[str, Any]], ts: int) -> Callable[[], None]:
        records = [ks.Record(o, value, ts + 10 * i) for i, (o, value) in enumerate(rows)]
        return lambda: cluster.produce(orders_topic, records, partitions=3)

    first_orders = [
        (f"o{i}", {"customer": names[i % 4] if i != 9 else "gita", "amount": 10 * i}) for i in range(10)
    ]
    changed_orders = [
        ("o3", {"customer": "alice", "amount": 30}),
        ("o5", None),
        ("o7", {"customer": "emma", "amount": 77}),
    ]
    phases = [
        customers_at(list(tiers.items()), 1),
        orders_at(first_orders, 1_000),  # o9 names gita, who does not exist yet: no result (inner join)
        customers_at([("dana", "platinum"), ("chen", "gold")], 2_000),  # every order of dana and chen again
        orders_at(changed_orders, 3_000),  # o3 moves to alice, o5 is deleted, o7 changes its amount
        customers_at([("alice", None), ("gita", "silver")], 4_000),  # alice's orders lose their row, o9 joins
    ]
    live, stores, _ = _live(cluster, topology, phases, [sink], ["enriched-store"])
    result = _backtest(spark, cluster, topology)
    got = result.outputs[sink].to_pandas()

    def per_order(frame: pd.DataFrame) -> dict[str, tuple[tuple[int, ...], list[tuple[Any, int]]]]:
        frame = frame.sort_values(["partition", "offset"])
        return {
            str(key): (tuple(rows["partition"].unique().tolist()), list(zip(rows["value"], rows["timestamp"])))
            for key, rows in frame.groupby("key")
        }

    assert per_order(got) == per_order(live[sink])
    assert got.groupby("partition").size().to_dict() == live[sink].groupby("partition").size().to_dict()
    assert per_order(got)["o9"][1] == [({"amount": 90, "customer": "gita", "tier": "silver"}, 4_001)]
    assert per_order(got)["o5"][1][-1] == (None, 3_010)
    final = result.stores["enriched-store"].to_pandas()
    _same_stores(final, stores["enriched-store"])
    # alice was deleted: o0, o3 (moved to alice), o4 and o8 have no row any more; o5 was deleted
    assert dict(zip(final["key"], final["value"])) == {
        "o1": {"customer": "dana", "amount": 10, "tier": "platinum"},
        "o2": {"customer": "chen", "amount": 20, "tier": "gold"},
        "o6": {"customer": "chen", "amount": 60, "tier": "gold"},
        "o7": {"customer": "emma", "amount": 77, "tier": "gold"},
        "o9": {"customer": "gita", "amount": 90, "tier": "silver"},
    }
    assert len(result.tasks) == 3 + 2  # the orders side's tasks and the customers side's, last run of each


def _late_drops(records: list[ks.Record], partitions: int, size: int, advance: int, grace: int) -> int:
    """The records dropped for closed windows, recounted as Kafka Streams documents it: per partition (a task)
    in offset order, a record is late for each of its windows that ends at or before its task's stream time
    (the max timestamp so far) minus the grace."""
    from kstream_nb.cluster.partitioner import default_partition

    dropped, stream_time = 0, dict.fromkeys(range(partitions), -1)
    for r in records:
        p = default_partition(r.key.encode(), partitions)
        stream_time[p] = max(stream_time[p], r.timestamp)
        start = max(0, r.timestamp - size + advance) // advance * advance
        dropped += sum(1 for s in range(start, r.timestamp + 1, advance) if s + size <= stream_time[p] - grace)
    return dropped


def test_column_expressions_and_windows(spark: Any, cluster: Cluster) -> None:
    """A topology the compiled engine translates whole: a filter, assign and projection; a named aggregation
    per user; hopping windows with grace (late records dropped per window); tumbling windows emitting final
    results. Both engines against the live run, the pandas recount and the exact dropped-record count."""
    source = cluster.name("trades")
    sinks = {name: cluster.name(name) for name in ("big", "per-user", "hopping", "final")}
    b = ks.StreamsBuilder()
    s = b.stream(source)
    s[s["qty"] >= 5].assign(notional=s["qty"] * s["price"])[["notional", "qty"]].to(sinks["big"])
    s.group_by_key().agg(
        n=("qty", "count"), qty=("qty", "sum"), avg=("price", "mean"), store="user-agg"
    ).to_stream().to(sinks["per-user"])
    hopping = ks.TimeWindows.of("10s").advance_by("5s").grace("3s")
    s.group_by_key().windowed_by(hopping).count(store="hopping-counts").to_stream().to(sinks["hopping"])
    final = ks.TimeWindows.of("20s").grace("2s")
    s.group_by_key().windowed_by(final).emit_strategy("on_window_close").agg(
        store="final-sums", qty=("qty", "sum")
    ).to_stream().to(sinks["final"])
    topology = b.build()
    cluster.produce(source, [], partitions=2)
    for sink in sinks.values():
        cluster.produce(sink, [], partitions=2)
    times = [1_000, 4_000, 9_500, 11_000, 14_000, 21_000, 31_000, 3_000, 12_000, 28_000, 29_500, 45_000, 33_000]
    users = ["ann", "bob", "cid", "dee", "eve"]
    records = [
        ks.Record(users[i % 5], {"qty": i % 9, "price": 0.25 * (i % 7) + 1}, t + 10 * i)
        for i, t in enumerate(times * 4)
    ]
    live, stores, dropped = _live(
        cluster, topology, [lambda: cluster.produce(source, records, partitions=2)], list(sinks.values()),
        ["user-agg", "hopping-counts", "final-sums"],
    )  # fmt: skip
    late = _late_drops(records, 2, 10_000, 5_000, 3_000) + _late_drops(records, 2, 20_000, 20_000, 2_000)
    assert dropped == late > 0
    for engine in ("compiled", "replay"):
        result = _backtest(spark, cluster, topology, engine=engine)
        assert result.dropped == dropped
        for sink in sinks.values():
            assert _per_partition(result.outputs[sink].to_pandas()) == _per_partition(live[sink]), (engine, sink)
        for name in ("user-agg", "hopping-counts", "final-sums"):
            _same_stores(result.stores[name].to_pandas(), stores[name])
        big = result.outputs[sinks["big"]].to_pandas()
        assert sorted(v["notional"] for v in big["value"]) == sorted(
            r.value["qty"] * r.value["price"] for r in records if r.value["qty"] >= 5
        )
        per_user = result.stores["user-agg"].to_pandas().set_index("key")["value"].to_dict()
        frame = pd.DataFrame([{"key": r.key, **r.value} for r in records])
        assert {k: (v["n"], v["qty"]) for k, v in per_user.items()} == {
            k: (len(rows), int(rows["qty"].sum())) for k, rows in frame.groupby("key")
        }
