"""Shared by the peer runners (stdlib only: each runner runs in its own venv).

A runner is started by ``bench/bench_peers.py`` as
``python <runner> --workload W --bootstrap HOST:PORT --input T --output T --group G --config JSON ...``.
It builds its pipeline, prints ``STARTED <time.monotonic()>`` on stdout right before it starts
processing, then runs until the driver stops it (the driver watches the output topic and times it). A
runner whose client has states also prints ``RUNNING <time.monotonic()>`` when it first reaches RUNNING
(group joined, partitions assigned). The Kafka Streams peer (``kafka-streams/``, Java) takes the same
arguments and prints the same lines.

Workloads, over the data that ``bench_peers.py`` writes:

- ``filter``: events ``{"key", "ts", "amount"}``; keep ``amount > threshold``; write
  ``{**event, "doubled": amount * 2}`` keyed by the event key;
- ``wordcount``: sentences (JSON strings); split on whitespace, repartition by word, count, write every
  update as key=word, value=count (JSON int);
- ``window``: events; 10 s tumbling event-time windows per key (event time = record timestamp = ``ts``),
  5 s grace, sum of ``amount``, final results only, written as key=event key,
  value ``{"start": window start ms, "sum": sum}``. Records keyed ``__flush__`` (one per partition, 60 s
  after the last event) only advance stream time.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

WORKLOADS = ("filter", "wordcount", "window")
FLUSH_KEY = "__flush__"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--workload", choices=WORKLOADS, required=True)
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--input", required=True)
    p.add_argument("--output", required=True)
    p.add_argument("--group", required=True)
    p.add_argument("--config", default="{}", help="extra consumer settings (JSON object)")
    p.add_argument("--state-dir", required=True)
    p.add_argument("--threshold", type=int, default=50)
    p.add_argument("--window-ms", type=int, default=10_000)
    p.add_argument("--grace-ms", type=int, default=5_000)
    p.add_argument("--store", default="in_memory", help="kstream_nb only: default_dsl_store")
    p.add_argument("--guarantee", default="at_least_once", help="kstream_nb only: processing_guarantee")
    p.add_argument("--style", default="functions", choices=("functions", "columns"), help="kstream_nb only")
    p.add_argument("--commit-ms", type=int, default=None, help="kstream_nb only: commit_interval_ms")
    args = p.parse_args(argv)
    args.config = json.loads(args.config)
    return args


def started() -> None:
    """Tells the driver that processing starts now (the clock both use is CLOCK_MONOTONIC)."""
    print(f"STARTED {time.monotonic():.6f}", flush=True)


def running() -> None:
    """Tells the driver that the client reached RUNNING (its group join is over)."""
    print(f"RUNNING {time.monotonic():.6f}", flush=True)


def idle_forever(check=None) -> None:
    """Sleeps until killed; ``check()`` returning a message ends the process with an error."""
    while True:
        time.sleep(0.2)
        if check is not None and (problem := check()):
            print(problem, file=sys.stderr, flush=True)
            sys.exit(1)
