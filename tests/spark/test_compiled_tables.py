"""Tables and stream-table joins in the compiled backtest path (``kstream_nb.spark.compiled.tables``): the live
app vs ``engine="compiled"`` vs ``engine="replay"``, byte for byte per output partition, equal stores and
dropped-record counts, and a pandas recount straight from the inputs.

The inputs hold tombstones, null keys, out-of-order timestamps within a phase and keys updated between
orders, over 2 partitions. Live, they are fed in phases of one topic each, every phase starting later than
anything before it, so that the live task's order is the backtest's (lowest timestamp first across topics).
"""

from __future__ import annotations

import random
from functools import partial
from typing import Any

import pandas as pd
import pytest

import kstream_nb as ks
from kstream_nb.cluster.partitioner import default_partition
from kstream_nb.spark import backtest
from kstream_nb.spark.result import BacktestResult
from tests.spark.compiled_helpers import live_run, planner_verdict

USERS = ["ann", "bob", "cid", "dee", "eve"]
CITIES = ["oslo", "rome", "lima", "kyiv"]


def _versioned(name: str) -> Any:
    return ks.Stores.persistent_versioned_key_value_store(name, "1h")


@pytest.mark.parametrize(
    ("build", "config", "expected"),
    [
        (lambda b: b.stream("o").left_join(b.table("u"), ks.merge_joiner()).to("out"), {},
         "compiled: TableJoin -> Sink; Table"),
        (lambda b: b.table("u", store="s").to_stream().to("out"), {"statestore_cache_max_bytes": 1},
         "node 'KTABLE-SOURCE-0000000001': statestore_cache_max_bytes > 0"),
        (lambda b: b.table("u", store=_versioned("v")).to_stream().to("out"), {}, "a versioned table, KIP-914"),
        (lambda b: b.stream("o").join(b.table("u", store=_versioned("v")), ks.merge_joiner(), grace="1m").to("x"),
         {}, "a stream-table join with a grace period"),
        (lambda b: b.stream("o").join(b.global_table("g"), ks.merge_joiner(), key_selector=lambda k, v: k).to("x"),
         {}, "a join with a global table"),
        (lambda b: b.stream("o").left_join(b.table("u"), lambda o, u: o).to("out"), {},
         "a stream-table join with a lambda: opaque to Spark (ks.merge_joiner() compiles)"),
        (lambda b: (s := b.stream("o")).join(s.to_table(store="t"), ks.merge_joiner()).to("out"), {},
         "a join with a table made from its own input"),
        (lambda b: b.stream("o", value_serde="string").join(b.table("u"), ks.merge_joiner()).to("out"), {},
         "merge_joiner of values whose serde is StringSerde (JSON only)"),
        (lambda b: b.stream("o").merge(b.stream("p")).to("out"), {}, "merge of several streams"),
    ],
    ids=["left-join", "cache", "versioned", "grace", "global", "lambda", "own-input", "string", "merge"],
)  # fmt: skip
def test_the_planner_compiles_tables_and_joins_or_says_why_not(build: Any, config: Any, expected: str) -> None:
    assert expected in planner_verdict(build, **config)


def _live(url: str, topology: ks.Topology, phases: list[tuple[str, list[ks.Record]]], outputs: list[str],
          stores: list[str]) -> tuple[dict[str, list[Any]], dict[str, pd.DataFrame], int]:  # fmt: skip
    """The live app's outputs (raw bytes per partition), final stores and dropped-record count."""
    app = ks.KafkaStreams(topology, application_id="live", bootstrap_servers=url)
    produce = [
        partial(ks.produce, topic, records, bootstrap_servers=url, partitions=2) for topic, records in phases
    ]
    final, dropped = live_run(app, produce, stores)
    read = {t: ks.read_topic(t, bootstrap_servers=url, key_serde="bytes", value_serde="bytes") for t in outputs}
    return {t: _rows(frame) for t, frame in read.items()}, final, dropped


def _rows(frame: pd.DataFrame) -> list[tuple[Any, ...]]:
    """(partition, offset, timestamp, key bytes, value bytes) in partition and offset order."""
    frame = frame.sort_values(["partition", "offset"])
    return [(int(r.partition), int(r.offset), int(r.timestamp), r.key, r.value) for r in frame.itertuples()]


def _by_key(rows: list[tuple[Any, ...]]) -> tuple[dict[int, list[Any]], list[Any]]:
    """Rows with a key per partition in offset order, and the rows without one (a null key's partition is
    the producer's round robin, which the backtest (both engines) does not replay as live picks it)."""
    keyed: dict[int, list[Any]] = {}
    for partition, _, ts, key, value in rows:
        if key is not None:
            keyed.setdefault(partition, []).append((ts, key, value))
    return keyed, sorted((ts, value) for _, _, ts, key, value in rows if key is None)


def _outputs(result: BacktestResult, topic: str) -> list[tuple[Any, ...]]:
    from pyspark.sql import functions as F

    columns = ("partition", "offset", F.unix_millis("timestamp"), "key_bytes", "value_bytes")
    return sorted(tuple(r) for r in result.outputs[topic].df.select(*columns).collect())


def _store(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.sort_values("key", key=lambda s: s.astype(str)).reset_index(drop=True)


def _engines(spark: Any, url: str, topology: ks.Topology, live: dict[str, list[Any]], stores: dict[str, Any],
             dropped: int) -> BacktestResult:  # fmt: skip
    """The compiled and the replayed backtests, each equal to the live run; the compiled result."""
    compiled = backtest(topology, spark, bootstrap_servers=url, engine="compiled")
    replay = backtest(topology, spark, bootstrap_servers=url, engine="replay")
    assert [p.engine for p in compiled.paths] == ["compiled"], compiled.explain()
    for topic, rows in live.items():
        assert _outputs(compiled, topic) == _outputs(replay, topic), topic
        for result in (compiled, replay):
            assert _by_key(_outputs(result, topic)) == _by_key(rows), topic
        for name, frame in stores.items():
            pd.testing.assert_frame_equal(
                _store(result.stores[name].to_pandas()), _store(frame), check_dtype=False
            )
        assert result.dropped == dropped
    pd.testing.assert_frame_equal(compiled.tasks, replay.tasks)
    return compiled


def _users(rng: random.Random, n: int, t0: int) -> list[ks.Record]:
    """Users rows from ``t0`` on, out of order: every 7th a tombstone, every 9th without a key."""
    out = []
    for i in range(n):
        key = None if i % 9 == 4 else rng.choice(USERS)
        value = None if i % 7 == 2 else {"city": rng.choice(CITIES), "src": "crm", "age": rng.randint(18, 70)}
        out.append(ks.Record(key, value, t0 + rng.randint(0, 50)))
    return out


def test_a_table_its_updates_and_its_store(spark: Any, url: str) -> None:
    rng = random.Random(5)
    records = _users(rng, 60, 1_000)
    for topic in ("users", "changes", "older"):
        ks.produce(topic, [], bootstrap_servers=url, partitions=2)
    b = ks.StreamsBuilder()
    changes = b.table("users", store="users-store").to_stream()
    changes.to("changes")
    changes[changes["age"] > 40].to("older")
    topology = b.build()
    live, stores, dropped = _live(url, topology, [("users", records)], ["changes", "older"], ["users-store"])
    compiled = _engines(spark, url, topology, live, stores, dropped)

    # the recount: every update with a key, in order; the store holds each key's last row unless deleted
    keyed = [r for r in records if r.key is not None]
    assert dropped == len(records) - len(keyed)
    got = compiled.outputs["changes"].to_pandas().sort_values(["partition", "offset"])
    per_partition = {p: [(r.key, r.value, r.timestamp) for r in keyed if default_partition(r.key.encode(), 2) == p]
                     for p in (0, 1)}  # fmt: skip
    for p, rows in got.groupby("partition"):
        assert [(r.key, r.value, r.timestamp) for r in rows.itertuples()] == per_partition[p]
    last = pd.DataFrame([{"key": r.key, "value": r.value} for r in keyed]).groupby("key").nth(-1)
    expected = {k: v for k, v in zip(last["key"], last["value"]) if v is not None}
    table = compiled.stores["users-store"].to_pandas()
    assert dict(zip(table["key"], table["value"])) == expected
    older = compiled.outputs["older"].to_pandas()
    assert sorted(older["value"].map(lambda v: v["age"])) == sorted(
        r.value["age"] for r in keyed if r.value is not None and r.value["age"] > 40
    )


def test_orders_joined_with_users_then_counted_per_user(spark: Any, url: str) -> None:
    rng = random.Random(11)
    phases: list[tuple[str, list[ks.Record]]] = []
    for i in range(6):
        t0 = 1_000 * (i + 1)
        if i % 2 == 0:
            phases.append(("users", _users(rng, 12, t0)))
            continue
        orders = []
        for j in range(25):
            key = None if j % 11 == 6 else rng.choice(USERS)
            value = None if j % 8 == 5 else {"amount": rng.randint(1, 9), "src": "shop", "item": f"i{j % 4}"}
            orders.append(ks.Record(key, value, t0 + rng.randint(0, 50)))
        phases.append(("orders", orders))
    for topic in ("users", "orders", "enriched", "matched", "per-user-out"):
        ks.produce(topic, [], bootstrap_servers=url, partitions=2)
    b = ks.StreamsBuilder()
    users = b.table("users", store="users-store")
    orders = b.stream("orders")
    enriched = orders.left_join(users, ks.merge_joiner())
    enriched.to("enriched")
    enriched.group_by_key().agg(
        n=("amount", "count"), total=("amount", "sum"), city=("city", "last"), store="per-user"
    ).to_stream().to("per-user-out")
    big = orders[orders["amount"] > 2].join(users, ks.merge_joiner(suffixes=("", "_user")))
    big.assign(double=big["amount"] * 2)[["amount", "double", "city", "src", "src_user"]].to("matched")
    topology = b.build()
    outputs = ["enriched", "matched", "per-user-out"]
    live, stores, dropped = _live(url, topology, phases, outputs, ["users-store", "per-user"])
    compiled = _engines(spark, url, topology, live, stores, dropped)

    # the recount: each order joins the latest users row of its key from the phases before its own
    rows = [(i, topic, r) for i, (topic, records) in enumerate(phases) for r in records]
    users_rows = pd.DataFrame(
        [
            {"phase": i, "key": r.key, "row": r.value}
            for i, topic, r in rows
            if topic == "users" and r.key is not None
        ]
    )
    left, inner, dropped_orders = [], [], 0
    for i, topic, r in rows:
        if topic != "orders":
            continue
        if r.value is None:
            dropped_orders += 1  # at the left join (the filter before the inner join drops it uncounted)
            continue
        before = users_rows[(users_rows["key"] == r.key) & (users_rows["phase"] < i)]
        row = before["row"].iloc[-1] if len(before) else None
        merged = dict(r.value)  # pandas merge's columns: the order's, then the user's ("_right" on a clash)
        merged.update({(k + "_right" if k in r.value else k): v for k, v in (row or {}).items()})
        left.append((r.key, merged, r.timestamp))
        if r.key is None:
            dropped_orders += 1 + (r.value["amount"] > 2)  # the aggregation's, and the inner join's
        elif row is not None and r.value["amount"] > 2:
            inner.append((r.key, r.value["amount"], row["city"], row["src"], r.timestamp))
    null_users = sum(1 for i, topic, r in rows if topic == "users" and r.key is None)
    assert dropped == dropped_orders + null_users

    def got(topic: str) -> list[tuple[Any, Any, int]]:
        frame = compiled.outputs[topic].to_pandas()
        return sorted(((r.key, r.value, r.timestamp) for r in frame.itertuples()), key=repr)

    assert got("enriched") == sorted(left, key=repr)
    assert sorted(inner, key=repr) == sorted(
        ((k, v["amount"], v["city"], v["src_user"], ts) for k, v, ts in got("matched")), key=repr
    )
    assert all(v["double"] == 2 * v["amount"] and v["src"] == "shop" for _, v, _ in got("matched"))
    per_user = pd.DataFrame([{"key": k, "amount": v["amount"], "city": v.get("city")} for k, v, _ in left if k])
    final = compiled.stores["per-user"].to_pandas().set_index("key")["value"].to_dict()
    assert set(final) == set(per_user["key"])
    for user, group in per_user.groupby("key"):
        cities = group["city"].dropna()
        assert final[user] == {
            "n": len(group), "total": int(group["amount"].sum()), "city": cities.iloc[-1] if len(cities) else None
        }  # fmt: skip


def test_topics_interleaved_with_timestamp_ties(spark: Any, url: str) -> None:
    """Users and orders written at once, interleaved and tied in time (on a tie the task takes "orders", its
    first topic by name, first): compiled equals the replay (the live task would pick among what it has
    fetched); a materialized copy of the table, assignments before a join, a count after one."""
    rng = random.Random(3)
    users = _users(rng, 40, 1_000)
    orders = [
        ks.Record(None if i % 9 == 1 else rng.choice(USERS),
                  None if i % 10 == 3 else {"amount": rng.randint(1, 9)}, 1_000 + rng.randint(0, 50))
        for i in range(60)
    ]  # fmt: skip
    ks.produce("users", users, bootstrap_servers=url, partitions=2)
    ks.produce("orders", orders, bootstrap_servers=url, partitions=2)
    for topic in ("copies", "scaled", "counts"):
        ks.produce(topic, [], bootstrap_servers=url, partitions=2)
    b = ks.StreamsBuilder()
    table = b.table("users")
    table.materialize("copy").to_stream().to("copies")
    o = b.stream("orders")
    o.assign(x=o["amount"] * 3)[["x", "amount"]].join(table, ks.merge_joiner(("_o", "_u"))).to("scaled")
    o.join(table, ks.merge_joiner()).group_by_key().count(store="counts").to_stream().to("counts")
    topology = b.build()
    compiled = backtest(topology, spark, bootstrap_servers=url, engine="compiled")
    replay = backtest(topology, spark, bootstrap_servers=url, engine="replay")
    assert [p.engine for p in compiled.paths] == ["compiled"], compiled.explain()
    for topic in ("copies", "scaled", "counts"):
        assert _outputs(compiled, topic) == _outputs(replay, topic), topic
    for name in ("copy", "counts"):
        pd.testing.assert_frame_equal(compiled.stores[name].to_pandas(), replay.stores[name].to_pandas())
    pd.testing.assert_frame_equal(compiled.tasks, replay.tasks)
    assert compiled.dropped == replay.dropped
    # each order's count is the running count of its user's joined orders: the last one is the total
    scaled = compiled.outputs["scaled"].to_pandas()
    assert all(v["x"] == 3 * v["amount"] and "city" in v for v in scaled["value"])
    counts = compiled.stores["counts"].to_pandas().set_index("key")["value"].to_dict()
    assert counts == scaled.groupby("key").size().to_dict()


def test_keys_matched_as_the_store_compares_them(spark: Any, url: str) -> None:
    """Keys written by other producers: ``"ann"`` quoted finds ``ann``, ``7.0`` finds ``7`` (one entry of the
    store's dict); a table whose one entry took ``1`` then ``1.0`` (the dict keeps the first key object)
    replays, named."""

    def produce(topic: str, rows: list[tuple[bytes, Any]], t0: int) -> None:
        records = [ks.Record(k, v, t0 + i) for i, (k, v) in enumerate(rows)]
        ks.produce(topic, records, bootstrap_servers=url, key_serde="bytes")

    produce("people", [(b'"ann"', {"city": "oslo"}), (b"7", {"city": "rome"}), (b"8", {"city": "lima"})], 1)
    produce("buys", [(b"ann", {"amount": 1}), (b"7.0", {"amount": 2}), (b"8", None), (b"9", {"amount": 3})], 10)
    ks.produce("bought", [], bootstrap_servers=url)
    b = ks.StreamsBuilder()
    b.stream("buys").left_join(b.table("people", store="people"), ks.merge_joiner()).to("bought")
    topology = b.build()
    compiled = backtest(topology, spark, bootstrap_servers=url, engine="compiled")
    replay = backtest(topology, spark, bootstrap_servers=url, engine="replay")
    assert _outputs(compiled, "bought") == _outputs(replay, "bought")
    pd.testing.assert_frame_equal(compiled.stores["people"].to_pandas(), replay.stores["people"].to_pandas())
    got = compiled.outputs["bought"].to_pandas()
    assert list(zip(got["key"], got["value"])) == [
        ("ann", {"amount": 1, "city": "oslo"}), (7.0, {"amount": 2, "city": "rome"}), (9, {"amount": 3}),
    ]  # fmt: skip
    assert compiled.dropped == 1  # the null value

    produce("people", [(b"1", {"city": "kyiv"}), (b"1.0", {"city": "oslo"})], 20)
    auto = backtest(topology, spark, bootstrap_servers=url)
    assert "keys of one entry read as different values" in auto.explain()
    stored = auto.stores["people"].to_pandas()
    assert stored["key"].map(repr).tolist().count("1") == 1
