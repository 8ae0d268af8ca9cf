"""Parity: a backtest on Spark over a topic's history gives what the live run gave over the same records.

Each test runs the topology live (``KafkaStreams`` on ``memory://``) feeding the inputs in phases and
waiting until idle after each, then backtests the same topology over the topics' history and compares
every output partition record by record (key, value, timestamp, in offset order) and the final stores.

Why phases: the backtest processes a task's records lowest timestamp first across its partitions with
everything available; live, a task only picks among the records it has fetched. Feeding the inputs in
timestamp order, each phase processed before the next is written, makes the live order the backtest's.
And an output partition is written by one task in these topologies (its key picks the same partition
number as the task's), so its order does not depend on how threads interleave.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pandas as pd

import kstream_nb as ks
from kstream_nb.examples import seed_orders
from kstream_nb.spark import backtest


def _live(
    topology: ks.Topology, url: str, phases: list[Callable[[], None]], outputs: list[str], stores: list[str],
    threads: int = 1,
) -> tuple[dict[str, pd.DataFrame], dict[str, pd.DataFrame], int]:  # fmt: skip
    app = ks.KafkaStreams(topology, application_id="live", bootstrap_servers=url, num_stream_threads=threads)
    try:
        app.start().wait_until_running()
        for phase in phases:
            phase()
            app.wait_until_idle(timeout=60)
        final = {name: app.store(name).to_pandas() for name in stores}
        dropped = int(app.metrics()["dropped-records-total"])
    finally:
        app.stop()
    return {t: ks.read_topic(t, bootstrap_servers=url) for t in outputs}, final, dropped


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


def test_word_count(spark: Any, url: str) -> None:
    b = ks.StreamsBuilder()
    (
        b.stream("sentences")
        .flat_map_values(str.split)
        .group_by(lambda k, word: word)
        .count(store="word-counts-store")
        .to_stream()
        .to("word-counts")
    )
    topology = b.build()
    ks.produce("sentences", [], bootstrap_servers=url, partitions=3)
    ks.produce("word-counts", [], bootstrap_servers=url, partitions=3)
    words = ["kafka", "spark", "stream", "table", "join", "window", "task", "topic"]
    sentences = [" ".join(words[(i * j) % 8] for j in range(1, 2 + i % 5)) for i in range(16)]

    def phase(i: int) -> Callable[[], None]:
        return lambda: ks.produce(
            "sentences", [(f"speaker-{i % 5}", sentences[i])], bootstrap_servers=url, timestamps=[1_000 * (i + 1)]
        )

    live, stores, _ = _live(topology, url, [phase(i) for i in range(len(sentences))], ["word-counts"],
                            ["word-counts-store"])  # fmt: skip
    result = backtest(topology, spark, bootstrap_servers=url)
    got = result.outputs["word-counts"].to_pandas()
    assert len(got) == sum(len(s.split()) for s in sentences)
    assert _per_partition(got) == _per_partition(live["word-counts"])
    _same_stores(result.stores["word-counts-store"].to_pandas(), stores["word-counts-store"])
    assert result.partition_counts["backtest-word-counts-store-repartition"] == 3


def test_windowed_aggregation_with_late_records(spark: Any, url: str) -> None:
    b = ks.StreamsBuilder()
    (
        b.stream("clicks")
        .group_by_key()
        .windowed_by(ks.TimeWindows.of("10s").grace("5s"))
        .count(store="clicks-per-10s")
        .to_stream()
        .map(lambda w, n: (w.key, {"start": w.start, "count": n}))
        .to("click-counts")
    )
    topology = b.build()
    ks.produce("click-counts", [], bootstrap_servers=url, partitions=2)
    # stream time reaches 31s; records at 3s and 12s then arrive late: 3s is past 0-10s's grace (dropped),
    # 12s (window 10-20s, open until 25s) is dropped too at stream time 31s; 28s lands in an open window
    times = [1_000, 2_000, 9_500, 11_000, 14_000, 21_000, 31_000, 3_000, 12_000, 28_000, 29_500, 45_000, 33_000]
    users = ["ann", "bob", "cid", "dee"]
    records = [ks.Record(users[i % 4], {"n": i}, t) for i, t in enumerate(times * 2)]

    live, stores, dropped = _live(
        topology, url, [lambda: ks.produce("clicks", records, bootstrap_servers=url, partitions=2)],
        ["click-counts"], ["clicks-per-10s"],
    )  # fmt: skip
    assert dropped > 0
    result = backtest(topology, spark, bootstrap_servers=url)
    assert result.dropped == dropped
    assert _per_partition(result.outputs["click-counts"].to_pandas()) == _per_partition(live["click-counts"])
    _same_stores(result.stores["clicks-per-10s"].to_pandas(), stores["clicks-per-10s"])


def test_stream_table_join(spark: Any, url: str) -> None:
    b = ks.StreamsBuilder()
    users = b.table("users", store="users-store")
    (
        b.stream("clicks")
        .left_join(users, lambda click, user: {**click, "city": user and user["city"]})
        .to("enriched-clicks")
    )
    topology = b.build()
    ks.produce("enriched-clicks", [], bootstrap_servers=url, partitions=2)
    names = [f"user-{i}" for i in range(6)]

    def users_at(ts: int, city: str) -> Callable[[], None]:
        return lambda: ks.produce(
            "users", [ks.Record(n, {"city": f"{city}-{i}"}, ts + i) for i, n in enumerate(names[:5])],
            bootstrap_servers=url, partitions=2,
        )  # fmt: skip

    def clicks_at(ts: int) -> Callable[[], None]:
        return lambda: ks.produce(
            "clicks", [ks.Record(names[i % 6], {"page": i}, ts + 10 * i) for i in range(12)],
            bootstrap_servers=url, partitions=2,
        )  # fmt: skip

    phases = [users_at(0, "paris"), clicks_at(1_000), users_at(2_000, "rome"), clicks_at(3_000)]
    live, stores, _ = _live(topology, url, phases, ["enriched-clicks"], ["users-store"])
    result = backtest(topology, spark, bootstrap_servers=url)
    got = result.outputs["enriched-clicks"].to_pandas()
    assert len(got) == 24
    assert _per_partition(got) == _per_partition(live["enriched-clicks"])
    assert {v["city"] for v in got["value"]} == {None, *(f"{c}-{i}" for c in ("paris", "rome") for i in range(5))}
    _same_stores(result.stores["users-store"].to_pandas(), stores["users-store"])


def test_seed_orders_example(spark: Any, url: str) -> None:
    """Seed 000: orders join users, repartition by item into 6 partitions, join items, count per hour.

    The counting task reads one partition of a repartition topic written by the six join tasks, which
    two stream threads run at their own pace: the order in which that partition receives their records
    (and so the sequence of intermediate counts) depends on thread timing live. The final counts per hour
    cannot depend on it (the grace of one day keeps every record), so they are what is compared, with
    the final window store and with pandas' independent answer.
    """
    data = seed_orders.generate(seed=0, orders=600)
    topology = seed_orders.build_topology()
    orders = data["orders"]
    columns = ["key", "user", "item", "ts", "quantity"]
    phases = [
        lambda: seed_orders.produce_inputs(data, url),
        lambda: ks.produce("orders", orders[columns], bootstrap_servers=url, partitions=3,
                           timestamps=orders["ts"].tolist()),
    ]  # fmt: skip
    live, stores, _ = _live(topology, url, phases, ["matches-per-hour"], ["matches-per-hour"], threads=2)

    def final(frame: pd.DataFrame) -> dict[int, int]:
        last = frame.sort_values(["partition", "offset"]).groupby("key")["value"].last()
        return {int(k): int(v) for k, v in last.items()}

    result = backtest(topology, spark, bootstrap_servers=url, application_id="seed-orders")
    got = result.outputs["matches-per-hour"].to_pandas()
    expected = seed_orders.expected_counts(data)
    assert final(got) == final(live["matches-per-hour"]) == expected
    _same_stores(result.stores["matches-per-hour"].to_pandas(), stores["matches-per-hour"])
    assert result.partition_counts["seed-orders-orderuser-by-item-repartition"] == 6
    # tasks that got records: orders x users (3), the item joins (6), and the count: one of its 6 tasks,
    # since every record is keyed "all" (a task without records has nothing to do)
    assert len(result.tasks) == 3 + 6 + 1
