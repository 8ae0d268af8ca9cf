"""``suppress(until_window_closes())`` after a windowed count or named aggregation, compiled: the live run,
``engine="compiled"``, the replay and a recount agree on the final results (values, timestamps, the headers
of each window's last update, partitions and order), the suppression buffer left at the end (windows that
never closed), the window stores and the dropped-record count (null keys, late records).

The planner leaves to the replay what it cannot translate exactly, naming why.
"""

from __future__ import annotations

import random
from typing import Any

import pandas as pd
import pytest

import kstream_nb as ks
from kstream_nb.cluster.partitioner import default_partition
from kstream_nb.runtime.config import StreamsConfig
from kstream_nb.spark import backtest
from kstream_nb.spark.compiled import NotCompilable, plan_subtopology
from tests.spark.clusters import Cluster

USERS = ["ann", "bob", "cid", "dee", "eve", "Éva"]
SIZE, GRACE = 10_000, 3_000


def _records(rng: random.Random, n: int) -> list[ks.Record]:
    """Out of order (some late past the grace), every 17th without a key, each with a header of its index."""
    out = []
    for i in range(n):
        key = None if i % 17 == 5 else rng.choice(USERS)
        ts = 1 + i * 700 + rng.randint(-6_000, 1_000)
        out.append(ks.Record(key, {"n": rng.randint(0, 9)}, max(ts, 1), headers=[("i", str(i).encode())]))
    return out


CASES = ("count-tumbling", "agg-hopping")


def _topology(t: dict[str, str]) -> ks.Topology:
    """A tumbling count and a hopping named aggregation (its finish before the suppress), one input each."""
    b = ks.StreamsBuilder()
    for case in CASES:
        grouped = b.stream(t[f"clicks-{case}"]).group_by_key(key_serde="string")
        if case == "count-tumbling":
            table = grouped.windowed_by(ks.TimeWindows.of(SIZE).grace(GRACE)).count(store=f"windows-{case}")
        else:
            hopping = ks.TimeWindows.of(SIZE).advance_by(SIZE // 2).grace(GRACE)
            table = grouped.windowed_by(hopping).agg(
                store=f"windows-{case}", total=("n", "sum"), avg=("n", "mean")
            )
        table.suppress(ks.until_window_closes(), name=f"final-{case}").to_stream().to(t[f"final-{case}"])
    return b.build()


def _recount(case: str, records: list[ks.Record], partitions: int) -> tuple[dict[Any, Any], dict[Any, Any], int]:
    """Per (key, window start): (final value, timestamp, last header) of the windows that close by the end of
    the input, the same of those still open (the buffer), and the dropped-record count; by plain Python."""
    advance = SIZE if case == "count-tumbling" else SIZE // 2
    stream_time: dict[int, int] = {}
    windows: dict[tuple[str, int], list[ks.Record]] = {}
    dropped = 0
    for r in records:
        if r.key is None:
            dropped += 1
            continue
        p = default_partition(r.key.encode(), partitions)
        stream_time[p] = max(stream_time.get(p, -1), r.timestamp)
        start = r.timestamp - r.timestamp % advance
        while start > r.timestamp - SIZE and start >= 0:
            if start + SIZE <= stream_time[p] - GRACE:
                dropped += 1
            else:
                windows.setdefault((r.key, start), []).append(r)
            start -= advance
    closed, held = {}, {}
    for (key, start), rows in windows.items():
        ns = [r.value["n"] for r in rows]
        value = len(rows) if case == "count-tumbling" else {"total": sum(ns), "avg": sum(ns) / len(ns)}
        entry = (value, max(r.timestamp for r in rows), rows[-1].headers)
        p = default_partition(key.encode(), partitions)
        (closed if start + SIZE <= stream_time[p] - GRACE else held)[(key, start)] = entry
    return closed, held, dropped


def _per_partition(frame: pd.DataFrame) -> dict[int, list[tuple[Any, ...]]]:
    frame = frame.sort_values(["partition", "offset"])
    return {
        int(p): [(str(r.key), str(r.value), int(r.timestamp), str(r.headers)) for r in rows.itertuples()]
        for p, rows in frame.groupby("partition")
    }


def test_suppressed_final_results_compile_as_the_live_run(spark: Any, url: str) -> None:
    cluster = Cluster("memory", url, {})
    t = {f"{kind}-{case}": cluster.name(f"{kind}-{case}") for kind in ("clicks", "final") for case in CASES}
    records = {case: _records(random.Random(31 + i), 120) for i, case in enumerate(CASES)}
    for topic in t.values():
        cluster.produce(topic, [], partitions=2)
    topology = _topology(t)
    app = cluster.app(topology)
    try:
        app.start().wait_until_running(60)
        for case in CASES:
            cluster.produce(t[f"clicks-{case}"], records[case], partitions=2)
        app.wait_until_idle(timeout=60)
        live_dropped = int(app.metrics()["dropped-records-total"])
    finally:
        app.stop()
    live = {
        case: ks.read_topic(t[f"final-{case}"], bootstrap_servers=url, key_serde="windowed(10s):string")
        for case in CASES
    }
    recounts = {case: _recount(case, records[case], 2) for case in CASES}
    dropped = sum(r[2] for r in recounts.values())
    assert live_dropped == dropped

    compiled = backtest(topology, spark, bootstrap_servers=url, engine="compiled")
    replay = backtest(topology, spark, bootstrap_servers=url, engine="replay")
    assert [p.engine for p in compiled.paths] == ["compiled", "compiled"], compiled.explain()
    for result in (compiled, replay):
        for case in CASES:
            assert _per_partition(result.outputs[t[f"final-{case}"]].to_pandas()) == _per_partition(live[case])
        assert result.dropped == dropped
    assert set(compiled.stores) == set(replay.stores)
    for store in compiled.stores:
        pd.testing.assert_frame_equal(compiled.stores[store].to_pandas(), replay.stores[store].to_pandas())
    pd.testing.assert_frame_equal(compiled.tasks, replay.tasks)

    for case in CASES:
        # the recount: every closed window once, its final value, timestamp and last record's header; the
        # windows still open at the end (they never close: no flush) in the buffer store
        closed, held, _ = recounts[case]
        frame = live[case]
        assert held and closed
        got = {
            (k.key, k.start): (v, ts, [tuple(h) for h in hs])
            for k, v, ts, hs in zip(frame["key"], frame["value"], frame["timestamp"], frame["headers"])
        }
        assert len(got) == len(frame)
        assert got == {w: (v, ts, [tuple(h) for h in hs]) for w, (v, ts, hs) in closed.items()}, case
        buffer = compiled.stores[f"final-{case}-store"].to_pandas()
        kept = {
            (k.key, k.start): (v.change.new_value, v.timestamp, v.headers)
            for k, v in zip(buffer["key"], buffer["value"])
        }
        assert kept == {w: (v, ts, tuple(tuple(h) for h in hs)) for w, (v, ts, hs) in held.items()}, case


@pytest.mark.parametrize(
    ("suppressed", "expected"),
    [
        (lambda: ks.until_time_limit("5s"), "suppress(until_time_limit) (a time limit per key) is not compiled"),
        (lambda: ks.until_window_closes(ks.BufferConfig.with_max_records(3).shut_down_when_full()),
         "suppress with a bounded buffer"),
    ],
    ids=["time-limit", "bounded"],
)  # fmt: skip
def test_suppress_the_planner_leaves_to_the_replay(suppressed: Any, expected: str) -> None:
    b = ks.StreamsBuilder()
    b.stream("in").group_by_key().windowed_by(ks.TimeWindows.of("10s")).count().suppress(
        suppressed()
    ).to_stream().to("out")
    topology = b.build()
    with pytest.raises(
        NotCompilable, match=r"node 'KTABLE-SUPPRESS-\d+': " + expected.replace("(", r"\(").replace(")", r"\)")
    ):
        plan_subtopology(topology, topology.subtopologies()[0], StreamsConfig.of(application_id="t"))
