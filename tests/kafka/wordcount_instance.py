"""One word-count app instance against a Kafka broker, in its own process, until it is killed.

    python wordcount_instance.py BOOTSTRAP APPLICATION_ID INPUT OUTPUT GUARANTEE STATE_DIR DSL_STORE TOPOLOGY
        [CRASH]

``TOPOLOGY``: ``wordcount`` (every count update) or ``window`` (final counts per word and 10 s window of
event time, through ``suppress(until_window_closes())``; the grace outlasts the input's time span).

Used by the fault tests (``test_exactly_once_kafka.py``, ``test_task_assignment_kafka.py``), which start several
of these and SIGKILL them at random moments. Prints ``STATE <new>`` on every state change (flushed at once) and
logs kstream_nb at INFO (assignments, restorations, warnings; with the process id); SIGTERM stops it cleanly,
SIGUSR1 prints every thread's stack and where each stream thread stands. A failed stream thread is replaced (a
commit that loses a race with a rebalance fails the thread).

``CRASH``: ``before-commit:N`` or ``after-commit:N`` ends the process (``os._exit``, as a SIGKILL would)
at its N-th transaction commit that carries consumed offsets: right before the producer asks the broker to
commit (the transaction is open, its records and offsets sent), or right after the broker confirmed it,
before anything else the stream thread does for that commit.
"""

from __future__ import annotations

import faulthandler
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: tests.kafka_broker

import kstream_nb as ks
from tests.kafka_broker import FAST_CLIENT_CONFIG


def word_count(source: str, sink: str) -> ks.Topology:
    b = ks.StreamsBuilder()
    counts = b.stream(source).flat_map_values(str.split).group_by(lambda k, w: w).count(store="counts")
    counts.to_stream().to(sink)
    return b.build()


WINDOW_MS = 10_000
#: longer than the fault test's input spans in event time: records from upstream tasks that lag behind are
#: never late, so the final counts are exact whatever the interleaving
GRACE_MS = 1_000_000


def final_window_counts(source: str, sink: str) -> ks.Topology:
    b = ks.StreamsBuilder()
    (
        b.stream(source)
        .flat_map_values(str.split)
        .group_by(lambda k, w: w)
        .windowed_by(ks.TimeWindows.of(WINDOW_MS).grace(GRACE_MS))
        .count(store="counts")
        .suppress(ks.until_window_closes())
        .to_stream()
        .map(lambda w, n: (f"{w.key}@{w.start}", n))
        .to(sink)
    )
    return b.build()


TOPOLOGIES = {"wordcount": word_count, "window": final_window_counts}


def crash_at(spec: str) -> None:
    """Makes the process end (exit code 9, no cleanup) at the commit ``spec`` names (see the docstring)."""
    from kstream_nb.runtime.stream_thread import StreamThread

    where, _, nth = spec.partition(":")
    if where not in ("before-commit", "after-commit"):
        raise SystemExit(f"unknown crash point {spec!r}")
    left = [int(nth)]
    lock = threading.Lock()
    commit = StreamThread._commit_transaction

    def exit_now(*_: Any) -> None:
        print(f"CRASH {spec}", flush=True)
        os._exit(9)

    def crashing_commit(self: Any, offsets: Any, *args: Any) -> None:
        if offsets:
            with lock:
                left[0] -= 1
                now = left[0] == 0
            if now and where == "before-commit":
                self.producer.commit_transaction = exit_now  # the transaction stays open
            elif now:
                confirm = self.producer.commit_transaction

                def confirm_then_exit(*a: Any) -> None:
                    confirm(*a)  # the broker confirmed the commit: nothing else of this commit runs
                    exit_now()

                self.producer.commit_transaction = confirm_then_exit
        commit(self, offsets, *args)

    StreamThread._commit_transaction = crashing_commit  # type: ignore[method-assign]


def print_threads(app: ks.KafkaStreams) -> None:
    """Every thread's stack, and what each stream thread holds and where it stands (a stalled test asks)."""
    faulthandler.dump_traceback(all_threads=True)
    for t in app.threads:
        tasks = {
            tid: {"buffered": task.buffered(), "consumed": {str(tp): o for tp, o in task.consumed.items()}}
            for tid, task in t.tasks.items()
        }
        print(
            f"THREAD {t.name} state={t.state} polls={t.poll_total} commits={t.commit_total} "
            f"processed={t.processed_total} committing={t._committing} corrupted={t._transaction_corrupted} "
            f"broker_away_since={t.broker_unreachable_since} "
            f"assignment={sorted(map(str, t.consumer.assignment()))} "
            f"paused={sorted(map(str, t.consumer.paused()))} tasks={tasks}",
            flush=True,
        )


def main(argv: list[str]) -> int:
    bootstrap, application_id, source, sink, guarantee, state_dir, dsl_store, topology = argv[:8]
    if len(argv) > 8:
        crash_at(argv[8])
    app = ks.KafkaStreams(
        TOPOLOGIES[topology](source, sink),
        application_id=application_id,
        bootstrap_servers=bootstrap,
        processing_guarantee=guarantee,
        commit_interval_ms=100,
        poll_ms=20,
        state_dir=state_dir,
        default_dsl_store=dsl_store,
        client_config=dict(FAST_CLIENT_CONFIG),
    )
    logging.basicConfig(
        level=logging.WARNING, format="%(asctime)s %(process)d %(threadName)s %(levelname)s %(name)s %(message)s"
    )
    logging.getLogger("kstream_nb").setLevel(logging.INFO)
    app.set_state_listener(lambda new, old: print(f"STATE {new.value}", flush=True))
    app.set_uncaught_exception_handler(lambda error: ks.ThreadFailureResponse.REPLACE_THREAD)
    signal.signal(signal.SIGUSR1, lambda *_: print_threads(app))
    return run_until_sigterm(app)


def run_until_sigterm(app: ks.KafkaStreams, started: Callable[[], None] | None = None) -> int:
    """Starts ``app`` and runs it until SIGTERM (then stops it cleanly: 0) or until it fails (``FAILED``: 1);
    ``started`` runs right after ``start()``."""
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    app.start()
    if started is not None:
        started()
    while not stop.wait(0.5):
        if app.state in (ks.State.ERROR, ks.State.NOT_RUNNING):
            print(f"FAILED {app.error}", flush=True)
            return 1
    app.stop(timeout=30)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
