"""One kstream_nb instance for ``bench_assignment.py``, in its own process, until SIGTERM (clean stop) or SIGKILL.

    python bench/assignment_instance.py BOOTSTRAP APP_ID TOPOLOGY INPUT OUTPUT STATE_DIR [--standbys N]

``TOPOLOGY``: ``wordcount`` (split sentences, repartition by word, count: two sub-topologies) or ``count``
(count per key of the input: one sub-topology). A pass-through fixed-key processor notes, per task
(``ProcessorContext.task_id``), the wall time of every record it sees: after the source in sub-topology 0
and after the count (each count update, the record cache being off) in the last sub-topology. Times are
kept as runs: a run ends when a task saw no record for ``GAP_S``.

Every 100 ms the process prints one line ``TICK {json}`` (flushed): ``t`` (wall time), ``state``, ``active``
and ``standby`` task ids of its stream threads, ``runs`` (the runs closed since the previous tick, per task),
``open`` (each task's current run), ``count`` (records seen per task since the start), ``restored`` (records
restored from changelogs) and ``applied`` (records applied to standby tasks). kstream_nb logs at INFO on
stderr (assignments, restorations).
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's kstream_nb and tests/

import kstream_nb as ks
from tests.kafka_broker import FAST_CLIENT_CONFIG

#: a task that saw no record for this long ends its run (the driver's gaps are exact above this)
GAP_S = 0.05


class Tracker:
    """Per task: records seen, the current run [first, last] and the runs closed since the last ``drain``."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.count: dict[str, int] = {}
        self.open: dict[str, list[float]] = {}
        self.closed: dict[str, list[list[float]]] = {}

    def saw(self, task: str) -> None:
        now = time.time()
        with self.lock:
            self.count[task] = self.count.get(task, 0) + 1
            run = self.open.get(task)
            if run is None:
                self.open[task] = [now, now]
            elif now - run[1] > GAP_S:
                self.closed.setdefault(task, []).append(run)
                self.open[task] = [now, now]
            else:
                run[1] = now

    def drain(self) -> tuple[dict[str, list[list[float]]], dict[str, list[float]], dict[str, int]]:
        with self.lock:
            closed, self.closed = self.closed, {}
            return closed, {t: list(r) for t, r in self.open.items()}, dict(self.count)


TRACKER = Tracker()


class Track(ks.FixedKeyProcessor):
    """Passes every record on, noting its task and the wall time."""

    def process(self, record: ks.FixedKeyRecord) -> None:
        TRACKER.saw(self.context.task_id)
        self.context.forward(record)


def topology(kind: str, source: str, sink: str) -> ks.Topology:
    b = ks.StreamsBuilder()
    stream = b.stream(source).process_values(Track)
    if kind == "wordcount":
        grouped = stream.flat_map_values(str.split).group_by(lambda k, w: w)
    else:
        grouped = stream.group_by_key()
    grouped.count(store="counts").to_stream().process_values(Track).to(sink)
    return b.build()


def tick(app: ks.KafkaStreams) -> dict[str, Any]:
    """What the driver reads every 100 ms (see the module docstring)."""
    closed, open_, count = TRACKER.drain()
    threads = list(app.threads)
    return {
        "t": time.time(),
        "state": app.state.value,
        "active": sorted(tid for th in threads for tid in list(th.tasks)),
        "standby": sorted(tid for th in threads for tid in list(th.standbys)),
        "runs": closed,
        "open": open_,
        "count": count,
        "restored": sum(th.restored_records for th in threads),
        "applied": sum(s.applied for th in threads for s in list(th.standbys.values())),
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    for name in ("bootstrap", "app_id", "topology", "input", "output", "state_dir"):
        parser.add_argument(name)
    parser.add_argument("--standbys", type=int, default=0)
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.WARNING, format="%(asctime)s %(process)d %(threadName)s %(levelname)s %(name)s %(message)s"
    )
    logging.getLogger("kstream_nb").setLevel(logging.INFO)
    app = ks.KafkaStreams(
        topology(args.topology, args.input, args.output),
        application_id=args.app_id,
        bootstrap_servers=args.bootstrap,
        commit_interval_ms=100,
        num_standby_replicas=args.standbys,
        state_dir=args.state_dir,
        client_config=dict(FAST_CLIENT_CONFIG),
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    app.start()
    while not stop.wait(0.1):
        try:
            line = json.dumps(tick(app))
        except RuntimeError:  # a thread's task dict changed while it was read: the next tick has it
            continue
        print("TICK " + line, flush=True)
        if app.state in (ks.State.ERROR, ks.State.NOT_RUNNING):
            print(f"FAILED {app.error}", flush=True)
            return 1
    app.stop(timeout=30)
    print("STOPPED", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
