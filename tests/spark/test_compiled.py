"""The compiled backtest path (``kstream_nb.spark.compiled``): which sub-topologies compile and why not, and
that a compiled stage gives what the replay (the live runtime's ``StreamTask``) gives, byte for byte, in a
plan that mixes both engines; each also against an independent recount with pandas.

The inputs are seeded, out of order within partitions, with timestamp ties across the two topics one
source reads, null keys and tombstones, and keys and values written by "another producer" (JSON with spaces,
a key quoted as a JSON string) so the sinks' serdes must rewrite them as the runtime does.
"""

from __future__ import annotations

import random
from typing import Any

import orjson
import pandas as pd
import pytest

import kstream_nb as ks
from kstream_nb.cluster.partitioner import default_partition
from kstream_nb.errors import StreamsError
from kstream_nb.spark import backtest
from kstream_nb.spark.result import BacktestResult
from tests.spark.compiled_helpers import planner_verdict

USERS = ["ann", "bob", "cid", "dee", "eve", "fay", "gus"]
ITEMS = ["apple", "pear", "fig", "kiwi"]


class Upper(ks.Processor):
    def process(self, record: ks.Record) -> None:
        self.context.forward(record.with_value(str(record.value).upper()))


@pytest.mark.parametrize(
    ("build", "config", "expected"),
    [
        (lambda b: b.stream("in").filter(lambda k, v: v).to("out"), {}, "filter with a Python function"),
        (lambda b: b.stream("in").map_values(str.upper).to("out"), {}, "map_values with a Python function"),
        (lambda b: b.stream("in").process(Upper).to("out"), {}, "Processor API (Upper)"),
        (lambda b: b.stream("in").to("out", partitioner=lambda k, v, n: 0), {}, "a custom partitioner (a lambda)"),
        (lambda b: b.stream("in").group_by_key().count().to_stream().to("out"), {"statestore_cache_max_bytes": 1},
         "statestore_cache_max_bytes > 0"),
        (lambda b: b.stream("in").group_by_key().reduce(max).to_stream().to("out"), {}, "KStreamReduce"),
        (lambda b: b.table("in").to_stream().to("out"), {}, "compiled: Table -> ToStream -> Sink"),
        (lambda b: b.stream("in").join(b.table("t"), lambda v, u: v).to("out"), {},
         "a stream-table join with a lambda: opaque to Spark"),
        (lambda b: b.stream("in").group_by_key().windowed_by(ks.SessionWindows.with_gap("5s")).count(),
         {}, "session windows"),
        (lambda b: b.stream("in", value_serde="string").assign(n=ks.col("a") + 1).to("out"), {},
         "whose serde is StringSerde (JSON only)"),
        (lambda b: b.stream("in").group_by_key().count().to_stream().to("out"), {},
         "compiled: Aggregate -> ToStream -> Sink"),
        (lambda b: (s := b.stream("in"))[s["a"] > 1].assign(c=s["a"] * 2)[["c"]].to("out"), {},
         "compiled: ExprFilter -> Assign -> Project -> Sink"),
    ],
    ids=["filter-lambda", "map-values", "processor", "partitioner", "cache", "reduce", "table", "join-lambda",
         "session", "string-values", "count", "expressions"],
)  # fmt: skip
def test_planner_names_what_prevents_compiling(build: Any, config: dict[str, Any], expected: str) -> None:
    reason = planner_verdict(build, **config)
    assert expected in reason
    if not reason.startswith("compiled"):
        assert reason.startswith(("node 'KSTREAM-", "node 'KTABLE-", "sink 'KSTREAM-SINK"))


def _records(rng: random.Random, n: int, ts_step: int) -> list[ks.Record]:
    """Orders out of order within each partition; every 11th a tombstone, every 13th without a key."""
    out = []
    for i in range(n):
        key = None if i % 13 == 5 else rng.choice(USERS)
        value = None if i % 11 == 3 else {"amount": rng.randint(0, 12), "price": rng.randint(1, 40) / 4,
                                          "item": rng.choice(ITEMS) if i % 7 else None}  # fmt: skip
        out.append(ks.Record(key, value, rng.randint(1, 60) * ts_step))
    return out


def _foreign(records: list[ks.Record]) -> list[ks.Record]:
    """The same records as bytes another producer writes: JSON with spaces, one key quoted as a JSON string."""

    def key(k: Any) -> bytes | None:
        return None if k is None else (b'"ann"' if k == "ann" else k.encode())

    return [
        ks.Record(key(r.key), None if r.value is None else orjson.dumps(r.value).replace(b":", b": "), r.timestamp)
        for r in records
    ]


def _topology(t: dict[str, str]) -> ks.Topology:
    b = ks.StreamsBuilder()
    s = b.stream([t["a"], t["b"]])
    s[s["amount"] >= 3].assign(total=s["amount"] * s["price"], big=s["amount"] > 7)[["total", "big", "item"]].to(
        t["clean"]
    )
    s.group_by_key().agg(
        n=("amount", "count"), units=("amount", "sum"), avg=("amount", "mean"), hi=("price", "max"),
        first=("item", "first"), last=("item", "last"), store="per-user",
    ).to_stream().to(t["agg"])  # fmt: skip
    s[s["price"] > 5].repartition(number_of_partitions=2, name="regroup").map_values(lambda v: v["amount"]).to(
        t["amounts"]
    )
    b.stream(t["c"]).group_by(lambda k, v: v and v["item"]).count(store="per-item").to_stream().to(t["items"])
    return b.build()


def _outputs(result: BacktestResult, topic: str) -> list[tuple[Any, ...]]:
    columns = ("partition", "offset", "timestamp", "key_bytes", "value_bytes")
    return sorted(tuple(r) for r in result.outputs[topic].df.select(*columns).collect())


def test_a_mixed_plan_gives_the_replays_bytes_and_the_recount(spark: Any, url: str) -> None:
    rng = random.Random(26)
    t = {name: f"{name}-topic" for name in ("a", "b", "c", "clean", "agg", "amounts", "items")}
    a, b, c = _records(rng, 90, 10), _records(rng, 70, 10), _records(rng, 60, 7)
    ks.produce(t["a"], _foreign(a), bootstrap_servers=url, partitions=3, key_serde="bytes", value_serde="bytes")
    ks.produce(t["b"], b, bootstrap_servers=url, partitions=3)
    ks.produce(t["c"], c, bootstrap_servers=url, partitions=3)
    for name in ("clean", "agg", "amounts", "items"):
        ks.produce(t[name], [], bootstrap_servers=url, partitions=2)
    topology = _topology(t)
    auto = backtest(topology, spark, bootstrap_servers=url)
    replay = backtest(topology, spark, bootstrap_servers=url, engine="replay")

    engines = {p.subtopology: p.engine for p in auto.paths}
    assert list(engines.values()).count("compiled") == 2, auto.explain()
    assert "map_values with a Python function" in auto.explain()
    assert auto._repr_html_().count("<td>compiled</td>") == 2
    for topic in ("clean", "agg", "amounts", "items"):
        assert _outputs(auto, t[topic]) == _outputs(replay, t[topic]), topic
    for store in ("per-user", "per-item"):
        pd.testing.assert_frame_equal(auto.stores[store].to_pandas(), replay.stores[store].to_pandas())
    pd.testing.assert_frame_equal(auto.tasks, replay.tasks)

    # the recount: plain pandas over the records produced
    ab = [r for r in a + b]
    kept = [r for r in ab if r.key is not None and r.value is not None]
    assert auto.dropped == len(ab) - len(kept)
    clean = auto.outputs[t["clean"]].to_pandas()
    assert sorted(v["total"] for v in clean["value"]) == sorted(
        r.value["amount"] * r.value["price"] for r in ab if r.value is not None and r.value["amount"] >= 3
    )
    # per task and user: topic a's "ann" is keyed b'"ann"' (another partition than b"ann", the same key)
    stored = auto.stores["per-user"].df.select("task", "key", "value").collect()
    final = {(r["task"], orjson.loads(r["key"])): orjson.loads(r["value"]) for r in stored}
    assert len(final) == len(stored)
    raw = {id(r): k for r, k in zip(a, (f.key for f in _foreign(a)))}
    frame = pd.DataFrame(
        [{"task": default_partition(raw.get(id(r)) or r.key.encode(), 3), "key": r.key, **r.value} for r in kept]
    )
    assert len(frame.groupby(["task", "key"])) == len(final)
    for (task, user), rows in frame.groupby(["task", "key"]):
        got = final[(task, user)]
        assert (got["n"], got["units"], got["hi"]) == (len(rows), int(rows["amount"].sum()), rows["price"].max())
        assert got["avg"] == rows["amount"].sum() / len(rows)
    items = pd.Series([r.value["item"] for r in c if r.value is not None and r.value["item"] is not None])
    per_item = auto.stores["per-item"].to_pandas().set_index("key")["value"].to_dict()
    assert per_item == items.value_counts().to_dict()
    assert len(auto.outputs[t["agg"]].to_pandas()) == len(kept)


def test_data_the_compiled_path_cannot_read_as_the_runtime_replays(spark: Any, url: str) -> None:
    """A field holding ints and floats (each keeps its type live): "auto" replays, naming the field;
    "compiled" refuses; both results equal the replay's."""
    records = [ks.Record("k", {"x": 1}, 1), ks.Record("k", {"x": 2.5}, 2), ks.Record("j", {"x": 3}, 3)]
    ks.produce("mixed", records, bootstrap_servers=url)
    ks.produce("sums", [], bootstrap_servers=url)
    b = ks.StreamsBuilder()
    b.stream("mixed").group_by_key().agg(total=("x", "sum")).to_stream().to("sums")
    topology = b.build()
    result = backtest(topology, spark, bootstrap_servers=url)
    assert "field 'x' mixes ['bigint', 'double'] values" in result.explain()
    assert [v["total"] for v in result.outputs["sums"].to_pandas()["value"]] == [1, 3.5, 3]
    with pytest.raises(StreamsError, match="field 'x' mixes"):
        backtest(topology, spark, bootstrap_servers=url, engine="compiled")


def test_engine_compiled_names_the_operation(spark: Any, url: str) -> None:
    ks.produce("lines", [ks.Record("k", "a b", 1)], bootstrap_servers=url)
    b = ks.StreamsBuilder()
    b.stream("lines").flat_map_values(str.split).to("words")
    with pytest.raises(StreamsError, match=r"sub-topology 0: node 'KSTREAM-FLATMAPVALUES-0000000001': flat_map_"):
        backtest(b.build(), spark, bootstrap_servers=url, engine="compiled", output_partitions={"words": 1})
    with pytest.raises(ValueError, match="engine must be one of"):
        backtest(b.build(), spark, bootstrap_servers=url, engine="fast", output_partitions={"words": 1})


def test_windows_with_a_windowed_key_serde_and_null_keys(spark: Any, url: str) -> None:
    """Tumbling counts written with a Java windowed key (``TimeWindowedSerde``, partitioned by the key inside),
    hopping named aggregations with grace, emit on close: the replay's bytes, stores and counters, and the
    windows' final counts recounted."""
    rng = random.Random(9)
    records = [
        ks.Record(rng.choice("wxyz"), {"n": rng.randint(0, 9)}, rng.randint(1, 60) * 1_000) for _ in range(150)
    ]
    records[7] = ks.Record(None, {"n": 1}, 5_000)
    ks.produce("clicks", records, bootstrap_servers=url, partitions=2)
    for topic in ("tumbling", "hopping", "final"):
        ks.produce(topic, [], bootstrap_servers=url, partitions=2)
    b = ks.StreamsBuilder()
    s = b.stream("clicks")
    tumbling = ks.TimeWindows.of("10s").grace("5s")
    s.group_by_key(key_serde="string").windowed_by(tumbling).count(store="t").to_stream().to("tumbling")
    hopping = ks.TimeWindows.of("10s").advance_by("4s").grace("3s")
    s.group_by_key().windowed_by(hopping).agg(store="h", n=("n", "sum"), hi=("n", "max")).to_stream().to("hopping")
    closing = ks.TimeWindows.of("10s").advance_by("5s").grace("2s")
    s.group_by_key().windowed_by(closing).emit_strategy("on_window_close").count(store="f").to_stream().to("final")
    topology = b.build()
    compiled = backtest(topology, spark, bootstrap_servers=url, engine="compiled")
    replay = backtest(topology, spark, bootstrap_servers=url, engine="replay")
    for topic in ("tumbling", "hopping", "final"):
        assert _outputs(compiled, topic) == _outputs(replay, topic), topic
    for store in ("t", "h-agg-state", "h", "f"):
        pd.testing.assert_frame_equal(compiled.stores[store].to_pandas(), replay.stores[store].to_pandas())
    pd.testing.assert_frame_equal(compiled.tasks, replay.tasks)
    # recount: per partition (as the key's bytes place it) in offset order, count the tumbling windows' records
    # that arrive while their window is open (end > stream time - grace); the store keeps the windows that
    # start after its latest window start minus the retention (size + grace)
    expected: dict[tuple[str, int], int] = {}
    stream_time, latest_start, partition_of = {0: -1, 1: -1}, {0: -1, 1: -1}, {}
    for r in records:
        if r.key is None:
            continue
        p = partition_of[r.key] = default_partition(r.key.encode(), 2)
        stream_time[p] = max(stream_time[p], r.timestamp)
        start = r.timestamp // 10_000 * 10_000
        if start + 10_000 > stream_time[p] - 5_000:
            expected[(r.key, start)] = expected.get((r.key, start), 0) + 1
            latest_start[p] = max(latest_start[p], start)
    kept = {w: n for w, n in expected.items() if w[1] > latest_start[partition_of[w[0]]] - 15_000}
    counts = compiled.stores["t"].to_pandas()
    assert dict(zip(zip(counts["key"], counts["start"]), counts["value"])) == kept


def test_emit_on_close_store_keeps_the_window_at_the_retention_boundary(spark: Any, url: str) -> None:
    """Emitting on close, the window store is Kafka's time-ordered one: it still shows a window whose start is
    its stream time minus the retention (4 s windows, no grace: windows 8000 and 12000 after 9000, 12500)."""
    ks.produce("in", [ks.Record("a", {"n": 1}, 9_000), ks.Record("a", {"n": 2}, 12_500)], bootstrap_servers=url)
    b = ks.StreamsBuilder()
    windows = ks.TimeWindows.of(4_000).grace(0)
    b.stream("in").group_by_key().windowed_by(windows).emit_strategy("on_window_close").count(store="w")
    topology = b.build()
    with ks.TopologyTestDriver(topology) as driver:
        feed = driver.create_input_topic("in")
        feed.pipe_input("a", {"n": 1}, timestamp=9_000)
        feed.pipe_input("a", {"n": 2}, timestamp=12_500)
        live = driver.get_state_store("w").to_pandas()
    expected = [(r.key, r.start, r.end, r.value[0]) for r in live.itertuples()]  # (count, timestamp) live
    assert [w[1] for w in expected] == [8_000, 12_000]
    compiled = backtest(topology, spark, bootstrap_servers=url, engine="compiled")
    assert compiled.paths[0].engine == "compiled"
    assert [tuple(r) for r in compiled.stores["w"].to_pandas().itertuples(index=False)] == expected
