"""``select_key``/``group_by`` by a field name or a column expression: the live run, the compiled backtest
(both sub-topologies, the re-keying one and the count after the repartition), the replay and a pandas
recount agree; and the pandas-style forms give what the equivalent lambda gives.

The input comes in runs of one original key (one upstream task each), produced phase by phase with
increasing timestamps, so that the live interleaving of the upstream tasks' writes to the repartition
topic and to the re-keyed sink is the backtest's (its merge by timestamp).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import orjson
import pandas as pd
import pytest

import kstream_nb as ks
from kstream_nb.cluster.partitioner import default_partition
from kstream_nb.errors import StreamsError
from kstream_nb.spark import backtest
from tests.spark.clusters import Cluster

USERS = ["ann", "Ann", "bob", "BOB", "cid", "12"]


def _runs(rng: random.Random, runs: int, size: int) -> list[list[ks.Record]]:
    """Runs of records of one original key; values with a missing ``user``, tombstones, ``n`` from 0 to 9."""
    out, ts = [], 1
    for r in range(runs):
        key = f"k{rng.randint(0, 5)}"
        run = []
        for i in range(size):
            ts += rng.randint(1, 3)
            value: dict[str, Any] | None = {"user": rng.choice(USERS), "n": rng.randint(0, 9)}
            if (r * size + i) % 9 == 4:
                value = None
            elif (r * size + i) % 7 == 2:
                del value["user"]
            run.append(ks.Record(key, value, ts))
        out.append(run)
    return out


def _pandas_key(case: str, values: pd.DataFrame) -> pd.Series:
    """The new key per record, computed by pandas (None where the live expression gives null)."""
    user = values["user"].where(values["user"].notna(), None)
    if case == "field":
        return user
    if case == "assigned":
        return user.str.upper().fillna("nobody")
    return (values["n"] % 3).astype("Int64").astype(object).where(values["n"].notna(), None)


CASES = ("field", "assigned", "int")


def _topology(t: dict[str, str]) -> ks.Topology:
    """One input re-keyed four ways: three counts (each after its repartition) and a re-keyed sink."""
    b = ks.StreamsBuilder()
    s = b.stream(t["events"])
    for case in CASES:
        if case == "field":
            grouped = s.group_by("user")
        elif case == "assigned":
            grouped = s.assign(u=s["user"].str.upper()).group_by(s["u"].fillna("nobody"))
        else:
            grouped = s.group_by(s["n"] % 3)
        grouped.count(store=f"per-key-{case}").to_stream().to(t[f"counts-{case}"])
    s[s["user"].notnull()].select_key(s["user"]).to(t["rekeyed"])
    return b.build()


def _per_partition(frame: pd.DataFrame) -> dict[int, list[tuple[Any, Any, int]]]:
    frame = frame.sort_values(["partition", "offset"])
    return {
        int(p): [(r.key, r.value, int(r.timestamp)) for r in rows.itertuples()]
        for p, rows in frame.groupby("partition")
    }


def test_group_by_a_column_compiles_as_the_live_run(spark: Any, url: str) -> None:
    cluster = Cluster("memory", url, {})
    t = {name: cluster.name(name) for name in ("events", "rekeyed", *(f"counts-{case}" for case in CASES))}
    cluster.produce(t["events"], [], partitions=3)
    cluster.produce(t["rekeyed"], [], partitions=2)
    for case in CASES:
        cluster.produce(t[f"counts-{case}"], [], partitions=3)
    runs = _runs(random.Random(27), 10, 6)
    topology = _topology(t)
    outputs = ["rekeyed", *(f"counts-{case}" for case in CASES)]

    app = cluster.app(topology)
    try:
        app.start().wait_until_running(60)
        for run in runs:
            cluster.produce(t["events"], run, partitions=3)
            app.wait_until_idle(timeout=60)
        live_stores = {case: app.store(f"per-key-{case}").to_pandas() for case in CASES}
        live_dropped = int(app.metrics()["dropped-records-total"])
    finally:
        app.stop()
    live = {name: cluster.read(t[name]) for name in outputs}

    records = [r for run in runs for r in run]
    values = pd.DataFrame([r.value or {} for r in records]).reindex(columns=["user", "n"])
    values["tombstone"] = [r.value is None for r in records]
    recounts, expected_dropped = {}, 0
    for case in CASES:
        key = _pandas_key(case, values)
        counted = key[key.notna() & ~values["tombstone"]]
        # a str key that reads as a number ("12") comes back from the repartition topic as that number
        recounts[case] = {
            int(k) if isinstance(k, str) and k.isdigit() else k: n for k, n in counted.value_counts().items()
        }
        # a null value with a non-null new key reaches the count, which drops it (counted); null keys are
        # dropped silently by the repartition
        expected_dropped += int((key.notna() & values["tombstone"]).sum())
    assert live_dropped == expected_dropped

    for engine in ("compiled", "replay"):
        result = backtest(topology, spark, bootstrap_servers=url, engine=engine, application_id=cluster.name("bt"))
        assert [p.engine for p in result.paths] == [engine] * 4, result.explain()
        for name in outputs:
            got = _per_partition(result.outputs[t[name]].to_pandas())
            assert got == _per_partition(live[name]), (engine, name)
        for case in CASES:
            store = result.stores[f"per-key-{case}"].to_pandas()
            pd.testing.assert_frame_equal(
                store.sort_values("key", key=lambda k: k.astype(str)).reset_index(drop=True),
                live_stores[case].sort_values("key", key=lambda k: k.astype(str)).reset_index(drop=True),
                check_dtype=False,
            )
            assert dict(zip(store["key"], store["value"])) == recounts[case], (engine, case)
        assert result.dropped == expected_dropped, engine
    for case in CASES:
        # the recount of the output: its last count per key, each key in murmur2's partition of its bytes
        counts = live[f"counts-{case}"].sort_values(["partition", "offset"])
        assert counts.groupby("key", sort=False)["value"].last().to_dict() == recounts[case]
        for key, partition in zip(counts["key"], counts["partition"]):
            data = key.encode() if isinstance(key, str) else orjson.dumps(key)
            assert partition == default_partition(data, 3)
    assert len(live["rekeyed"]) == int(values["user"].notna().sum())


@pytest.mark.parametrize(
    ("dsl", "function"),
    [
        (lambda s: s.select_key("user"), lambda s: s.select_key(lambda k, v: v and v.get("user"))),
        (lambda s: s.select_key(s["n"] * 2 + 1), lambda s: s.select_key(lambda k, v: v and v["n"] * 2 + 1)),
        (lambda s: s.group_by(s["user"].str.upper()).count().to_stream(),
         lambda s: s.group_by(lambda k, v: v and v.get("user") and v["user"].upper()).count().to_stream()),
    ],
    ids=["field", "arithmetic", "group-by-upper"],
)  # fmt: skip
def test_the_pandas_forms_give_what_the_lambda_gives(
    dsl: Callable[[Any], Any], function: Callable[[Any], Any]
) -> None:
    records = [("a", {"user": "ann", "n": 1}, 1), ("b", {"user": "bob", "n": 2}, 2), ("c", {"n": 3}, 3),
               ("a", {"user": "ann", "n": 4}, 4), ("d", {"user": "Ann", "n": 5}, 5)]  # fmt: skip

    def run(build: Callable[[Any], Any]) -> list[tuple[Any, Any, int]]:
        b = ks.StreamsBuilder()
        build(b.stream("in")).to("out")
        with ks.TopologyTestDriver(b.build()) as driver:
            source = driver.create_input_topic("in")
            for key, value, ts in records:
                source.pipe_input(key, value, ts)
            return [
                (r.key, r.value, r.timestamp) for r in driver.create_output_topic("out").read_records_to_list()
            ]

    got = run(dsl)
    assert got == run(function)
    assert got


def test_a_key_whose_type_depends_on_the_record_replays(spark: Any, url: str) -> None:
    """An int here, a str there (``where``): the key's JSON differs by type, so "auto" replays that
    sub-topology, naming why, and "compiled" refuses; the count after the repartition still compiles."""
    ks.produce(
        "signed", [ks.Record("k", {"a": a}, i + 1) for i, a in enumerate([3, -1, 3, -2])], bootstrap_servers=url
    )
    ks.produce("per-sign", [], bootstrap_servers=url)
    b = ks.StreamsBuilder()
    s = b.stream("signed")
    s.group_by(s["a"].where(s["a"] > 0, "negative")).count(store="signs").to_stream().to("per-sign")
    topology = b.build()
    auto = backtest(topology, spark, bootstrap_servers=url)
    assert [p.engine for p in auto.paths] == ["replay", "compiled"]
    assert "select_key by" in auto.explain() and "the type of its keys depends on the record" in auto.explain()
    assert auto.stores["signs"].to_pandas().set_index("key")["value"].to_dict() == {3: 2, "negative": 2}
    with pytest.raises(StreamsError, match="the type of its keys depends on the record"):
        backtest(topology, spark, bootstrap_servers=url, engine="compiled")
