"""Windowed aggregation and stream-stream join through the full runtime, beside pandas computing the same results.

    python bench/bench_windows.py --n 1000000

Both cases produce their input to a fresh ``memory://`` cluster first (not timed), then start a
``KafkaStreams`` app with one stream thread and time ``start()`` until the app is idle and the output topic
holds every expected record (the helpers of ``bench_core.py``). A warm-up run over a handful of records
measures the startup (rebalance, task creation); "ours" is N / (full time - startup). The pandas
computation of the same results runs in the same process over the same input (timed, best of 2), and the
script CHECKS that both give the same results before printing the numbers.

(a) tumbling sum per key: ``windowed_by(TimeWindows.of("10s").grace("5s")).aggregate(sum)`` followed by
    ``suppress(until_window_closes())``, over N records, 10,000 keys, ``--partitions`` partitions (default 4).
    Event time advances evenly over 100 s; 5% of the records are late by a uniform 0-20 s, so some fall
    inside the grace period and some beyond it. pandas simulates exactly what the runtime must do: the
    input is taken in partition/offset order (the partition of each record is part of the input, read back
    from the topic before timing), stream time is the running max of the timestamps of each partition
    (stream time is per task, i.e. per partition, and advances before a record's own lateness check), a
    record is dropped when ``window end + grace <= stream time`` at its arrival, and a window is a final
    result once ``window end + grace <= the partition's last stream time`` (later windows are still open
    when the input ends, so neither side emits them). The results are compared as a dict
    (key, window start) -> sum.

(b) stream-stream inner join ``left.join(right, joiner, JoinWindows.of("5s").grace(...))`` over two
    co-partitioned topics of N/2 records each, N/10 keys, event time uniform over 100 s per topic.
    The grace covers the whole time span, so no record is dropped or expired whatever order the thread
    interleaves the two topics in, and the join must produce every pair (left, right) of the same key with
    ``|left ts - right ts| <= 5 s``. pandas computes the same pairs with ``merge`` on the key plus a time
    filter (``merge_asof`` keeps one match per row, not all pairs). The results are compared as sets of
    (key, left id, right id).

Default ``--n 200000`` (about a minute on 2 cores: ~33k rec/s for (a) and ~50k rec/s for (b) measured
2026-11); the in-memory window store expires windows through a heap of window starts, so ``--n 1000000``
takes about five times as long, not more.

This prints numbers; it is not a test.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_core import _cluster_ids, best_of, end_offsets_total

import kstream_nb as ks
from kstream_nb.cluster.memory import reset_cluster
from kstream_nb.processor.suppress import until_window_closes
from kstream_nb.processor.windows import JoinWindows, TimeWindows

WINDOW_MS = 10_000
GRACE_MS = 5_000
JOIN_MS = 5_000
SPAN_MS = 100_000
#: event time starts "now" (a window boundary): topics keep records by timestamp (retention.ms, 7 days), so
#: records stamped in 1970 would be deleted from the logs as soon as a segment closes
BASE_MS = time.time_ns() // 1_000_000 // WINDOW_MS * WINDOW_MS


# ---- (a) tumbling sum ------------------------------------------------------------------------------


def tumbling_input(n: int, keys: int, late_fraction: float, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    ts = np.arange(n, dtype=np.int64) * SPAN_MS // n
    late = rng.random(n) < late_fraction
    ts[late] -= rng.integers(0, 20_001, size=int(late.sum()))
    return pd.DataFrame(
        {
            "key": pd.Series(rng.integers(0, keys, size=n)).map(lambda k: f"k{k}"),
            "value": rng.integers(1, 100, size=n),
            "timestamp": BASE_MS + np.maximum(ts, 0),
        }
    )


def topo_tumbling() -> ks.Topology:
    b = ks.StreamsBuilder()
    (
        b.stream("events")
        .group_by_key()
        .windowed_by(TimeWindows.of(WINDOW_MS).grace(GRACE_MS))
        .aggregate(lambda: 0, lambda k, v, agg: agg + v, store="sums")
        .suppress(until_window_closes())
        .to_stream()
        .to("final-sums")
    )
    return b.build()


def pandas_tumbling(events: pd.DataFrame) -> dict[tuple[str, int], int]:
    """Final sums per (key, window start), with per-partition stream time; ``events`` in partition/offset order."""
    ts = events["timestamp"].to_numpy()
    stream_time = events.groupby("partition", sort=False)["timestamp"].cummax().to_numpy()
    start = ts - ts % WINDOW_MS
    accepted = start + WINDOW_MS + GRACE_MS > stream_time
    last_time = events.groupby("partition")["timestamp"].max()
    kept = events.loc[accepted, ["partition", "key", "value"]].assign(start=start[accepted])
    sums = kept.groupby(["partition", "key", "start"], sort=False)["value"].sum().reset_index()
    final = sums["start"].to_numpy() + WINDOW_MS + GRACE_MS <= sums["partition"].map(last_time).to_numpy()
    done = sums[final]
    return dict(zip(zip(done["key"], done["start"].astype(int)), done["value"].astype(int)))


def ours_tumbling(output: pd.DataFrame) -> dict[tuple[str, int], int]:
    return {(k["key"], int(k["start"])): int(v) for k, v in zip(output["key"], output["value"])}


# ---- (b) stream-stream join --------------------------------------------------------------------------


def join_input(n_side: int, keys: int, seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    rng = np.random.default_rng(seed)

    def side(offset: int) -> pd.DataFrame:
        ts = BASE_MS + np.sort(rng.integers(0, SPAN_MS, size=n_side))
        return pd.DataFrame(
            {
                "key": pd.Series(rng.integers(0, keys, size=n_side)).map(lambda k: f"k{k}"),
                "value": np.arange(offset, offset + n_side),
                "timestamp": ts,
            }
        )

    return side(0), side(n_side)


def topo_join() -> ks.Topology:
    b = ks.StreamsBuilder()
    windows = JoinWindows.of(JOIN_MS).grace(2 * SPAN_MS)
    b.stream("left").join(b.stream("right"), lambda lv, rv: [lv, rv], windows).to("pairs")
    return b.build()


def pandas_join(left: pd.DataFrame, right: pd.DataFrame) -> set[tuple[str, int, int]]:
    pairs = left.merge(right, on="key", suffixes=("_l", "_r"))
    pairs = pairs[(pairs["timestamp_l"] - pairs["timestamp_r"]).abs() <= JOIN_MS]
    return set(zip(pairs["key"], pairs["value_l"].astype(int), pairs["value_r"].astype(int)))


def ours_join(output: pd.DataFrame) -> set[tuple[str, int, int]]:
    return {(k, int(v[0]), int(v[1])) for k, v in zip(output["key"], output["value"])}


# ---- runtime timing ---------------------------------------------------------------------------------


def run_app(
    topology: Callable[[], ks.Topology], feed: Callable[[str], None], output: str, expected: int | None,
    timeout: float,
) -> tuple[float, pd.DataFrame]:  # fmt: skip
    """(seconds from start() to idle with ``expected`` records on ``output``, the output topic)."""
    servers = f"memory://bench-windows-{next(_cluster_ids)}"
    reset_cluster(servers)
    feed(servers)
    app = ks.KafkaStreams(topology(), application_id="bench", bootstrap_servers=servers, num_stream_threads=1)
    t0 = time.perf_counter()
    app.start()
    try:
        deadline = t0 + timeout
        while True:
            app.wait_until_idle(timeout=max(0.1, deadline - time.perf_counter()))
            if expected is None or end_offsets_total(servers, output) >= expected:
                break
            if time.perf_counter() > deadline:
                raise TimeoutError(f"{output} has {end_offsets_total(servers, output)} of {expected} records")
            time.sleep(0.001)
        elapsed = time.perf_counter() - t0
        result = ks.read_topic(output, bootstrap_servers=servers) if expected is not None else pd.DataFrame()
    finally:
        if not app.stop(timeout=30):
            print("warning: app did not stop in time", file=sys.stderr)
        reset_cluster(servers)
    return elapsed, result


def read_back(frame: pd.DataFrame, topic: str, partitions: int) -> pd.DataFrame:
    """``frame`` as the runtime sees it: produced to ``topic``, read back in partition/offset order."""
    servers = f"memory://bench-windows-{next(_cluster_ids)}"
    reset_cluster(servers)
    try:
        ks.produce(topic, frame, bootstrap_servers=servers, partitions=partitions)
        back = ks.read_topic(topic, bootstrap_servers=servers)
    finally:
        reset_cluster(servers)
    back = back.sort_values(["partition", "offset"], kind="stable").reset_index(drop=True)
    return back[["partition", "offset", "timestamp", "key", "value"]]


def startup_seconds(topology: Callable[[], ks.Topology], feed: Callable[[str], None], output: str,
                    timeout: float) -> float:  # fmt: skip
    return min(run_app(topology, feed, output, None, timeout)[0] for _ in range(2))


# ---- main ------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=200_000, help="records per case (default 200000; issue: 1000000)")
    parser.add_argument("--keys", type=int, default=10_000, help="keys for (a) (default 10000)")
    parser.add_argument("--late", type=float, default=0.05, help="fraction of late records in (a) (default 0.05)")
    parser.add_argument("--partitions", type=int, default=4, help="partitions of the input topics (default 4)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--cases", default="a,b", help="comma-separated subset of a,b")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds allowed per run")
    args = parser.parse_args(argv)
    n, cases, parts = args.n, set(args.cases.split(",")), args.partitions
    rows: list[tuple[str, int, float, float, float, int]] = []

    if "a" in cases:
        frame = tumbling_input(n, args.keys, args.late, args.seed)
        events = read_back(frame, "events", parts)
        pandas_s = best_of(lambda: pandas_tumbling(events), 2)
        want = pandas_tumbling(events)

        def feed_a(servers: str, m: int = n) -> None:
            ks.produce("events", frame.iloc[:m], bootstrap_servers=servers, partitions=parts)

        startup = startup_seconds(topo_tumbling, lambda s: feed_a(s, 10), "final-sums", args.timeout)
        full, output = run_app(topo_tumbling, feed_a, "final-sums", len(want), args.timeout)
        got = ours_tumbling(output)
        if got != want:
            diff = sorted(set(got.items()) ^ set(want.items()))[:5]
            raise AssertionError(
                f"(a) final sums differ from pandas: {len(got)} vs {len(want)} windows; e.g. {diff}"
            )
        on_time = BASE_MS + np.arange(n, dtype=np.int64) * SPAN_MS // n
        late_total = int((frame["timestamp"].to_numpy() < on_time).sum())
        ts = events["timestamp"].to_numpy()
        stream_time = events.groupby("partition", sort=False)["timestamp"].cummax().to_numpy()
        dropped = int((ts - ts % WINDOW_MS + WINDOW_MS + GRACE_MS <= stream_time).sum())
        rows.append(("(a) tumbling 10s sum + suppress (final)", n, full, startup, pandas_s, len(want)))
        print(f"(a) checked: {len(want)} final windows equal; {late_total} late records, {dropped} of them "
              f"beyond grace (dropped)")  # fmt: skip

    if "b" in cases:
        n_side = n // 2
        left, right = join_input(n_side, max(1, n // 10), args.seed)
        pandas_s = best_of(lambda: pandas_join(left, right), 2)
        want_pairs = pandas_join(left, right)

        def feed_b(servers: str, m: int = n_side) -> None:
            ks.produce("left", left.iloc[:m], bootstrap_servers=servers, partitions=parts)
            ks.produce("right", right.iloc[:m], bootstrap_servers=servers, partitions=parts)

        startup = startup_seconds(topo_join, lambda s: feed_b(s, 10), "pairs", args.timeout)
        full, output = run_app(topo_join, feed_b, "pairs", len(want_pairs), args.timeout)
        got_pairs = ours_join(output)
        if len(output) != len(want_pairs) or got_pairs != want_pairs:
            raise AssertionError(
                f"(b) join pairs differ from pandas: {len(output)} records, {len(got_pairs)} distinct, "
                f"pandas {len(want_pairs)}"
            )
        rows.append(
            ("(b) stream-stream join, JoinWindows 5s", 2 * n_side, full, startup, pandas_s, len(want_pairs))
        )
        print(f"(b) checked: {len(want_pairs)} join pairs equal")

    print()
    header = (
        f"{'case':<42} {'N':>8} {'outputs':>8} {'ours rec/s':>11} {'incl. start':>11} {'pandas rec/s':>13} "
        f"{'ours/pandas':>11} {'startup s':>9}"
    )
    print(header)
    print("-" * len(header))
    for name, count, full, startup, pandas_s, outputs in rows:
        ours = count / max(full - startup, 1e-9)
        pandas_rate = count / pandas_s
        print(
            f"{name:<42} {count:>8} {outputs:>8} {ours:>11,.0f} {count / full:>11,.0f} {pandas_rate:>13,.0f} "
            f"{ours / pandas_rate:>10.2%} {startup:>9.3f}"
        )
    print()
    print("ours rec/s = N / (seconds from start() to idle - startup of a warm-up run over 10 records);")
    print("pandas rec/s = N / seconds of the vectorised computation of the same results (best of 2).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
