"""Fault tests on Apache Kafka: word count with two app instances in separate processes, one of them
killed with SIGKILL at random moments (inside a transaction's commit too) and restarted, three times.

Under ``exactly_once_v2`` the output topic and the changelog, read with read_committed, hold exactly one
update per word occurrence and the exact final counts: no loss, no duplicate. The counts live in RocksDB
there, each instance with its own state directory: a killed instance finds no checkpoint and must wipe
the store (it may hold writes of the aborted transaction) before restoring it. Under ``at_least_once``
(in-memory stores) nothing is lost; the test prints how many duplicate updates it saw. A third run counts
words per 10 s window of event time with final results only (``suppress``): under ``exactly_once_v2`` each
window's count arrives once and exact.

Random kills rarely land in the few milliseconds between two steps of a commit, so two more runs crash an
instance at a chosen point of its commit (``wordcount_instance.py``'s CRASH): with the transaction open and
everything sent (Kafka aborts it when the restarted producer registers its transactional id again), and
right after the broker confirmed it (the consumed offsets must have been committed in it).

Each instance is ``wordcount_instance.py``. ``KSTREAM_FAULT_N`` overrides the number of sentences,
``KSTREAM_FAULT_KILLS`` the number of kills. Kills are placed by what the split has written to the
repartition topic, a random share of the words each. If the instances stop making progress, the failure
shows the offsets per partition and each instance's thread stacks and tasks.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CKTopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

import kstream_nb as ks
from kstream_nb.cluster import connect
from kstream_nb.cluster.base import TopicSpec
from kstream_nb.cluster.partitioner import default_partition
from kstream_nb.cluster.records import TopicPartition
from kstream_nb.cluster.serde_specs import serde_from
from tests.kafka.wordcount_instance import GRACE_MS, WINDOW_MS

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

RUNNER = Path(__file__).parent / "wordcount_instance.py"
ROOT = Path(__file__).resolve().parents[2]
N = int(os.environ.get("KSTREAM_FAULT_N", "200000"))
KILLS = int(os.environ.get("KSTREAM_FAULT_KILLS", "3"))
PARTITIONS = 4
WORDS = [f"w{i}" for i in range(50)]


def sentences(n: int) -> list[str]:
    rng = np.random.default_rng(7)
    return [" ".join(rng.choice(WORDS, 4)) for _ in range(n)]


class Instance:
    """One app instance process; its output goes to ``log`` (appended across restarts)."""

    def __init__(self, args: list[str], log: Path) -> None:
        self.args = args
        self.log = log
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self, crash: str | None = None) -> None:
        """Starts the process; ``crash`` (``before-commit:N``, ``after-commit:N``) makes it end at that point."""
        path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
        env = {**os.environ, "PYTHONPATH": path}
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                [sys.executable, str(RUNNER), *self.args, *([crash] if crash else [])],
                stdout=out, stderr=subprocess.STDOUT, env=env,
            )  # fmt: skip
        self.starts += 1

    def running_count(self) -> int:
        return self.log.read_text(errors="replace").count("STATE RUNNING") if self.log.exists() else 0

    def wait_running(self, count: int, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while self.running_count() < count:
            assert self.process is not None
            if self.process.poll() is not None:
                pytest.fail(f"instance exited ({self.process.returncode}):\n{self.log.read_text()[-3000:]}")
            if time.monotonic() > deadline:
                pytest.fail(f"instance not RUNNING after {timeout}s:\n{self.log.read_text()[-3000:]}")
            time.sleep(0.05)

    def kill(self) -> None:
        """SIGKILL, wherever the instance is."""
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)

    def wait_crashed(self, timeout: float = 120.0) -> None:
        """Waits until the instance ended at its crash point (``start(crash=...)``)."""
        assert self.process is not None
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            pytest.fail(
                f"the instance did not reach its crash point in {timeout}s:\n{self.log.read_text()[-3000:]}"
            )
        assert "CRASH " in self.log.read_text(errors="replace"), self.log.read_text()[-3000:]

    def dump_stacks(self) -> None:
        """Has a running instance write every thread's stack and state to its log (SIGUSR1, see the runner)."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGUSR1)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)


def progress(admin: Any, group: str, topics: list[str]) -> tuple[int, int]:
    """(records committed by the group, records in the topics) over the topics' partitions."""
    tps = [TopicPartition(t, p) for t in topics for p in range(admin.partition_count(t) or 0)]
    ends = admin.end_offsets(tps)
    committed = admin.group_offsets(group)
    return sum(min(committed.get(tp, 0), ends[tp]) for tp in tps), sum(ends.values())


def stall_report(admin: Any, group: str, topics: list[str], instances: list[Instance]) -> str:
    """Committed and end offsets per partition, and each instance's thread stacks and log tail: what a test
    that saw no progress prints."""
    tps = [TopicPartition(t, p) for t in topics for p in range(admin.partition_count(t) or 0)]
    ends = admin.end_offsets(tps)
    committed = admin.group_offsets(group)
    offsets = ", ".join(f"{tp.topic}[{tp.partition}] {committed.get(tp)}/{ends[tp]}" for tp in tps)
    for instance in instances:
        instance.dump_stacks()
    time.sleep(1)
    logs = "\n".join(f"--- {i.log.name}:\n{i.log.read_text(errors='replace')[-12000:]}" for i in instances)
    return f"committed/end per partition: {offsets}\n{logs}"


def written(client: Any, topic: str) -> int:
    """Records in ``topic``: its partitions' high watermarks, transaction markers included."""
    latest = {CKTopicPartition(topic, p): OffsetSpec.latest() for p in range(PARTITIONS)}
    return sum(f.result().offset for f in client.list_offsets(latest, request_timeout=30).values())


def wait_until_written(
    client: Any, topic: str, records: float, report: Callable[[], str], timeout: float = 120.0
) -> None:
    """Returns once ``topic`` holds ``records`` records; fails with ``report()`` when it does not within
    ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while (count := written(client, topic)) < records:
        if time.monotonic() > deadline:
            pytest.fail(f"{topic} holds {count} records, not {records:.0f}, after {timeout:.0f} s\n{report()}")
        time.sleep(0.02)


def run_with_kills(
    bootstrap: str,
    guarantee: str,
    tmp_path: Path,
    seed: int,
    dsl_store: str,
    topology: str = "wordcount",
    crashes: tuple[str, ...] = (),
    n: int = N,
    at_end: Callable[[str, int], None] | None = None,
) -> dict[str, Any]:
    """Runs two instances of ``topology`` over ``n`` sentences (record i at event time start + i ms), killing
    one at random moments, or, with ``crashes``, making it crash at each of those commit points in turn;
    ``at_end(sink, start)`` runs once every input record is committed, before the instances stop."""
    suffix = f"{guarantee.replace('_', '')}-{os.urandom(4).hex()}"
    source, sink, app_id = f"fault-in-{suffix}", f"fault-out-{suffix}", f"fault-wc-{suffix}"
    data = sentences(n)
    words = sum(len(s.split()) for s in data)
    start = int(time.time() * 1000) - n
    t0 = time.monotonic()
    ks.produce(source, data, bootstrap_servers=bootstrap, partitions=PARTITIONS, timestamps=start)
    connect(bootstrap).admin().create_topics([TopicSpec(sink, PARTITIONS)], exist_ok=True)
    produced_s = time.monotonic() - t0
    args = [bootstrap, app_id, source, sink, guarantee]
    a = Instance([*args, str(tmp_path / "state-a"), dsl_store, topology], tmp_path / "a.log")
    b = Instance([*args, str(tmp_path / "state-b"), dsl_store, topology], tmp_path / "b.log")
    rng = random.Random(seed)
    admin = connect(bootstrap).admin()
    repartition = f"{app_id}-counts-repartition"
    kill_progress = []
    kill_written: list[int] = []
    try:
        t1 = time.monotonic()
        a.start(crashes[0] if crashes else None)
        b.start()
        a.wait_running(1)
        b.wait_running(1)
        client = AdminClient({"bootstrap.servers": bootstrap})

        def report() -> str:
            return stall_report(admin, app_id, [source, repartition], [a, b])

        for k in range(len(crashes)):
            a.wait_crashed()
            done, total = progress(admin, app_id, [source, repartition])
            kill_progress.append(f"{done}/{total}")
            kill_written.append(written(client, repartition))
            a.start(crashes[k + 1] if k + 1 < len(crashes) else None)
            a.wait_running(k + 2)
        # each kill once the split has written a random share of the words (not at a random time: processing
        # speed varies from machine to machine, and a fast run consumed the input before a timed first kill)
        for k, share in enumerate(sorted(rng.uniform(0.05, 0.7) for _ in range(0 if crashes else KILLS))):
            wait_until_written(client, repartition, share * words, report)
            time.sleep(rng.uniform(0, 0.3))
            # both sub-topologies: the split reads the sentences fast, the counting follows behind
            done, total = progress(admin, app_id, [source, repartition])
            kill_progress.append(f"{done}/{total}")
            kill_written.append(written(client, repartition))
            a.kill()
            a.start()
            a.wait_running(k + 2)
        kills_s = time.monotonic() - t1
        deadline = time.monotonic() + 400
        last, still_since = (-1, -1), time.monotonic()
        while True:
            done, total = progress(admin, app_id, [source, repartition])
            if total and done == total:
                break
            if (done, total) != last:
                last, still_since = (done, total), time.monotonic()
            # a partition written in transactions may end with a commit marker that the group's committed
            # position stays before: once nothing moves for 15 s, the exact checks below decide
            if total - done <= 2 * PARTITIONS and time.monotonic() - still_since > 15:
                break
            if time.monotonic() > deadline:
                pytest.fail(f"the instances did not finish: {done}/{total} committed\n{report()}")
            time.sleep(0.25)
        processed_s = time.monotonic() - t1
        if at_end is not None:
            at_end(sink, start)
    finally:
        a.stop()
        b.stop()
    out = ks.read_topic(sink, bootstrap_servers=bootstrap)
    timings = f"produce {produced_s:.1f}s, kills {kills_s:.1f}s, processing {processed_s:.1f}s"
    print(
        f"\n{guarantee} {topology}: N={n} seed={seed} input consumed at kills: {kill_progress} "
        f"(words written {kill_written} of {words}); {timings}"
    )
    mid = [p for p in kill_progress if int(p.split("/")[0]) < int(p.split("/")[1])]
    assert mid, f"no kill landed while the input was being processed ({kill_progress}): raise N"
    result = {
        "data": data,
        "start": start,
        "out": out,
        "kill_progress": kill_progress,
        "wipes": a.log.read_text(errors="replace").count("wiping"),
    }
    if topology == "wordcount":
        changelog = ks.read_topic(f"{app_id}-counts-changelog", bootstrap_servers=bootstrap)
        expected = Counter(w for s in data for w in s.split())
        repartitioned = ks.read_topic(repartition, bootstrap_servers=bootstrap)
        print(f"{guarantee}: {len(repartitioned)} records in the repartition topic for {words} words")
        result["lost_words"] = lost_words(data, start, repartitioned, (source, repartition), bootstrap)
        result["expected"] = expected
        result["updates"] = Counter(out["key"])
        result["final_out"] = last_per_key(out)
        result["final_changelog"] = last_per_key(changelog)
        result["changelog_regressions"] = regressions(changelog, expected, f"{app_id}-counts-changelog", bootstrap)
    return result


def last_per_key(records: Any) -> dict[Any, Any]:
    """The last value of each key in a topic read with ``read_topic`` (partition and offset order)."""
    return dict(records.sort_values(["partition", "offset"]).groupby("key")["value"].last())


def partition_spans(records: Any) -> dict[int, dict[str, int]]:
    """Per partition of a topic read with ``read_topic``: how many records, and the last offset."""
    return records.groupby("partition")["offset"].agg(["count", "max"]).to_dict("index")


def regressions(changelog: Any, expected: Counter[str], topic: str, bootstrap: str) -> str:
    """Where a word's count went down in the changelog (a store restored without its latest updates counts
    on from an older value; updates written out of order), and the words whose last count is below the
    expected one, with what a second read by new clients finds (a short read, or records not on the broker)."""
    downs: dict[str, list[tuple[int, int, int]]] = {}
    for word, rows in changelog.sort_values(["partition", "offset"]).groupby("key"):
        values, offsets = rows["value"].tolist(), rows["offset"].tolist()
        steps = [
            (offsets[i], values[i - 1], values[i]) for i in range(1, len(values)) if values[i] < values[i - 1]
        ]
        if steps:
            downs[f"{word}@{rows['partition'].iloc[0]}"] = steps[:3]
    last = last_per_key(changelog)
    short = {w: (c, last.get(w)) for w, c in expected.items() if last.get(w, 0) < c}
    below = f"{len(short)} word(s) end below their count (expected, last): {short}" if short else "none ends low"
    report = f"{below}; {len(downs)} word(s) whose count goes down at (offset, from, to): {downs}"
    if short:
        again = ks.read_topic(topic, bootstrap_servers=bootstrap, client_config={"client.id": "second-look"})
        last_again = last_per_key(again)
        report += (
            f"; changelog partitions read (count, last offset): {partition_spans(changelog)}; read again with "
            f"new clients: {partition_spans(again)}, last counts then { ({w: last_again.get(w) for w in short}) }"
        )
    return report


def lost_words(data: list[str], start: int, repartitioned: Any, topics: tuple[str, str], bootstrap: str) -> str:
    """Which sentences have fewer words in the repartition topic than they hold (sentence i carries event
    time start + i), where they sit in the input topic, and whether reading the topic again finds them:
    tells a lost record from a short read."""
    source, repartition = topics
    seen = Counter(int(ts) - start for ts in repartitioned["timestamp"])
    short = [i for i, s in enumerate(data) if seen[i] < len(s.split())]
    if not short:
        return "no sentence lost a word in the repartition topic"
    inputs = ks.read_topic(source, bootstrap_servers=bootstrap, value_serde="string")
    where = {
        int(ts) - start: (p, o) for ts, p, o in zip(inputs["timestamp"], inputs["partition"], inputs["offset"])
    }
    per_partition: dict[int, list[int]] = {}
    for i in short:
        partition, offset = where[i]
        per_partition.setdefault(partition, []).append(offset)
    spans = {p: (min(o), max(o), len(o)) for p, o in sorted(per_partition.items())}
    admin = connect(bootstrap).admin()
    tps = [TopicPartition(repartition, p) for p in range(admin.partition_count(repartition) or 0)]
    ends = {tp.partition: end for tp, end in admin.end_offsets(tps).items()}
    again = ks.read_topic(repartition, bootstrap_servers=bootstrap)
    return (
        f"{len(short)} sentence(s) lost words in the repartition topic; input partition: (first, last, count) "
        f"{spans}; repartition partitions read (count, last offset): {partition_spans(repartitioned)}, end "
        f"offsets {ends}, read again: {partition_spans(again)}"
    )


@pytest.mark.timeout(600)
def test_exactly_once_v2_survives_sigkill(kafka_bootstrap: str, tmp_path: Path) -> None:
    r = run_with_kills(kafka_bootstrap, "exactly_once_v2", tmp_path, random.randrange(1 << 30), "rocksdb")
    assert_exactly_once(r)


@pytest.mark.timeout(600)
def test_exactly_once_v2_survives_crashes_inside_a_commit(kafka_bootstrap: str, tmp_path: Path) -> None:
    """A crash with the transaction open and everything sent (Kafka aborts it when the restarted instance
    fences the old producer), then one right after the broker confirmed the commit (the consumed offsets
    went with it: committed outside the transaction, they would be lost and the records counted twice)."""
    crashes = ("before-commit:6", "after-commit:6", "before-commit:3")
    r = run_with_kills(kafka_bootstrap, "exactly_once_v2", tmp_path, 0, "rocksdb", crashes=crashes, n=N // 2)
    assert_exactly_once(r)


def assert_exactly_once(r: dict[str, Any]) -> None:
    """Exact final counts in the changelog and the output, and one output update per word occurrence."""
    expected = r["expected"]
    duplicates = sum(r["updates"].values()) - sum(expected.values())
    print(f"exactly_once_v2: {duplicates} duplicate updates in the output topic; {r['wipes']} stores wiped")
    assert r["wipes"] >= 1, "a killed instance restarted without wiping its RocksDB stores"
    assert r["final_changelog"] == dict(expected)
    assert r["final_out"] == dict(expected)
    # one update per word occurrence: no increment lost, none emitted twice
    assert r["updates"] == expected


@pytest.mark.timeout(600)
def test_at_least_once_loses_nothing_under_sigkill(kafka_bootstrap: str, tmp_path: Path) -> None:
    r = run_with_kills(kafka_bootstrap, "at_least_once", tmp_path, random.randrange(1 << 30), "in_memory")
    expected = r["expected"]
    print(r["lost_words"])
    print(r["changelog_regressions"])
    assert all(r["final_changelog"][w] >= c for w, c in expected.items()), r["changelog_regressions"]
    assert all(r["final_out"][w] >= c for w, c in expected.items())
    assert all(r["updates"][w] >= c for w, c in expected.items())
    duplicates = sum(r["updates"].values()) - sum(expected.values())
    print(f"at_least_once: {duplicates} duplicate updates in the output topic after {KILLS} SIGKILLs")


def expected_final_windows(data: list[str], start: int) -> dict[str, int]:
    """Final count per ``word@window start`` (sentence i at event time start + i ms)."""
    counts: Counter[str] = Counter()
    for i, sentence in enumerate(data):
        ts = start + i
        window = ts - ts % WINDOW_MS
        counts.update(f"{word}@{window}" for word in sentence.split())
    return dict(counts)


@pytest.mark.timeout(600)
def test_exactly_once_v2_final_window_results_survive_sigkill(kafka_bootstrap: str, tmp_path: Path) -> None:
    """Windowed counts through suppress(until_window_closes()): the suppression buffer holds every window
    until the end, across the kills (restored from its changelog by whichever instance gets the task). When
    the input is done, a sentence far ahead in event time closes every window: each final count arrives
    exactly once and exact."""
    n = N // 4
    flush_words = [f"zz{i}" for i in range(40)]  # murmur2 spreads them over every repartition partition

    def close_every_window(sink: str, start: int) -> None:
        ks.produce(
            f"fault-in-{sink.removeprefix('fault-out-')}",
            [" ".join(flush_words)],
            bootstrap_servers=kafka_bootstrap,
            timestamps=[start + n + GRACE_MS + WINDOW_MS],
        )
        windows = expected_final_windows(sentences(n), start)
        deadline = time.monotonic() + 120
        while (got := len(ks.read_topic(sink, bootstrap_servers=kafka_bootstrap))) < len(windows):
            if time.monotonic() > deadline:
                pytest.fail(f"{got} of {len(windows)} final window counts after 120 s; {missing(sink, windows)}")
            time.sleep(0.5)
        time.sleep(1)  # a duplicate would come right behind

    def missing(sink: str, windows: dict[str, int]) -> str:
        """Which windows are missing per counting task, what read_uncommitted sees, what the instances logged."""
        committed = set(ks.read_topic(sink, bootstrap_servers=kafka_bootstrap)["key"])
        uncommitted = ks.read_topic(sink, bootstrap_servers=kafka_bootstrap, isolation_level="read_uncommitted")
        absent = sorted(set(windows) - committed)
        word_key = serde_from("string_or_json").serializer(sink)  # the app's key serde: a word's repartition key
        per_task = Counter(default_partition(word_key(k.split("@")[0]) or b"", PARTITIONS) for k in absent)
        logged = [
            line
            for log in sorted(tmp_path.glob("*.log"))
            for line in log.read_text(errors="replace").splitlines()
            if " WARNING " in line or " ERROR " in line or "FAILED" in line or "restored" in line
        ]
        return (
            f"missing per counting task {dict(per_task)}: {absent[:10]}...; read_uncommitted: "
            f"{len(uncommitted)} records, {partition_spans(uncommitted)}; the instances logged:\n"
            + "\n".join(logged[-40:])
        )

    r = run_with_kills(
        kafka_bootstrap, "exactly_once_v2", tmp_path, random.randrange(1 << 30), "in_memory",
        topology="window", n=n, at_end=close_every_window,
    )  # fmt: skip
    out = r["out"]
    assert not out["key"].duplicated().any(), "a final window count was emitted twice"
    assert dict(zip(out["key"], out["value"], strict=True)) == expected_final_windows(r["data"], r["start"])


def test_kafka_aborts_a_fenced_open_transaction(kafka_bootstrap: str) -> None:
    """What exactly-once relies on when an instance dies inside a transaction: when a new producer registers
    the same transactional id, the broker aborts the transaction the old one left open, and read_committed
    never sees its records."""
    topic = f"fenced-{os.urandom(4).hex()}"
    connect(kafka_bootstrap).admin().create_topics([TopicSpec(topic, 1)])
    txn_id = f"fenced-{os.urandom(4).hex()}"
    zombie = Producer({"bootstrap.servers": kafka_bootstrap, "transactional.id": txn_id})
    zombie.init_transactions(30)
    zombie.begin_transaction()
    zombie.produce(topic, b"left open")
    zombie.flush(30)
    successor = Producer({"bootstrap.servers": kafka_bootstrap, "transactional.id": txn_id})
    successor.init_transactions(30)
    successor.begin_transaction()
    successor.produce(topic, b"committed")
    successor.commit_transaction(30)
    seen = ks.read_topic(topic, bootstrap_servers=kafka_bootstrap, value_serde="bytes")
    assert seen["value"].tolist() == [b"committed"]
    everything = ks.read_topic(
        topic, bootstrap_servers=kafka_bootstrap, value_serde="bytes", isolation_level="read_uncommitted"
    )
    assert everything["value"].tolist() == [b"left open", b"committed"]  # aborted, not dropped


def test_kafka_commits_transactional_offsets_with_the_transaction(kafka_bootstrap: str) -> None:
    """The consumed offsets sent to a transaction are the group's committed offsets as soon as the
    transaction commits, whatever other transactions on the same partitions are still open."""
    suffix = os.urandom(4).hex()
    out, source, group = f"offsets-out-{suffix}", f"offsets-in-{suffix}", f"offsets-{suffix}"
    connect(kafka_bootstrap).admin().create_topics([TopicSpec(out, 1), TopicSpec(source, 1)])
    consumer = Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": group})
    first, second = (
        Producer({"bootstrap.servers": kafka_bootstrap, "transactional.id": f"{name}-{suffix}"})
        for name in ("first", "second")
    )
    for producer in (first, second):
        producer.init_transactions(30)
        producer.begin_transaction()
        producer.produce(out, b"x")
        producer.flush(30)
    second.send_offsets_to_transaction([CKTopicPartition(source, 0, 10)], consumer.consumer_group_metadata(), 30)
    second.commit_transaction(30)
    committed = consumer.committed([CKTopicPartition(source, 0)], timeout=30)[0].offset
    first.abort_transaction(30)
    consumer.close()
    assert committed == 10
