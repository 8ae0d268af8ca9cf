"""Task assignment on Kafka as it is today: pauses during a join and a leave, failover with and without a
standby, throughput of 1, 2 and 3 instances (issue 25, item 6; docs/design/task_assignment_on_kafka.md §4).

    .venv/bin/python bench/bench_assignment.py --scenario all --out /tmp/assignment.json
    .venv/bin/python bench/bench_assignment.py --scenario pause --quick

One Apache Kafka 4.4 broker (``tests/kafka_broker.py``: ``kstream_nb.cluster.local_kafka`` in a temporary
directory); every instance is a process of ``bench/assignment_instance.py`` (one stream thread, 100 ms
commits, at_least_once, record cache off, the tests' 6 s session timeout), which prints every 100 ms, per
task, when it processed records (runs of records less than 50 ms apart) and which tasks it holds.

- ``pause``: word count over 8 partitions (16 tasks: 8 split, 8 count), sentences produced by this process
  at a fixed rate; 2 instances, a 3rd joins, one of the first leaves (SIGTERM). Per event: the longest gap
  in processing of the tasks that stayed with their instance and of those that moved, and the longest
  window in which no task processed anything; the same before the join ("steady") as the noise floor.
- ``failover``: a count per key over 8 partitions, 200,000 keys loaded first; 2 instances with
  ``num_standby_replicas`` 0, then 1; live input at a fixed rate; SIGKILL of the instance with more tasks.
  Reports kill -> the survivor holds the moved tasks, kill -> each moved task's first count update, and the
  records the survivor restored from the changelogs (and the seconds its restore log lines give).
- ``scale``: 1,000,000 records (10,000 keys) in 12 partitions written first; the count per key with 1, 2
  and 3 instances started together: spawn -> the group's committed offsets reach the end (lag 0);
  records/s, the ratio to 1 instance, and CPU seconds (utime+stime from /proc/PID/stat) of each instance
  and of the broker over the run, and the CPU seconds the whole machine was busy (/proc/stat: what else ran).

Prints the load average before and after (other work may share the machine). This prints numbers; it is
not a test.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import shlex
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.kafka_broker import running_kafka  # noqa: E402

INSTANCE = Path(__file__).resolve().parent / "assignment_instance.py"
Run = list[float]  # [first, last] wall time of a run of records


@dataclass
class Sizes:
    phase_s: float = 20.0
    rate: int = 2000
    failover_keys: int = 200_000
    failover_rate: int = 1000
    scale_records: int = 1_000_000


QUICK = Sizes(phase_s=8.0, rate=1000, failover_keys=20_000, failover_rate=500, scale_records=100_000)


def cpu_seconds(pid: int) -> float:
    """utime + stime of a live process (all threads), from /proc/PID/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def machine_busy_seconds() -> float:
    """CPU seconds all cores spent outside idle and iowait since boot (/proc/stat), to see what else ran."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(fields[:8]) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


class Instance:
    """One ``assignment_instance.py`` process and what its ticks said."""

    def __init__(self, name: str, args: list[str], log_dir: Path) -> None:
        self.name = name
        self.log_path = log_dir / f"{name}.log"
        self.ticks: list[dict[str, Any]] = []
        self.closed: dict[str, list[Run]] = {}
        self.open: dict[str, Run] = {}
        self.failed: str | None = None
        self.ended: float | None = None  # when its stdout closed: it holds nothing after that
        with self.log_path.open("w") as log:
            self.proc = subprocess.Popen(
                [sys.executable, str(INSTANCE), *args], stdout=subprocess.PIPE, stderr=log, text=True
            )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("TICK "):
                tick = json.loads(line[5:])
                for task, runs in tick["runs"].items():
                    self.closed.setdefault(task, []).extend(runs)
                self.open.update(tick["open"])
                self.ticks.append(tick)
            elif line.startswith("FAILED"):
                self.failed = line.strip()
        self.ended = time.time()

    @property
    def last(self) -> dict[str, Any]:
        return (
            self.ticks[-1]
            if self.ticks
            else {
                "active": [],
                "standby": [],
                "count": {},
                "restored": 0,
                "applied": 0,
                "state": "STARTING",
                "t": 0.0,
            }
        )

    def active_at(self, t: float) -> set[str]:
        """The active tasks of the last tick at or before ``t`` (none once the process has ended)."""
        if self.ended is not None and t >= self.ended:
            return set()
        held: list[str] = []
        for tick in self.ticks:
            if tick["t"] > t:
                break
            held = tick["active"]
        return set(held)

    def runs(self, task: str) -> list[Run]:
        return [*self.closed.get(task, []), *([self.open[task]] if task in self.open else [])]

    def cpu(self) -> float:
        return cpu_seconds(self.proc.pid)

    def check(self) -> None:
        if self.failed or self.proc.poll() is not None:
            raise RuntimeError(
                f"instance {self.name} ended ({self.failed or self.proc.returncode}): {self.log_path}"
            )

    def stop(self, timeout: float = 30) -> None:
        """SIGTERM (a clean stop, leaving the group), SIGKILL if it has not ended within ``timeout``."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._reader.join(5)


@contextmanager
def instances() -> Iterator[list[Instance]]:
    """A list to add instances to; every one still running is stopped when the block ends, however it ends."""
    started: list[Instance] = []
    try:
        yield started
    finally:
        for inst in started:
            inst.stop()


class RateProducer(threading.Thread):
    """Produces ``make(i) -> (partition, key, value)`` at ``rate`` records/s until ``stop()``."""

    def __init__(self, bootstrap: str, topic: str, rate: int, make: Callable[[int], tuple[int, Any, Any]]):
        super().__init__(daemon=True)
        from confluent_kafka import Producer

        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        self.topic, self.rate, self.make = topic, rate, make
        self.produced = 0
        self._stop_event = threading.Event()

    def run(self) -> None:
        began = time.monotonic()
        while not self._stop_event.wait(0.01):
            due = int((time.monotonic() - began) * self.rate)
            while self.produced < due:
                partition, key, value = self.make(self.produced)
                self.producer.produce(self.topic, value, key, partition=partition)
                self.produced += 1
            self.producer.poll(0)
        self.producer.flush(30)

    def stop(self) -> None:
        self._stop_event.set()
        self.join(60)


def create_topics(bootstrap: str, topics: dict[str, int]) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics(
        [NewTopic(t, n, 1) for t, n in topics.items()], operation_timeout=30
    ).values():
        future.result()


def write_keyed(bootstrap: str, topic: str, partitions: int, n: int, keys: int) -> None:
    """``n`` records ``k<i % keys>`` -> 1, key ``k<j>`` always in partition ``j % partitions``."""
    from confluent_kafka import Producer

    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 20, "queue.buffering.max.messages": 2_000_000}
    )
    for i in range(n):
        j = i % keys
        producer.produce(topic, b"1", f"k{j}".encode(), partition=j % partitions)
        if i % 10_000 == 0:
            producer.poll(0)
    if producer.flush(120) != 0:
        raise RuntimeError(f"writing {n} records to {topic} timed out")


@contextmanager
def lag_probe(bootstrap: str, group: str, topic: str, partitions: int) -> Iterator[Callable[[], int]]:
    """A function giving end offsets minus ``group``'s committed offsets, summed over ``topic``'s partitions
    (one consumer that never joins the group)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    tps = [TopicPartition(topic, p) for p in range(partitions)]

    def lag() -> int:
        committed = {tp.partition: tp.offset for tp in consumer.committed(tps, timeout=10)}
        ends = {tp.partition: consumer.get_watermark_offsets(tp, timeout=10, cached=False)[1] for tp in tps}
        return sum(ends[p] - max(committed[p], 0) for p in ends)

    try:
        yield lag
    finally:
        consumer.close()


def wait_for(what: str, condition: Callable[[], bool], timeout: float, running: list[Instance]) -> float:
    """Polls ``condition`` every 100 ms; returns the wall time it held; fails naming ``what`` on timeout."""
    deadline = time.monotonic() + timeout
    while not condition():
        for inst in running:
            inst.check()
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.1)
    return time.time()


def instance_args(bootstrap: str, app_id: str, kind: str, topic: str, out: str, state: Path, standbys: int = 0):
    return [bootstrap, app_id, kind, topic, out, str(state), "--standbys", str(standbys)]


# ---- pause ----------------------------------------------------------------------------------------


def merged(runs: list[Run]) -> list[Run]:
    """Runs sorted and overlapping ones joined."""
    out: list[Run] = []
    for s, e in sorted(runs):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def longest_gap(runs: list[Run], lo: float, hi: float) -> float:
    """The longest time between runs that overlaps [lo, hi]; a task that processed nothing after its last
    run before ``hi`` counts up to ``hi``."""
    runs = merged(runs)
    gaps = [(a[1], b[0]) for a, b in itertools.pairwise(runs)] + ([(runs[-1][1], hi)] if runs else [(lo, hi)])
    return max([min(end, hi) - max(start, lo) for start, end in gaps if end > lo and start < hi] + [0.0])


def pause_scenario(bootstrap: str, sizes: Sizes, log_dir: Path, state_dir: Path) -> dict[str, Any]:
    topic, out, app_id, partitions = "pause-sentences", "pause-counts", "bench-pause", 8
    create_topics(bootstrap, {topic: partitions, out: partitions})
    rng = random.Random(25)
    vocabulary = [f"w{i}" for i in range(1000)]

    def sentence(i: int) -> tuple[int, Any, Any]:
        return i % partitions, None, json.dumps(" ".join(rng.choices(vocabulary, k=4))).encode()

    producer = RateProducer(bootstrap, topic, sizes.rate, sentence)
    producer.start()
    try:
        with instances() as running:
            for name in ("A", "B"):
                args = instance_args(bootstrap, app_id, "wordcount", topic, out, state_dir / name)
                running.append(Instance(name, args, log_dir))
            every = {f"{s}_{p}" for s in (0, 1) for p in range(partitions)}
            t_ready = wait_for(
                "2 instances processing every task",
                lambda: {t for i in running for t in i.last["count"]} >= every,
                120,
                running,
            )
            time.sleep(sizes.phase_s)
            t_join = time.time()
            running.append(
                Instance("C", instance_args(bootstrap, app_id, "wordcount", topic, out, state_dir / "C"), log_dir)
            )
            time.sleep(sizes.phase_s)
            t_leave = time.time()
            running[0].stop()
            time.sleep(sizes.phase_s)
            t_end = time.time()
            for inst in running[1:]:
                inst.check()
            return {
                "rate": sizes.rate,
                "phase_s": sizes.phase_s,
                "steady": event_gaps(running, every, t_ready, t_join, None),
                "join": event_gaps(running, every, t_join, t_leave, t_join),
                "leave": event_gaps(running, every, t_leave, t_end, t_leave),
            }
    finally:
        producer.stop()


def event_gaps(running: list[Instance], tasks: set[str], lo: float, hi: float, event: float | None) -> dict:
    """Gaps in [lo, hi]: tasks that kept their instance vs moved ones (owner just before ``event`` vs at
    ``hi``), and the longest window with no task processing."""

    def owner(task: str, t: float) -> str | None:
        return next((i.name for i in running if task in i.active_at(t)), None)

    runs = {t: [r for i in running for r in i.runs(t)] for t in tasks}
    gaps = {t: longest_gap(runs[t], lo, hi) for t in tasks}
    moved = {t for t in tasks if event is not None and owner(t, event) != owner(t, hi - 0.2)}
    stayed = tasks - moved
    return {
        "moved_tasks": sorted(moved),
        "max_gap_stayed_s": max((gaps[t] for t in stayed), default=None),
        "max_gap_moved_s": max((gaps[t] for t in moved), default=None),
        "no_task_processing_s": longest_gap([r for rs in runs.values() for r in rs], lo, hi),
        "owners_after": {i.name: sorted(i.active_at(hi - 0.2)) for i in running},
    }


# ---- failover ----------------------------------------------------------------------------------------


def failover_scenario(bootstrap: str, sizes: Sizes, log_dir: Path, state_dir: Path) -> dict[str, Any]:
    topic, partitions, keys = "failover-events", 8, sizes.failover_keys
    create_topics(bootstrap, {topic: partitions, "failover-counts": partitions})
    write_keyed(bootstrap, topic, partitions, keys, keys)
    return {f"standbys={n}": failover_run(bootstrap, sizes, log_dir, state_dir, topic, n) for n in (0, 1)}


def failover_run(bootstrap: str, sizes: Sizes, log_dir: Path, state_dir: Path, topic: str, standbys: int) -> dict:
    app_id, partitions, keys = f"bench-failover-{standbys}", 8, sizes.failover_keys
    rng = random.Random(standbys)

    def event(_: int) -> tuple[int, Any, Any]:
        j = rng.randrange(keys)
        return j % partitions, f"k{j}".encode(), b"1"

    with instances() as running, lag_probe(bootstrap, app_id, topic, partitions) as lag:
        for name in ("A", "B"):
            args = instance_args(
                bootstrap, app_id, "count", topic, "failover-counts", state_dir / app_id / name, standbys
            )
            running.append(Instance(f"{name}{standbys}", args, log_dir))
        t0 = time.time()
        wait_for("the loaded keys counted", lambda: lag() == 0, 300, running)
        loaded = time.time() - t0
        if standbys:
            wait_for(
                "the standbys caught up", lambda: sum(i.last["applied"] for i in running) >= keys, 120, running
            )
        producer = RateProducer(bootstrap, topic, sizes.failover_rate, event)
        producer.start()
        try:
            time.sleep(2)
            victim = max(running, key=lambda i: len(i.last["active"]))
            survivor = next(i for i in running if i is not victim)
            moved = set(victim.last["active"])
            restored_before = survivor.last["restored"]
            log_offset = survivor.log_path.stat().st_size
            t_kill = time.time()
            victim.proc.kill()

            def first_after(task: str) -> float | None:
                return min((r[0] for r in survivor.runs(task) if r[0] > t_kill), default=None)

            wait_for("the moved tasks' first output", lambda: all(first_after(t) for t in moved), 180, [survivor])
            held = next((t["t"] for t in survivor.ticks if t["t"] > t_kill and moved <= set(t["active"])), None)
            firsts = {t: (first_after(t) or 0.0) - t_kill for t in sorted(moved)}
        finally:
            producer.stop()
        restore_lines = [
            line.split(" INFO ", 1)[1]
            for line in survivor.log_path.read_text()[log_offset:].splitlines()
            if ": restored " in line
        ]
        return {
            "standbys": standbys,
            "keys": keys,
            "load_counted_s": loaded,
            "moved_tasks": sorted(moved),
            "kill_to_reassigned_s": None if held is None else held - t_kill,
            "kill_to_first_output_s": {
                "min": min(firsts.values()),
                "max": max(firsts.values()),
                "per_task": firsts,
            },
            "records_restored": survivor.last["restored"] - restored_before,
            "restore_s": sum(float(line.rsplit(" in ", 1)[1].rstrip("s")) for line in restore_lines),
            "restore_log": restore_lines,
        }


# ---- scale -------------------------------------------------------------------------------------------


def scale_scenario(bootstrap: str, sizes: Sizes, log_dir: Path, state_dir: Path, broker_pid: int) -> dict:
    topic, partitions, n = "scale-events", 12, sizes.scale_records
    create_topics(bootstrap, {topic: partitions, "scale-counts": partitions})
    t0 = time.monotonic()
    write_keyed(bootstrap, topic, partitions, n, 10_000)
    results: dict[str, Any] = {"records": n, "partitions": partitions, "written_s": time.monotonic() - t0}
    for count in (1, 2, 3):
        app_id = f"bench-scale-{count}"
        with instances() as running, lag_probe(bootstrap, app_id, topic, partitions) as lag:
            broker_cpu, machine_cpu = cpu_seconds(broker_pid), machine_busy_seconds()
            for k in range(count):
                args = instance_args(
                    bootstrap, app_id, "count", topic, "scale-counts", state_dir / app_id / str(k)
                )
                running.append(Instance(f"S{count}{k}", args, log_dir))
            spawned = time.time()
            done = wait_for(f"lag 0 with {count} instances", lambda: lag() == 0, 900, running)
            cpu = [i.cpu() for i in running]
            broker_used = cpu_seconds(broker_pid) - broker_cpu
            machine_used = machine_busy_seconds() - machine_cpu
            first = min(r[0] for i in running for t in i.closed.keys() | i.open.keys() for r in i.runs(t))
        seconds = done - spawned
        results[f"instances={count}"] = {
            "seconds": seconds,
            "records_per_s": n / seconds,
            "from_first_record_s": done - first,
            "instance_cpu_s": cpu,
            "broker_cpu_s": broker_used,
            "machine_busy_cpu_s": machine_used,
        }
    base = results["instances=1"]["records_per_s"]
    for count in (1, 2, 3):
        results[f"instances={count}"]["ratio_to_1"] = results[f"instances={count}"]["records_per_s"] / base
    return results


# ---- report ------------------------------------------------------------------------------------------


def fmt(x: Any) -> str:
    return "-" if x is None else f"{x:.2f}" if isinstance(x, float) else str(x)


def print_tables(results: dict[str, Any]) -> None:
    if "pause" in results:
        p = results["pause"]
        print(
            f"\npause: word count, 8 partitions (16 tasks), {p['rate']} sentences/s, "
            f"{p['phase_s']:.0f} s per phase"
        )
        print(
            "| event | tasks moved | longest gap, stayed (s) | longest gap, moved (s) | no task processing (s) |"
        )
        print("| --- | ---: | ---: | ---: | ---: |")
        for event in ("steady", "join", "leave"):
            e = p[event]
            print(
                f"| {event} | {len(e['moved_tasks'])} | {fmt(e['max_gap_stayed_s'])} "
                f"| {fmt(e['max_gap_moved_s'])} | {fmt(e['no_task_processing_s'])} |"
            )
    if "failover" in results:
        print("\nfailover: count per key, 8 partitions, SIGKILL of the instance with more tasks")
        print(
            "| standbys | keys | tasks moved | kill -> reassigned (s) | kill -> first output (s, min-max) "
            "| records restored | restoring (s, sum of the log lines) |"
        )
        print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        for f in results["failover"].values():
            first = f["kill_to_first_output_s"]
            print(
                f"| {f['standbys']} | {f['keys']:,} | {len(f['moved_tasks'])} | {fmt(f['kill_to_reassigned_s'])} "
                f"| {fmt(first['min'])}-{fmt(first['max'])} | {f['records_restored']:,} | {fmt(f['restore_s'])} |"
            )
    if "scale" in results:
        s = results["scale"]
        print(f"\nscale: count per key, {s['records']:,} records in {s['partitions']} partitions")
        print(
            "| instances | s to lag 0 | s from 1st record | records/s | ratio to 1 | instance CPU s "
            "| broker CPU s | machine busy CPU s |"
        )
        print("| ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: |")
        for count in (1, 2, 3):
            r = s[f"instances={count}"]
            cpu = " + ".join(f"{c:.1f}" for c in r["instance_cpu_s"])
            print(
                f"| {count} | {r['seconds']:.1f} | {r['from_first_record_s']:.1f} | {r['records_per_s']:,.0f} "
                f"| {r['ratio_to_1']:.2f} | {cpu} "
                f"| {r['broker_cpu_s']:.1f} | {r.get('machine_busy_cpu_s', 0):.1f} |"
            )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenario", choices=("pause", "failover", "scale", "all"), default="all")
    parser.add_argument("--out", help="write the results as JSON to this file")
    parser.add_argument("--quick", action="store_true", help="smaller sizes (about 2 minutes in all)")
    parser.add_argument("--logs", help="directory for the instances' logs (default: a temp dir)")
    args = parser.parse_args(argv)
    sizes = QUICK if args.quick else Sizes()
    scenarios = ("pause", "failover", "scale") if args.scenario == "all" else (args.scenario,)
    log_dir = Path(args.logs or tempfile.mkdtemp(prefix="bench-assignment-"))
    log_dir.mkdir(parents=True, exist_ok=True)
    load_before = os.getloadavg()
    results: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "command": shlex.join([Path(sys.executable).name, *sys.argv]),
        "sizes": vars(sizes),
    }
    print(f"load average before: {'/'.join(f'{x:.2f}' for x in load_before)}; logs in {log_dir}", flush=True)
    t_all = time.monotonic()
    with (
        tempfile.TemporaryDirectory(prefix="bench-assignment-") as tmp,
        running_kafka(Path(tmp) / "kafka") as broker,
    ):
        bootstrap, broker_pid = broker.bootstrap_servers, broker.status().pid
        assert broker_pid is not None
        for scenario in scenarios:
            print(f"==> {scenario}", flush=True)
            state = Path(tmp) / f"state-{scenario}"
            if scenario == "pause":
                results["pause"] = pause_scenario(bootstrap, sizes, log_dir, state)
            elif scenario == "failover":
                results["failover"] = failover_scenario(bootstrap, sizes, log_dir, state)
            else:
                results["scale"] = scale_scenario(bootstrap, sizes, log_dir, state, broker_pid)
    load_after = os.getloadavg()
    results["load_before"], results["load_after"] = load_before, load_after
    results["seconds"] = time.monotonic() - t_all
    print_tables(results)
    print(
        f"\nload average (1/5/15 min) {'/'.join(f'{x:.2f}' for x in load_before)} before, "
        f"{'/'.join(f'{x:.2f}' for x in load_after)} after; whole run {results['seconds']:.0f} s; "
        f"{os.cpu_count()} cores; logs in {log_dir}"
    )
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
