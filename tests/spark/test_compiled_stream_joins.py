"""Windowed stream-stream joins on the compiled backtest path (``kstream_nb.spark.compiled.stream_join``): the
live app, ``engine="compiled"`` and ``engine="replay"`` give the same bytes per partition, dropped counts and
stores; the inner join's pairs are recounted with pandas; what does not compile names the node and why.

The inputs come in phases (each phase one topic, opening with a record per partition later than everything
before, as the live app then processes them in the backtest's order), with out-of-order records, records
late past the other side's lookup retention, null keys and null values, several matches per key.
"""

from __future__ import annotations

import random
from functools import partial
from typing import Any

import orjson
import pandas as pd
import pytest

import kstream_nb as ks
from kstream_nb.cluster.partitioner import default_partition
from kstream_nb.spark import backtest
from tests.spark.clusters import Cluster
from tests.spark.compiled_helpers import live_run, planner_verdict

KEYS = ["ann", "bob", "cid", "gus", "ida"]
#: a key of each partition (of 2): the phases' opening records
OPENERS = {default_partition(k.encode(), 2): k for k in KEYS}
BEFORE, AFTER, GRACE = 5_000, 3_000, 2_000


def _windows() -> ks.JoinWindows:
    return ks.JoinWindows.of("5s").after("3s").grace("2s")


@pytest.mark.parametrize(
    ("build", "expected"),
    [
        (lambda b: b.stream("l").join(b.stream("r"), ks.merge_joiner(), _windows()).to("o"),
         "compiled: StreamStreamJoin -> Sink"),
        (lambda b: b.stream("l").join(b.stream("r"), lambda x, y: x, _windows()).to("o"),
         "node 'KSTREAM-JOINTHIS-0000000004': a join with a lambda: opaque to Spark"),
        (lambda b: b.stream("l").left_join(b.stream("r"), ks.merge_joiner(), _windows()).to("o"),
         "node 'KSTREAM-JOINTHIS-0000000004': a left or outer join"),
        (lambda b: b.stream("l").outer_join(b.stream("r"), ks.merge_joiner(), _windows()).to("o"),
         "node 'KSTREAM-OUTERTHIS-0000000004': a left or outer join"),
        (lambda b: b.stream("l").join(b.stream("r", value_serde="string"), ks.merge_joiner(), _windows()),
         "joins values whose serde is StringSerde"),
        (lambda b: b.stream("l").join(b.stream("r"), ks.merge_joiner(), _windows()).filter(lambda k, v: v),
         "node 'KSTREAM-FILTER-0000000007': only a sink after a stream-stream join is compiled"),
        (lambda b: b.stream("l").filter(lambda k, v: v).join(b.stream("r"), ks.merge_joiner(), _windows()),
         "node 'KSTREAM-FILTER-0000000001': filter with a Python function (a lambda)"),
        (lambda b: [(s := b.stream("l")).to("copy"), s.join(b.stream("r"), ks.merge_joiner(), _windows())],
         "node 'KSTREAM-SOURCE-0000000000': a stream that branches before a stream-stream join"),
        (lambda b: b.stream("l").left_join(b.stream("r"), ks.merge_joiner(), ks.JoinWindows(5, 5, 0, True)),
         "compiled: StreamStreamJoin(left)"),
    ],
    ids=["inner", "lambda", "left", "outer", "string-values", "filter-after", "lambda-before", "branch-before",
         "eager-left"],
)  # fmt: skip
def test_planner_compiles_inner_merge_joins_only(build: Any, expected: str) -> None:
    assert expected in planner_verdict(build)


def _phases(rng: random.Random) -> list[tuple[str, list[ks.Record]]]:
    """Eight phases of one side each: per partition an opening record later than all before, then records up to
    16 s older (some past the other side's lookup retention of before + after + grace), a null key, a null
    value; some with headers."""
    phases = []
    for i in range(8):
        side = "left" if i % 3 != 1 else "right"
        base = 6_000 + 4_000 * i
        records = [ks.Record(OPENERS[p], {"n": i * 100 + p, "amt": p + 1}, base) for p in (0, 1)]
        for j in range(10):
            ts = max(0, base - rng.randint(0, 16_000))
            headers = (("trace", f"{i}-{j}".encode()),) if j % 4 == 0 else ()
            value = {"n": i * 100 + 10 + j, "amt": rng.randint(0, 9)}
            records.append(ks.Record(rng.choice(KEYS), value, ts, headers))
        records.append(ks.Record(None, {"n": i * 100 + 50, "amt": 5}, base - 1_000))
        records.append(ks.Record(rng.choice(KEYS), None, base - 500))
        phases.append((side, records))
    return phases


def _foreign(records: list[ks.Record]) -> list[ks.Record]:
    """The records as another producer writes them: JSON with spaces, "ann" and "bob" quoted as JSON strings
    (the same keys, in the same partition), a null value as the JSON ``null``."""

    def key(k: Any) -> bytes | None:
        return None if k is None else (f'"{k}"' if k in ("ann", "bob") else k).encode()

    def value(v: Any) -> bytes:
        return b" null " if v is None else orjson.dumps(v).replace(b":", b": ")

    return [ks.Record(key(r.key), value(r.value), r.timestamp, r.headers) for r in records]


def _reaches_join(side: str, value: Any) -> bool:
    """Whether a record passes the left side's filter (``amt >= 1``; a null value does not)."""
    return side == "right" or (value is not None and value["amt"] >= 1)


def _recount(phases: list[tuple[str, list[ks.Record]]]) -> tuple[pd.DataFrame, int]:
    """The inner join's results by pandas: pairs of a key in one partition whose later-arriving record finds
    the other in its window and within the lookup retention behind the other side's stream time then."""
    rows = [{"side": side, "key": r.key, "ts": r.timestamp, "value": r.value} for side, rs in phases for r in rs]
    frame = pd.DataFrame(rows).rename_axis("arrival").reset_index()
    frame = frame[[_reaches_join(side, r) for side, r in zip(frame["side"], frame["value"])]]
    valid = frame[frame["key"].notna() & frame["value"].notna()].copy()
    valid["partition"] = [default_partition(k.encode(), 2) for k in valid["key"]]
    # each side's stream time just before every arrival (per partition), what the other side's lookup sees
    for side in ("left", "right"):
        seen = valid["ts"].where(valid["side"] == side)
        valid[f"time_{side}"] = seen.groupby(valid["partition"]).transform(lambda s: s.cummax().ffill().shift(1))
    left, right = valid[valid["side"] == "left"], valid[valid["side"] == "right"]
    pairs = left.merge(right, on=["partition", "key"], suffixes=("_l", "_r"))
    left_later = pairs["arrival_l"] > pairs["arrival_r"]
    in_window = (pairs["ts_r"] - pairs["ts_l"]).between(-BEFORE, AFTER)
    other_time = pairs["time_right_l"].where(left_later, pairs["time_left_r"]).fillna(-1)
    other_ts = pairs["ts_r"].where(left_later, pairs["ts_l"])
    retained = other_ts > other_time - (BEFORE + AFTER + GRACE)
    joined = pairs[in_window & retained]
    expected = pd.DataFrame({
        "trigger": joined[["arrival_l", "arrival_r"]].max(axis=1), "partition": joined["partition"],
        "key": joined["key"], "ts": joined[["ts_l", "ts_r"]].max(axis=1),
        "value": [{"n": a["n"], "amt": a["amt"], "twice": 2 * a["amt"], "n_right": b["n"], "amt_right": b["amt"]}
                  for a, b in zip(joined["value_l"], joined["value_r"])],
    })  # fmt: skip
    return expected, int((in_window & ~retained).sum())


def _per_partition(frame: pd.DataFrame, key: str, value: str) -> dict[int, list[tuple[Any, Any, int]]]:
    frame = frame.sort_values(["partition", "offset"])
    return {
        int(p): [(r[key], r[value], int(r["timestamp"])) for _, r in rows.iterrows()]
        for p, rows in frame.groupby("partition")
    }


def _sorted_store(frame: pd.DataFrame) -> pd.DataFrame:
    frame = frame.assign(_order=frame["value"].astype(str))
    frame = frame.sort_values(["key", "start", "_order"]).drop(columns="_order")
    return frame.reset_index(drop=True)


def _joined(b: ks.StreamsBuilder, kind: str, windows: ks.JoinWindows) -> ks.KStream:
    """orders (filtered, assigned, projected) joined with payments."""
    orders = b.stream("orders")
    kept = orders[orders["amt"] >= 1].assign(twice=orders["amt"] * 2)[["amt", "n", "twice"]]
    return getattr(kept, kind)(b.stream("payments"), ks.merge_joiner(), windows)  # type: ignore[no-any-return]


def _live(
    url: str, topology: ks.Topology, phases: list[tuple[str, list[ks.Record]]], foreign: tuple[int, ...] = ()
) -> tuple[pd.DataFrame, dict[str, pd.DataFrame], int]:
    """The live app fed phase by phase (``foreign``: phases written by another producer): its output topic,
    its window stores and its dropped-record count."""
    cluster = Cluster("memory", url, {})
    for topic in ("orders", "payments", "joined"):
        cluster.produce(topic, [], partitions=2)
    stores = [n for n in topology.subtopologies()[0].stores if n.endswith("-store") and "OUTERSHARED" not in n]
    produce = []
    for i, (side, records) in enumerate(phases):
        topic = "orders" if side == "left" else "payments"
        if i in foreign:
            raw = _foreign(records)
            produce.append(
                partial(cluster.produce, topic, raw, partitions=2, key_serde="bytes", value_serde="bytes")
            )
        else:
            produce.append(partial(cluster.produce, topic, records, partitions=2))
    live_stores, dropped = live_run(cluster.app(topology), produce, stores)
    return (
        ks.read_topic("joined", bootstrap_servers=url, key_serde="bytes", value_serde="bytes"),
        live_stores,
        dropped,
    )


def test_inner_join_live_compiled_replay_and_recount(spark: Any, url: str) -> None:
    out = "joined"
    b = ks.StreamsBuilder()
    _joined(b, "join", _windows()).to(out)
    topology = b.build()
    phases = _phases(random.Random(27))
    live, live_stores, live_dropped = _live(url, topology, phases, foreign=(4, 7))  # two right phases

    compiled = backtest(topology, spark, bootstrap_servers=url, engine="compiled")
    replay = backtest(topology, spark, bootstrap_servers=url, engine="replay")
    assert [p.engine for p in compiled.paths] == ["compiled"], compiled.explain()
    reaching = [r for side, records in phases for r in records if _reaches_join(side, r.value)]
    expected_dropped = sum(r.key is None or r.value is None for r in reaching)
    assert live_dropped == expected_dropped
    live_rows = _per_partition(live, "key", "value")
    live_headers = [tuple(h) for h in live.sort_values(["partition", "offset"])["headers"]]
    assert any(live_headers)
    for result in (compiled, replay):
        got = (
            result.outputs[out]
            .df.selectExpr(
                "partition", "offset", "unix_millis(timestamp) AS timestamp", "key_bytes", "value_bytes"
            )
            .toPandas()
        )
        assert _per_partition(got, "key_bytes", "value_bytes") == {
            p: [(bytes(k), bytes(v), ts) for k, v, ts in rows] for p, rows in live_rows.items()
        }
        assert result.dropped == live_dropped
        headers = result.outputs[out].to_pandas().sort_values(["partition", "offset"])["headers"]
        assert [tuple(h) for h in headers] == live_headers
        for name in live_stores:
            pd.testing.assert_frame_equal(
                _sorted_store(result.stores[name].to_pandas()), _sorted_store(live_stores[name]), check_dtype=False
            )
    pd.testing.assert_frame_equal(compiled.tasks, replay.tasks)

    expected, past_retention = _recount(phases)
    assert past_retention > 0 and expected.groupby(["partition", "key"]).size().max() > 3
    got = compiled.outputs[out].to_pandas()
    as_tuples = sorted((int(p), k, int(t), sorted(v.items())) for p, k, t, v in
                       zip(got["partition"], got["key"], got["timestamp"], got["value"]))  # fmt: skip
    assert as_tuples == sorted(
        (int(p), k, int(t), sorted(v.items()))
        for p, k, t, v in zip(expected["partition"], expected["key"], expected["ts"], expected["value"])
    )


def test_a_rekeyed_side_joins_from_its_repartition_topic(spark: Any, url: str) -> None:
    """The left side re-keyed by a Python function (replayed) is read back from its repartition topic: the join
    compiles over records the backtest wrote (their order merged by timestamp), as the replay processes them."""
    rng = random.Random(5)
    orders = [
        ks.Record(f"o{i}", {"user": rng.choice(KEYS), "n": i}, rng.randint(1, 40) * 1_000) for i in range(60)
    ]
    payments = [ks.Record(rng.choice(KEYS), {"n": 100 + i}, rng.randint(1, 40) * 1_000) for i in range(50)]
    ks.produce("orders", orders, bootstrap_servers=url, partitions=3)
    ks.produce("payments", payments, bootstrap_servers=url, partitions=3)
    ks.produce("joined", [], bootstrap_servers=url, partitions=2)
    b = ks.StreamsBuilder()
    by_user = b.stream("orders").select_key(lambda k, v: v["user"])
    by_user.join(b.stream("payments"), ks.merge_joiner(("", "_paid")), _windows()).to("joined")
    topology = b.build()
    auto = backtest(topology, spark, bootstrap_servers=url)
    replay = backtest(topology, spark, bootstrap_servers=url, engine="replay")
    assert [p.engine for p in auto.paths] == ["replay", "compiled"], auto.explain()
    columns = ("partition", "offset", "timestamp", "key_bytes", "value_bytes", "headers")
    outputs = [sorted(map(tuple, r.outputs["joined"].df.select(*columns).collect())) for r in (auto, replay)]
    assert outputs[0] == outputs[1] and len(outputs[0]) > 20
    for name in topology.subtopologies()[1].stores:
        pd.testing.assert_frame_equal(
            _sorted_store(auto.stores[name].to_pandas()), _sorted_store(replay.stores[name].to_pandas())
        )
    pd.testing.assert_frame_equal(auto.tasks, replay.tasks)


def test_keys_join_as_python_compares_them(spark: Any, url: str) -> None:
    """1, 1.0 and true are one key live (the store's dict), "1" is another: the compiled join matches the same
    pairs as the replay, and as Python's equality of the decoded keys counts them."""
    lefts = [(b"1", 1_000), (b"2", 2_000), (b'"1"', 3_000), (b"true", 4_000)]
    rights = [(b"1.0", 1_500), (b"true", 2_500), (b"2.5", 3_500), (b'"1"', 4_500), (b"2", 5_000)]
    for topic, rows in (("l", lefts), ("r", rights)):
        records = [ks.Record(k, f'{{"{topic}": {i}}}'.encode(), ts) for i, (k, ts) in enumerate(rows)]
        ks.produce(topic, records, bootstrap_servers=url, key_serde="bytes", value_serde="bytes")
    ks.produce("o", [], bootstrap_servers=url)
    b = ks.StreamsBuilder()
    b.stream("l").join(b.stream("r"), ks.merge_joiner(), ks.JoinWindows.of("10s")).to("o")
    compiled = backtest(b.build(), spark, bootstrap_servers=url, engine="compiled")
    replay = backtest(b.build(), spark, bootstrap_servers=url, engine="replay")
    columns = ("partition", "offset", "timestamp", "key_bytes", "value_bytes")
    outputs = [sorted(map(tuple, r.outputs["o"].df.select(*columns).collect())) for r in (compiled, replay)]
    assert outputs[0] == outputs[1]
    decoded = [[orjson.loads(k) for k, _ in rows] for rows in (lefts, rights)]
    assert len(outputs[0]) == sum(a == b for a in decoded[0] for b in decoded[1]) == 6

    # a value that is not JSON: the deserialization handler decides, so the records replay (naming why)
    oops = [ks.Record(b"2", b"{oops", 6_000)]
    ks.produce("l", oops, bootstrap_servers=url, key_serde="bytes", value_serde="bytes")
    handled = {"default_deserialization_exception_handler": "log_and_continue"}
    auto = backtest(b.build(), spark, bootstrap_servers=url, **handled)
    assert "its records: values that are not valid JSON" in auto.explain()
    replay = backtest(b.build(), spark, bootstrap_servers=url, engine="replay", **handled)
    assert sorted(map(tuple, auto.outputs["o"].df.select(*columns).collect())) == outputs[1]
    pd.testing.assert_frame_equal(auto.tasks, replay.tasks)


def test_outer_join_with_eager_null_results(spark: Any, url: str) -> None:
    """``JoinWindows(eager_null_results=True)`` (Kafka's old ``of``): an outer side's record that finds no match,
    or has no key, is joined with None at once: the live app's bytes (keyless results: their partition is the
    producer's choice, compared as a whole), stores and dropped count, and the recount."""
    phases = _phases(random.Random(31))
    b = ks.StreamsBuilder()
    _joined(b, "outer_join", ks.JoinWindows(BEFORE, AFTER, GRACE, eager_null_results=True)).to("joined")
    topology = b.build()
    live, live_stores, live_dropped = _live(url, topology, phases)
    compiled = backtest(topology, spark, bootstrap_servers=url, engine="compiled")
    assert compiled.paths[0].reason == "StreamStreamJoin(outer) -> Sink"
    got = (
        compiled.outputs["joined"]
        .df.selectExpr(
            "partition",
            "offset",
            "unix_millis(timestamp) AS timestamp",
            "key_bytes AS key",
            "value_bytes AS value",
        )
        .toPandas()
    )
    got["key"] = got["key"].map(lambda k: None if k is None else bytes(k))
    got["value"] = got["value"].map(bytes)
    for frame in (got, live):
        frame["keyless"] = frame["key"].isna()
    keyed = [_per_partition(f[~f["keyless"]], "key", "value") for f in (got, live)]
    assert keyed[0] == keyed[1]
    keyless = [sorted(zip(f[f["keyless"]]["value"], f[f["keyless"]]["timestamp"])) for f in (got, live)]
    assert keyless[0] == keyless[1] and keyless[0]
    assert compiled.dropped == live_dropped
    for name, stored in live_stores.items():
        pd.testing.assert_frame_equal(
            _sorted_store(compiled.stores[name].to_pandas()), _sorted_store(stored), check_dtype=False
        )
    # recount: the inner pairs, plus the records of either side that reach the join and match nothing on arrival
    expected, _ = _recount(phases)
    triggers = set(expected["trigger"])
    arrivals = [(side, r) for side, records in phases for r in records]
    alone = [
        i for i, (side, r) in enumerate(arrivals)
        if r.value is not None and _reaches_join(side, r.value) and i not in triggers
    ]  # fmt: skip
    assert len(got) == len(expected) + len(alone) and len(alone) > 10
    keyless_count = sum(arrivals[i][1].key is None for i in alone)
    assert len(keyless[0]) == keyless_count
    dropped = sum(r.key is None or r.value is None for side, r in arrivals if _reaches_join(side, r.value))
    assert live_dropped == dropped - keyless_count


def test_a_buffered_left_join_replays_as_the_live_run(spark: Any, url: str) -> None:
    """A left join that waits for its windows to close (KIP-633) takes the replay path; the replay gives the
    live app's bytes per partition and its dropped count (its buffer of unmatched records is not a store the
    result lists as entries)."""
    phases = _phases(random.Random(47))
    b = ks.StreamsBuilder()
    _joined(b, "left_join", _windows()).to("joined")
    topology = b.build()
    live, _, live_dropped = _live(url, topology, phases)
    result = backtest(topology, spark, bootstrap_servers=url)
    assert result.paths[0].engine == "replay" and "a left or outer join" in result.paths[0].reason
    got = (
        result.outputs["joined"]
        .df.selectExpr("partition", "offset", "unix_millis(timestamp) AS timestamp", "key_bytes AS key",
                       "value_bytes AS value")
        .toPandas()
    )  # fmt: skip
    got["key"] = got["key"].map(lambda k: None if k is None else bytes(k))
    got["value"] = got["value"].map(bytes)
    keyed = [_per_partition(f[f["key"].notna()], "key", "value") for f in (got, live)]
    assert keyed[0] == keyed[1] and sum(map(len, keyed[0].values())) > 10
    keyless = [sorted(zip(f[f["key"].isna()]["value"], f[f["key"].isna()]["timestamp"])) for f in (got, live)]
    assert keyless[0] == keyless[1]
    assert result.dropped == live_dropped
