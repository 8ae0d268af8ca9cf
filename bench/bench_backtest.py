"""Backtest throughput, in one run: test driver, live engine, replay, compiled, and the query by hand in Spark SQL.

    python bench/bench_backtest.py [--n 1000000] [--masters local[1],local[2]] [--partitions 2] [--driver-n N]

Query (one the compiled path translates: a column-expression filter and a built-in aggregation): events
keyed by item, value {"user", "item", "amount"} ->
``s[s["amount"] > 5].group_by_key().agg(total=("amount", "sum"))`` -> ``to_stream().to("totals")``, with
``statestore_cache_max_bytes=0`` (every update is emitted, as the compiled path does: a record cache would
decide which updates leave). N records go to a fresh ``memory://`` topic of ``--partitions`` partitions, and
from there to a Parquet archive (``export_topic``; timed, printed, not part of the rates): a history of that
size is read from an archive or a broker, and every Spark engine reads the same archive. Timed, each over the
same records:

- driver: a ``TopologyTestDriver`` fed the serialized records one by one (``pipe_raw``), one process, over
  the first ``--driver-n`` records (default all);
- live: ``KafkaStreams`` with one stream thread from ``start()`` until every update is on "totals", minus
  the same for 10 records (startup): the live engine's steady per-core rate;
- replay / compiled: ``ks.backtest(engine=..., archives=...)`` end to end (the stage, the outputs and stores
  counted), after a warm-up backtest; "n/a" when the installed ``backtest`` has no such engine;
- spark-sql: the query written by hand with DataFrame functions over the same archive (``from_json``, filter,
  a running ``sum`` per key over a window ordered by partition and offset, ``to_json``), written to the
  ``noop`` sink: the ceiling for this query on this Spark session.

Every engine's update count is checked against a recount (records with amount > 5). The Spark engines run
once per master (``--masters``); the table gives records/s, the ratio to spark-sql on the same master, and
for replay its records/s per core over the live engine's steady rate. It prints numbers; it is not a test.
"""

from __future__ import annotations

import argparse
import inspect
import shutil
import tempfile
import time
import uuid
from typing import Any

import numpy as np

import kstream_nb as ks
from kstream_nb.cluster.connection import connect
from kstream_nb.cluster.memory import reset_cluster
from kstream_nb.cluster.partitioner import default_partition
from kstream_nb.spark import backtest, spark_session

CONFIG: dict[str, Any] = {"statestore_cache_max_bytes": 0}
#: "running" (every update of a per-key sum) or "windowed" (per-key sums of 1-minute windows, emitted on close)
QUERY = "running"
WINDOW_MS, GRACE_MS = 60_000, 10_000


def build_topology() -> ks.Topology:
    b = ks.StreamsBuilder()
    s = b.stream("events")
    grouped = s[s["amount"] > 5].group_by_key()
    if QUERY == "windowed":
        windows = ks.TimeWindows.of(WINDOW_MS).grace(GRACE_MS)
        table = grouped.windowed_by(windows).emit_strategy("on_window_close")
        table.agg(total=("amount", "sum"), store="totals").to_stream().to("totals")
    else:
        grouped.agg(total=("amount", "sum"), store="totals").to_stream().to("totals")
    return b.build()


def produce_events(url: str, n: int, partitions: int, seed: int = 0) -> int:
    """Produces ``n`` events; returns how many records the query writes, recounted with numpy: the records
    with amount > 5 (running), or the windows of those closed by their partition's last one (windowed)."""
    rng = np.random.default_rng(seed)
    users = rng.integers(0, 10_000, n)
    items = rng.integers(0, 1_000, n)
    amounts = rng.integers(0, 100, n)
    records = [
        (f"item-{i}", {"user": f"user-{u}", "item": f"item-{i}", "amount": int(a)})
        for u, i, a in zip(users.tolist(), items.tolist(), amounts.tolist())
    ]
    # timestamps from an hour ago, one ms apart (older ones would fall to the default retention of 7 days)
    start_ms = int(time.time() * 1000) - 3_600_000
    ks.produce("events", records, bootstrap_servers=url, partitions=partitions, timestamps=start_ms)
    ks.produce("totals", [], bootstrap_servers=url, partitions=partitions)
    kept = amounts > 5
    if QUERY != "windowed":
        return int(kept.sum())
    key_partition = np.array([default_partition(f"item-{i}".encode(), partitions) for i in range(1_000)])
    parts, ts, item = key_partition[items][kept], (start_ms + np.arange(n))[kept], items[kept]
    stream_time = np.full(partitions, -1)
    np.maximum.at(stream_time, parts, ts)
    starts = ts - ts % WINDOW_MS
    closed = starts + WINDOW_MS <= stream_time[parts] - GRACE_MS
    return len(set(zip(item[closed].tolist(), starts[closed].tolist())))


def time_driver(url: str, limit: int) -> tuple[float, int]:
    """Seconds the TopologyTestDriver takes over the topic's first ``limit`` records (timestamp order)."""
    raw = ks.read_topic("events", bootstrap_servers=url, key_serde="bytes", value_serde="bytes")
    raw = raw.sort_values(["timestamp", "partition", "offset"]).head(limit)
    rows = list(zip(raw["key"].tolist(), raw["value"].tolist(), raw["timestamp"].tolist()))
    with ks.TopologyTestDriver(build_topology(), dict(CONFIG)) as driver:
        start = time.perf_counter()
        for key, value, ts in rows:
            driver.pipe_raw("events", key, value, int(ts))
        seconds = time.perf_counter() - start
    return seconds, len(rows)


def _updates(url: str) -> int:
    """Records on "totals" (the sum of its partitions' end offsets)."""
    admin = connect(url).admin()
    count = admin.partition_count("totals") or 0
    tps = [ks.TopicPartition("totals", p) for p in range(count)]
    return sum(admin.end_offsets(tps).values())


def time_live(n: int, partitions: int) -> float:
    """The live engine's steady rate: records/s of one stream thread, startup (10 records) subtracted."""

    def run(m: int) -> float:
        url = f"memory://bench-live-{uuid.uuid4().hex[:6]}"
        expected = produce_events(url, m, partitions)
        app = ks.KafkaStreams(build_topology(), application_id="live", bootstrap_servers=url,
                              num_stream_threads=1, **CONFIG)  # fmt: skip
        t0 = time.perf_counter()
        app.start()
        try:
            while True:
                app.wait_until_idle(timeout=600)
                if _updates(url) >= expected:
                    break
            seconds = time.perf_counter() - t0
            assert _updates(url) == expected, f"live wrote {_updates(url)} updates, expected {expected}"
        finally:
            app.stop(timeout=30)
            reset_cluster(url)
        return seconds

    startup = min(run(10) for _ in range(2))
    return n / (run(n) - startup)


def time_backtest(spark: Any, url: str, archive: str, engine: str) -> tuple[float, int]:
    """Seconds of one backtest end to end and the updates it wrote to "totals"."""
    start = time.perf_counter()
    extra = {} if engine == "default" else {"engine": engine}
    archives = {"events": archive}
    result = backtest(build_topology(), spark, bootstrap_servers=url, archives=archives, **extra, **CONFIG)
    outputs = result.outputs["totals"].count()
    result.stores["totals"].count()
    return time.perf_counter() - start, outputs


def time_sql(spark: Any, archive: str) -> tuple[float, int]:
    """The query by hand in Spark SQL over the same archive: seconds and updates written (``noop`` sink)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from kstream_nb.spark.source import read_history

    start = time.perf_counter()
    events = read_history(spark, "events", path=archive)
    value = F.from_json(F.col("value").cast("string"), "user string, item string, amount long")
    kept = events.select("partition", "offset", "timestamp", "key", value.alias("v")).where(F.col("v.amount") > 5)
    if QUERY == "windowed":
        # the late-drop rule's stream time: the running max per partition; a window goes out once closed
        ts = F.expr("unix_millis(timestamp)")
        observed = Window.partitionBy("partition").orderBy("offset").rowsBetween(Window.unboundedPreceding, 0)
        last = Window.partitionBy("partition")
        windowed = kept.select(
            "partition", "key", "v", ts.alias("ts"), (ts - ts % WINDOW_MS).alias("start"),
            F.max(ts).over(observed).alias("observed"), F.max(ts).over(last).alias("final"),
        ).where(F.col("start") + WINDOW_MS > F.col("observed") - GRACE_MS)  # fmt: skip
        updates = (
            windowed.groupBy("partition", "key", "start")
            .agg(F.sum("v.amount").alias("total"), F.max("ts").alias("ts"), F.max("final").alias("final"))
            .where(F.col("start") + WINDOW_MS <= F.col("final") - GRACE_MS)
            .select("key", F.to_json(F.struct("total")).cast("binary").alias("value"), "ts")
        )
    else:
        running = (
            Window.partitionBy("key").orderBy("partition", "offset").rowsBetween(Window.unboundedPreceding, 0)
        )
        updates = kept.select(
            "key",
            F.to_json(F.struct(F.sum("v.amount").over(running).alias("total"))).cast("binary").alias("value"),
            F.max("timestamp").over(running).alias("timestamp"),
        )
    updates.write.format("noop").mode("overwrite").save()
    seconds = time.perf_counter() - start
    return seconds, int(updates.count())  # counted after the timing (a second pass)


def engines_available() -> dict[str, bool]:
    has_engine = "engine" in inspect.signature(backtest).parameters
    return {"replay": True, "compiled": has_engine}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--driver-n", type=int, default=None, help="records for the test driver (default: N)")
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--masters", default="local[1],local[2]")
    parser.add_argument("--skip", default="", help="comma-separated engines not to run (driver,live,...)")
    parser.add_argument("--query", choices=["running", "windowed"], default="running")
    args = parser.parse_args(argv)
    global QUERY
    QUERY = args.query
    skip = set(filter(None, args.skip.split(",")))
    masters = [m for m in args.masters.split(",") if m]
    url = f"memory://bench-{uuid.uuid4().hex[:6]}"
    t0 = time.perf_counter()
    expected = produce_events(url, args.n, args.partitions)
    print(f"produced {args.n:,} records ({args.partitions} partitions, {expected:,} updates expected) "
          f"in {time.perf_counter() - t0:.1f}s", flush=True)  # fmt: skip
    workdir = tempfile.mkdtemp(prefix="bench-backtest-")
    t0 = time.perf_counter()
    archive = str(ks.export_topic("events", f"{workdir}/events", bootstrap_servers=url))
    print(f"exported to a Parquet archive in {time.perf_counter() - t0:.1f}s (not part of the rates)", flush=True)
    rows: list[tuple[str, str, int, float | None]] = []  # engine, master, records, seconds (None: n/a)
    if "driver" not in skip:
        seconds, n = time_driver(url, min(args.n, args.driver_n or args.n))
        rows.append((f"test driver ({n:,} records)", "1 process", n, seconds))
        print(f"driver: {n:,} records in {seconds:.1f}s ({n / seconds:,.0f}/s)", flush=True)
    live_rate: float | None = None
    if "live" not in skip:
        live_rate = time_live(args.n, args.partitions)
        rows.append(("live engine, 1 stream thread (steady)", "1 process", args.n, args.n / live_rate))
        print(f"live: {live_rate:,.0f}/s steady", flush=True)
    available = engines_available()
    sql_seconds: dict[str, float] = {}
    for master in masters:
        spark = spark_session(master, config={"spark.driver.memory": "4g"})
        warm = f"memory://bench-warm-{uuid.uuid4().hex[:6]}"
        produce_events(warm, 2_000, args.partitions)
        warm_path = f"{workdir}/warm-{uuid.uuid4().hex[:6]}"
        warm_archive = str(ks.export_topic("events", warm_path, bootstrap_servers=warm))
        for engine in ("replay", "compiled"):
            if engine not in skip and available[engine]:
                time_backtest(spark, warm, warm_archive, engine if available["compiled"] else "default")
        time_sql(spark, warm_archive)
        reset_cluster(warm)
        for engine in ("replay", "compiled", "spark-sql"):
            if engine in skip:
                continue
            if not available.get(engine, True):
                rows.append((engine, master, args.n, None))
                print(f"{engine} on {master}: n/a (ks.backtest has no engine={engine!r})", flush=True)
                continue
            if engine == "spark-sql":
                seconds, updates = time_sql(spark, archive)
            else:
                seconds, updates = time_backtest(
                    spark, url, archive, engine if available["compiled"] else "default"
                )
            assert updates == expected, f"{engine} wrote {updates:,} updates, the recount is {expected:,}"
            rows.append((engine, master, args.n, seconds))
            if engine == "spark-sql":
                sql_seconds[master] = seconds
            print(f"{engine} on {master}: {seconds:.1f}s ({args.n / seconds:,.0f}/s)", flush=True)
        spark.stop()
    reset_cluster(url)
    shutil.rmtree(workdir, ignore_errors=True)
    print()
    print(f"{'engine':<40} {'where':>10} {'records':>10} {'seconds':>8} {'records/s':>10} {'x sql':>6} "
          f"{'/core x live':>12}")  # fmt: skip
    for engine, where, n, seconds in rows:
        if seconds is None:
            print(f"{engine:<40} {where:>10} {n:>10,} {'n/a':>8} {'n/a':>10} {'':>6} {'':>12}")
            continue
        rate = n / seconds
        vs_sql = f"{sql_seconds[where] / seconds:.2f}" if where in sql_seconds else ""
        cores = int(where[len("local[") : -1]) if where.startswith("local[") else 1
        vs_live = f"{rate / cores / live_rate:.2f}" if live_rate and engine == "replay" else ""
        print(f"{engine:<40} {where:>10} {n:>10,} {seconds:>8.1f} {rate:>10,.0f} {vs_sql:>6} {vs_live:>12}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
