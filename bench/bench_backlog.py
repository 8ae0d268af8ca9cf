"""Peak memory while an app works through a backlog, with and without backpressure.

    python bench/bench_backlog.py --baseline /path/to/older/checkout [--n 300000] [--per-loop 500] [--kafka]

Each run is a fresh process: N JSON records are produced to one partition of a ``memory://`` cluster, or with
``--kafka`` of an Apache Kafka 4.4 the bench starts (where fetched records are copies; not measured), then an
app with ``filter -> map_values -> to`` runs until idle while a sampler reads the process's
resident set every 20 ms. The task processes ``--per-loop`` records per loop while each poll fetches up to
10,000 (a task slower than its fetches): without backpressure its queue grows by the difference every loop;
with it, the partition is paused once its queue is over ``buffered_records_per_partition`` (10,000). The peak
RSS above the level before the start is printed for the checkout given as ``--baseline`` and for this one.
On Kafka a pause drops what librdkafka prefetched for the partition (fetched again at the resume), so bounded
memory costs throughput in this setting; with the default budgets (50,000 records a task per loop, 10,000 a
poll) a partition is not paused in steady state.

This prints numbers; it is not a test.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def measure(n: int, per_loop: int, url: str = "memory://backlog", run: str = "") -> dict[str, float]:
    """One run in this process: the peak RSS above the level after producing, the time, the app's peak queue."""
    import kstream_nb as ks

    values = [{"id": i, "amount": i % 100, "note": "x" * 120} for i in range(n)]
    ks.produce(f"events{run}", values, bootstrap_servers=url)
    del values
    b = ks.StreamsBuilder()
    b.stream(f"events{run}").filter(lambda k, v: v["amount"] > 10).map_values(lambda v: v["id"]).to(f"out{run}")
    app = ks.KafkaStreams(
        b.build(), f"backlog{run}", url, max_task_records_per_loop=per_loop, commit_interval_ms=1000
    )
    base = rss_mb()
    peak = base
    stop = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not stop.is_set():
            peak = max(peak, rss_mb())
            stop.wait(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    began = time.perf_counter()
    app.start().wait_until_idle(600)
    elapsed = time.perf_counter() - began
    metrics = app.metrics()
    stop.set()
    sampler.join()
    app.stop()
    return {
        "peak_rss_above_start_mb": round(peak - base, 1),
        "seconds": round(elapsed, 2),
        "records_per_s": round(n / elapsed),
        "queue_peak": metrics.get("buffered-records-peak", -1),
    }


def run_in(checkout: Path, n: int, per_loop: int, url: str, run: str) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    code = f"import sys; sys.path.insert(0, {str(HERE / 'bench')!r}); import bench_backlog as b, json; "
    code += f"print(json.dumps(b.measure({n}, {per_loop}, {url!r}, {run!r})))"
    # run from the checkout's parent: "-c" puts the working directory first on sys.path
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=checkout.parent, capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", type=Path, help="a checkout of an older commit to compare with")
    parser.add_argument("--n", type=int, default=300_000)
    parser.add_argument("--per-loop", type=int, default=500, help="records a task processes per loop")
    parser.add_argument("--kafka", action="store_true", help="on an Apache Kafka 4.4 the bench starts")
    args = parser.parse_args(argv)
    with contextlib.ExitStack() as stack:
        url = "memory://backlog"
        if args.kafka:
            from kstream_nb.cluster.local_kafka import LocalKafka

            broker = LocalKafka(stack.enter_context(tempfile.TemporaryDirectory()), 0).start(timeout=120)
            stack.callback(broker.stop)
            url = broker.bootstrap_servers
        rows = []
        if args.baseline is not None:
            rows.append(("baseline", run_in(args.baseline, args.n, args.per_loop, url, "-baseline")))
        rows.append(("this tree", run_in(HERE, args.n, args.per_loop, url, "-this")))
    for name, result in rows:
        print(f"{name:10} {json.dumps(result)}")
    if len(rows) == 2:
        ratio = rows[1][1]["peak_rss_above_start_mb"] / max(rows[0][1]["peak_rss_above_start_mb"], 0.1)
        print(f"peak RSS above start, this tree / baseline: {ratio:.2f}")


if __name__ == "__main__":
    main()
