"""Backtest throughput on local Spark beside the TopologyTestDriver replaying the same records in one process.

    python bench/bench_backtest.py [--n 1000000] [--driver-n N] [--partitions 1,2,4,8] [--master local[2]]

Topology: events keyed by user, value {"user", "item", "amount"} -> filter(amount > 5) -> map_values ->
group_by(item) (repartition) -> aggregate(sum of amounts) -> to("totals"): two sub-topologies and a
Spark shuffle between them. N records go to a fresh ``memory://`` topic (not timed). Timed:

- driver: a TopologyTestDriver fed the serialized records one by one (``pipe_raw``), one process, one core,
  over the first ``--driver-n`` records of the first topic (default: all N; the output says which);
- backtest: ``ks.backtest`` end to end (snapshot of the topic to Parquet, both stages, outputs and
  stores materialized and counted), after a warm-up backtest on a small topic (JVM and workers started).

The backtest runs once per partition count (1, 2, 4, 8 by default: tasks per stage), each over a topic
of N records split that way. Spark runs ``local[2]`` by default: parallelism is capped by the cores Spark
gets (``--master``). Prints a table with each run's records/s and its ratio to the driver's records/s
measured in the same run; it is not a test.
"""

from __future__ import annotations

import argparse
import time
import uuid
from typing import Any

import numpy as np

import kstream_nb as ks
from kstream_nb.cluster.memory import reset_cluster
from kstream_nb.spark import backtest, spark_session


def build_topology() -> ks.Topology:
    b = ks.StreamsBuilder()
    (
        b.stream("events")
        .filter(lambda user, e: e["amount"] > 5)
        .map_values(lambda e: {"item": e["item"], "amount": e["amount"]})
        .group_by(lambda user, e: e["item"])
        .aggregate(lambda: 0, lambda item, e, total: total + e["amount"], store="totals-store")
        .to_stream()
        .to("totals")
    )
    return b.build()


def produce_events(url: str, n: int, partitions: int, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    users = rng.integers(0, 10_000, n)
    items = rng.integers(0, 1_000, n)
    amounts = rng.integers(0, 100, n)
    records = [
        (f"user-{u}", {"user": f"user-{u}", "item": f"item-{i}", "amount": int(a)})
        for u, i, a in zip(users.tolist(), items.tolist(), amounts.tolist())
    ]
    # timestamps from an hour ago (older ones would fall to the topic's default retention of 7 days)
    start_ms = int(time.time() * 1000) - 3_600_000
    ks.produce("events", records, bootstrap_servers=url, partitions=partitions, timestamps=start_ms)
    ks.produce("totals", [], bootstrap_servers=url, partitions=partitions)


def time_driver(url: str, limit: int) -> tuple[float, int]:
    """Seconds the TopologyTestDriver takes over the topic's first ``limit`` records (timestamp order)."""
    raw = ks.read_topic("events", bootstrap_servers=url, key_serde="bytes", value_serde="bytes")
    raw = raw.sort_values(["timestamp", "partition", "offset"]).head(limit)
    rows = list(zip(raw["key"].tolist(), raw["value"].tolist(), raw["timestamp"].tolist()))
    with ks.TopologyTestDriver(build_topology()) as driver:
        start = time.perf_counter()
        for key, value, ts in rows:
            driver.pipe_raw("events", key, value, int(ts))
        seconds = time.perf_counter() - start
    return seconds, len(rows)


def time_backtest(spark: Any, url: str) -> tuple[float, int, int, dict[int, float]]:
    """Seconds of one backtest end to end, task records processed, outputs, seconds per sub-topology."""
    start = time.perf_counter()
    result = backtest(build_topology(), spark, bootstrap_servers=url)
    outputs = result.outputs["totals"].count()
    stores = result.stores["totals-store"].count()
    seconds = time.perf_counter() - start
    assert stores <= 1_000 and outputs > 0
    return seconds, result.processed, outputs, result.stage_seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--driver-n", type=int, default=None, help="records for the test driver (default: N)")
    parser.add_argument("--partitions", default="1,2,4,8")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--skip-driver", action="store_true")
    args = parser.parse_args(argv)
    counts = [int(p) for p in args.partitions.split(",") if p]
    driver_n = min(args.n, args.driver_n or args.n)
    t0 = time.perf_counter()
    spark = spark_session(args.master, config={"spark.driver.memory": "4g"})
    print(f"spark session {args.master}: {time.perf_counter() - t0:.1f}s")
    warm = f"memory://bench-warm-{uuid.uuid4().hex[:6]}"
    produce_events(warm, 2_000, 2)
    t0 = time.perf_counter()
    time_backtest(spark, warm)
    reset_cluster(warm)
    print(f"warm-up backtest (2,000 records): {time.perf_counter() - t0:.1f}s\n", flush=True)

    driver_rate: float | None = None
    rows = []
    for i, p in enumerate(counts):
        url = f"memory://bench-{uuid.uuid4().hex[:6]}"
        t0 = time.perf_counter()
        produce_events(url, args.n, p)
        made = time.perf_counter() - t0
        if i == 0 and not args.skip_driver:
            seconds, n = time_driver(url, driver_n)
            driver_rate = n / seconds
            what = "all the records" if n == args.n else f"the first {n:,} of the {args.n:,} records"
            rows.append((f"TopologyTestDriver ({n:,} records)", p, n, seconds))
            print(f"driver: {what} in {seconds:.1f}s ({driver_rate:,.0f}/s)", flush=True)
        seconds, processed, outputs, stages = time_backtest(spark, url)
        assert processed >= args.n, f"the backtest processed {processed} records of {args.n}"
        rows.append((f"backtest, Spark {args.master}", p, args.n, seconds))
        per_stage = ", ".join(f"sub-topology {k}: {v:.1f}s" for k, v in sorted(stages.items()))
        print(f"backtest, {p} partition(s): {seconds:.1f}s ({processed:,} task records, {outputs:,} outputs; "
              f"{per_stage}; producing took {made:.1f}s)", flush=True)  # fmt: skip
        reset_cluster(url)
    print()
    print(f"{'engine':<40} {'partitions':>10} {'records':>11} {'seconds':>8} {'records/s':>11} {'x driver':>9}")
    for engine, p, n, seconds in rows:
        ratio = f"{n / seconds / driver_rate:>9.2f}" if driver_rate else f"{'-':>9}"
        print(f"{engine:<40} {p:>10} {n:>11,} {seconds:>8.1f} {n / seconds:>11,.0f} {ratio}")
    spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
