"""Two checkouts of kstream_nb, A and B, on the same workload and Kafka broker, alternating, for A/B timing.

    git worktree add /tmp/ks-base HEAD~1
    .venv/bin/python bench/bench_kafka_ab.py /tmp/ks-base . --rounds 3            # word count
    .venv/bin/python bench/bench_kafka_ab.py /tmp/ks-base . --workload filter
    .venv/bin/python bench/bench_kafka_ab.py /tmp/ks-base . --workload window

Writes the input once (word count: 60,000 sentences of 4-12 words over 5,000 words; filter: 300,000 JSON
events; window: the same events with record timestamps over 100 s, summed per key in 10 s tumbling windows
with 5 s grace, final results only), then runs each checkout's app in its own process, A then B,
``--rounds`` times, each with a fresh application id (the whole input, cold state). One stream thread,
in-memory stores, no record cache unless ``--cache-bytes`` (``--commit-ms`` sets the commit interval,
``--guarantee exactly_once_v2`` runs it under exactly-once). Times from the app reaching RUNNING (after
the consumer-group join, which measures the broker) until the thread has processed every input record
(word count: sentences + words, both sub-topologies), and prints the median per checkout and B/A. "busy"
is the stream thread's time inside processing (``process_time_s``); "in GC" the process's time in
CPython's cyclic garbage collector (``gc.callbacks``).

This prints numbers; it is not a test.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.kafka_broker import running_kafka  # noqa: E402

CHILD = """
import json, sys, time
root, workload, app_id, bootstrap, total, cache, commit, guarantee = sys.argv[1:9]
sys.path.insert(0, root)
import gc
import kstream_nb as ks
gc_time = {"began": 0.0, "seconds": 0.0, "full": 0}
def on_gc(phase, info):
    if phase == "start":
        gc_time["began"] = time.perf_counter()
    else:
        gc_time["seconds"] += time.perf_counter() - gc_time["began"]
        gc_time["full"] += info["generation"] == 2
gc.callbacks.append(on_gc)
assert ks.__file__.startswith(root), ks.__file__
b = ks.StreamsBuilder()
if workload == "wordcount":
    (b.stream("sentences").flat_map_values(str.split).group_by(lambda k, w: w).count(store="counts")
     .to_stream().to("out-" + app_id))
elif workload == "filter":
    (b.stream("events").filter(lambda k, v: v["amount"] > 50)
     .map_values(lambda v: {**v, "doubled": v["amount"] * 2}).to("out-" + app_id))
else:
    (b.stream("events").map_values(lambda v: v["amount"]).group_by_key()
     .windowed_by(ks.TimeWindows.of(10_000).grace(5_000)).reduce(lambda a, b: a + b, store="sums")
     .suppress(ks.until_window_closes()).to_stream().map(lambda w, s: (w.key, {"start": w.start, "sum": s}))
     .to("out-" + app_id))
config = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 500}
app = ks.KafkaStreams(b.build(), application_id=app_id, bootstrap_servers=bootstrap, default_key_serde="string",
                      default_value_serde="json", client_config=config, statestore_cache_max_bytes=int(cache),
                      processing_guarantee=guarantee,
                      **({"commit_interval_ms": int(commit)} if int(commit) > 0 else {}))
app.start()
app.wait_until_running(60)
gc_time.update(seconds=0.0, full=0)
started = time.monotonic()
thread = app.threads[0]
while thread.processed_total < int(total):
    if thread.error is not None:
        raise SystemExit(f"the app failed: {thread.error!r}")
    time.sleep(0.01)
print(json.dumps({"seconds": time.monotonic() - started, "busy": thread.process_time_s,
                  "gc": gc_time["seconds"], "full_gc": gc_time["full"]}))
app.stop()
"""


def write_input(bootstrap: str, workload: str, seed: int) -> int:
    """Writes the workload's input topic; returns how many records the app's thread will process."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    rng = random.Random(seed)
    topic = "sentences" if workload == "wordcount" else "events"
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the topic exists
    for future in admin.create_topics([NewTopic(topic, 4, 1)], operation_timeout=30).values():
        future.result()
    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 20, "queue.buffering.max.messages": 2_000_000}
    )
    if workload == "wordcount":
        vocabulary = [f"w{i}" for i in range(5000)]
        words = 0
        for i in range(60_000):
            n = rng.randint(4, 12)
            words += n
            producer.produce(topic, json.dumps(" ".join(rng.choices(vocabulary, k=n))).encode())
            if i % 5000 == 0:
                producer.poll(0)
        total = 60_000 + words
    else:
        base = 1_700_000_000_000 if workload == "window" else 0  # record timestamps over 100 s (0: now)
        for i in range(300_000):
            key = f"k{i % 5000}"
            value = json.dumps({"key": key, "ts": i, "amount": rng.randint(1, 100)}).encode()
            producer.produce(topic, value, key, timestamp=base + i // 3 if base else 0)
            if i % 5000 == 0:
                producer.poll(0)
        total = 300_000
    if producer.flush(60) != 0:
        raise RuntimeError("writing the input timed out")
    return total


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("a", help="checkout A (a directory holding kstream_nb/)")
    parser.add_argument("b", help="checkout B")
    parser.add_argument("--workload", choices=("wordcount", "filter", "window"), default="wordcount")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--cache-bytes", type=int, default=0, help="statestore_cache_max_bytes (default 0)")
    parser.add_argument("--commit-ms", type=int, default=0, help="commit_interval_ms (default: Kafka's 30 s)")
    parser.add_argument(
        "--guarantee",
        choices=("at_least_once", "exactly_once_v2"),
        default="at_least_once",
        help="processing_guarantee (exactly_once_v2 commits every 100 ms unless --commit-ms)",
    )
    args = parser.parse_args()
    roots = [str(Path(r).resolve()) for r in (args.a, args.b)]
    results: dict[str, list[dict[str, float]]] = {r: [] for r in roots}
    with tempfile.TemporaryDirectory() as tmp, running_kafka(Path(tmp) / "kafka") as broker:
        bootstrap = broker.bootstrap_servers
        total = write_input(bootstrap, args.workload, args.seed)
        for round_ in range(args.rounds):
            for i, root in enumerate(roots):
                run = subprocess.run(
                    [sys.executable, "-c", CHILD, root, args.workload, f"ab-{round_}-{i}", bootstrap, str(total),
                     str(args.cache_bytes), str(args.commit_ms), args.guarantee],
                    capture_output=True, text=True, timeout=600,
                )  # fmt: skip
                lines = [line for line in run.stdout.splitlines() if line.startswith("{")]
                if run.returncode != 0 or not lines:
                    print(f"{root}: run failed ({run.returncode}):\n{run.stderr[-3000:]}", file=sys.stderr)
                    return 1
                results[root].append(json.loads(lines[0]))
                print(f"round {round_} {'AB'[i]}: {results[root][-1]['seconds']:.2f} s", flush=True)
    medians = {r: statistics.median(x["seconds"] for x in results[r]) for r in roots}
    for label, root in zip("AB", roots, strict=True):
        busy, gc_s, full = (statistics.median(x[k] for x in results[root]) for k in ("busy", "gc", "full_gc"))
        rate = total / medians[root]
        print(
            f"{label} {root}: median {medians[root]:.2f} s ({rate:,.0f} records/s), busy {busy:.2f} s, "
            f"in GC {gc_s:.2f} s ({full:.0f} full collections)"
        )
    print(f"B/A time: {medians[roots[1]] / medians[roots[0]]:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
