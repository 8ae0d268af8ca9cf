"""Leader-assigned tasks on Apache Kafka (issue 25 items 1-3).

Several app instances run in this process, each with its own state directory (so its own process id). The
expectations are computed here from the task counts (floor/ceil shares) and ``collections.Counter`` recounts,
not by the assignor: balance over threads and sub-topologies, stickiness (only the joining or leaving
instance's share moves), cooperative handover (tasks that did not move keep processing through a join),
exactly-once counts through joins, clean leaves and crashes, and sub-topologies over unequally partitioned topics.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient

import kstream_nb as ks
from kstream_nb.cluster.partitioner import default_partition
from tests.helpers import wait_for

pytestmark = pytest.mark.kafka


def word_count(source: str, sink: str | None = None) -> ks.Topology:
    """Two sub-topologies: split and re-key (0_p), count (1_p, over the repartition topic)."""
    b = ks.StreamsBuilder()
    counts = b.stream(source).flat_map_values(str.split).group_by(lambda k, w: w).count(store="counts")
    if sink is not None:
        counts.to_stream().to(sink)
    return b.build()


def describe_members(bootstrap: str, group: str) -> list[str]:
    """The member ids the broker lists in ``group`` now (DescribeConsumerGroups)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return [m.member_id for m in admin.describe_consumer_groups([group])[group].result(10).members or []]


def tasks(app: ks.KafkaStreams) -> set[str]:
    return {tid for per_thread in app.assignment().values() for tid in per_thread}


def holders(apps: list[ks.KafkaStreams]) -> dict[str, str]:
    """Task id -> the process id of the instance running it (fails on a task run twice)."""
    owners: dict[str, str] = {}
    for app in apps:
        for tid in tasks(app):
            assert tid not in owners, f"task {tid} runs on {owners[tid]} and {app.process_id}"
            owners[tid] = app.process_id
    return owners


def all_tasks(partitions: int, subtopologies: int = 2) -> set[str]:
    return {f"{s}_{p}" for s in range(subtopologies) for p in range(partitions)}


def balanced(apps: list[ks.KafkaStreams], expected: set[str]) -> bool:
    """Every task runs on exactly one instance; each holds floor or ceil of the tasks, overall and per
    sub-topology; every instance is RUNNING."""
    owners = holders(apps)
    if set(owners) != expected or any(app.state is not ks.State.RUNNING for app in apps):
        return False
    n = len(apps)
    per_sub = Counter(t.split("_")[0] for t in expected)
    for app in apps:
        mine = tasks(app)
        if not len(expected) // n <= len(mine) <= -(-len(expected) // n):
            return False
        for sub, total in per_sub.items():
            if not total // n <= sum(1 for t in mine if t.split("_")[0] == sub) <= -(-total // n):
                return False
    return True


@pytest.fixture
def start_instances(make_kafka_app: Callable[..., ks.KafkaStreams], tmp_path: Path) -> Callable[..., Any]:
    """``start(topology, app_id, name, **config)``: a leader-assigned instance with state dir ``tmp_path/name``."""

    def start(topology: ks.Topology, app_id: str, name: str, **config: Any) -> ks.KafkaStreams:
        app = make_kafka_app(topology, application_id=app_id, state_dir=str(tmp_path / name), **config)
        return app.start()

    return start


def test_three_instances_balance_two_subtopologies(start_instances, names, kafka_bootstrap):
    source = names("sentences")
    ks.produce(source, [f"a{i} b{i % 7}" for i in range(80)], bootstrap_servers=kafka_bootstrap, partitions=8)
    app_id = names("balance")
    apps = [start_instances(word_count(source), app_id, name) for name in "abc"]
    expected = all_tasks(8)
    wait_for(lambda: balanced(apps, expected), 120, "16 tasks over 3 instances: 5-6 each, 2-3 per sub-topology")
    sizes = sorted(len(tasks(app)) for app in apps)
    assert sizes == [5, 5, 6]  # 16 = 5 + 5 + 6
    # the all-instances view agrees with what each instance runs
    view = apps[0].group_assignment()
    wait_for(lambda: {t: i["instance"] for t, i in apps[0].group_assignment().items()} == holders(apps), 30,
             "the group view to match")  # fmt: skip
    assert set(view) == expected
    # each thread's generation and member id come from its group consumer's metadata bytes: the broker's ids
    parsed = {th.consumer.member.metadata().member_id for app in apps for th in app.threads}
    assert parsed == set(describe_members(kafka_bootstrap, app_id))


def test_an_instance_with_two_threads_gets_twice_the_tasks(start_instances, names, kafka_bootstrap):
    source = names("sentences")
    ks.produce(source, [f"a{i} b{i % 7}" for i in range(80)], bootstrap_servers=kafka_bootstrap, partitions=6)
    app_id = names("threads")
    one = start_instances(word_count(source), app_id, "one")
    two = start_instances(word_count(source), app_id, "two", num_stream_threads=2)
    expected = all_tasks(6)

    def settled() -> bool:
        threads = [th for app in (one, two) for th in app.threads]
        held = [set(th.tasks) for th in threads]
        # 12 tasks over 3 threads: 4 each, 2 of each sub-topology (6 / 3)
        return (
            set().union(*held) == expected
            and all(len(h) == 4 and sum(t.startswith("0_") for t in h) == 2 for h in held)
            and one.state is ks.State.RUNNING
            and two.state is ks.State.RUNNING
        )

    wait_for(settled, 120, "4 tasks per thread, 2 per sub-topology")
    assert (len(tasks(one)), len(tasks(two))) == (4, 8)


def test_sticky_join_and_clean_leave(start_instances, names, kafka_bootstrap):
    source = names("sentences")
    sentences = [f"w{i % 30} v{i % 11}" for i in range(300)]
    ks.produce(source, sentences, bootstrap_servers=kafka_bootstrap, partitions=8)
    app_id = names("sticky")
    a, b = (start_instances(word_count(source), app_id, name) for name in "ab")
    expected = all_tasks(8)
    wait_for(lambda: balanced([a, b], expected), 120, "8 tasks each on A and B")
    before = holders([a, b])

    c = start_instances(word_count(source), app_id, "c")
    wait_for(lambda: balanced([a, b, c], expected), 120, "A, B and C balanced")
    after = holders([a, b, c])
    moved = {t for t in expected if before[t] != after[t]}
    assert moved == tasks(c)  # exactly C's share moved, nothing between A and B
    moves = {t: {"from": before[t], "to": c.process_id} for t in moved}
    wait_for(lambda: {t: i["moved"] for t, i in a.group_assignment().items() if i["moved"]} == moves, 30,
             "group_assignment() to name the moves")  # fmt: skip

    assert c.stop(30) is True
    wait_for(lambda: balanced([a, b], expected), 120, "A and B balanced again")
    final = holders([a, b])
    moved_back = {t for t in expected if final[t] != after[t]}
    assert moved_back == {t for t, pid in after.items() if pid == c.process_id}  # only C's tasks moved

    def counted() -> dict[str, int]:
        merged: dict[str, int] = {}
        for app in (a, b):
            merged.update(dict(app.store("counts").all()))
        return merged

    expected_counts = dict(Counter(w for s in sentences for w in s.split()))
    wait_for(lambda: counted() == expected_counts, 60, "the counts to equal a recount of the input")


class Feeder(threading.Thread):
    """Writes seeded random sentences to ``topic`` in small batches until stopped; ``sent`` lists them."""

    def __init__(self, topic: str, bootstrap: str, seed: int) -> None:
        super().__init__(daemon=True)
        self.topic, self.bootstrap = topic, bootstrap
        self.rng = random.Random(seed)
        self.sent: list[str] = []
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            batch = [f"w{self.rng.randrange(50)} w{self.rng.randrange(50)}" for _ in range(40)]
            ks.produce(self.topic, batch, bootstrap_servers=self.bootstrap, partitions=8)
            self.sent.extend(batch)


def test_tasks_that_do_not_move_keep_processing_through_a_join(start_instances, names, kafka_bootstrap):
    source = names("sentences")
    ks.produce(source, ["start"], bootstrap_servers=kafka_bootstrap, partitions=8)
    app_id = names("cooperative")
    a, b = (start_instances(word_count(source), app_id, name) for name in "ab")
    expected = all_tasks(8)
    wait_for(lambda: balanced([a, b], expected), 120, "8 tasks each on A and B")
    feeder = Feeder(source, kafka_bootstrap, seed=25)
    feeder.start()
    try:
        running = {tid: task for app in (a, b) for th in app.threads for tid, task in th.tasks.items()}
        wait_for(lambda: all(t.processed_total > 0 for tid, t in running.items() if tid.startswith("1_")), 60,
                 "every counting task to process some input")  # fmt: skip
        at_join = {tid: task.processed_total for tid, task in running.items()}
        c = start_instances(word_count(source), app_id, "c")
        absent: set[str] = set()  # tasks of A and B seen without their task object at some point of the join

        def sample() -> bool:
            now = {tid: task for app in (a, b) for th in app.threads for tid, task in th.tasks.items()}
            absent.update(tid for tid, task in running.items() if now.get(tid) is not task)
            return balanced([a, b, c], expected)

        wait_for(sample, 120, "A, B and C balanced")
    finally:
        feeder.stop.set()
        feeder.join(30)
    moved = tasks(c)
    stayed = expected - moved
    assert moved and absent == moved  # the tasks that stayed were never revoked, suspended or recreated
    grew = {tid for tid in stayed if running[tid].processed_total > at_join[tid]}
    counting = {tid for tid in stayed if tid.startswith("1_")}
    assert counting <= grew, f"counting tasks {sorted(counting - grew)} processed nothing across the join"
    everything = Counter(w for s in ["start", *feeder.sent] for w in s.split())

    def counted() -> dict[str, int]:
        merged: dict[str, int] = {}
        for app in (a, b, c):
            merged.update(dict(app.store("counts").all()))
        return merged

    wait_for(lambda: counted() == dict(everything), 60, "the counts to equal a recount of the input")


def keys_on(partition: int, partitions: int, n: int, prefix: str) -> list[str]:
    """The first ``n`` keys ``prefix<i>`` that Java's (murmur2) partitioner puts on ``partition``."""
    found = [f"{prefix}{i}" for i in range(10 * n * partitions)]
    return [k for k in found if default_partition(k.encode(), partitions) == partition][:n]


def test_a_stateful_subtopology_over_unequally_partitioned_topics(start_instances, names, kafka_bootstrap):
    wide, narrow = names("wide"), names("narrow")
    # task p reads partition p of each topic that has it: 0_0, 0_1 read both topics, 0_2, 0_3 only the wide one;
    # keys are chosen so that each one lives in a single task (on partition p of every topic it is written to)
    wide_records = [(k, 1) for p in range(4) for k in keys_on(p, 4, 5, f"k{p}-") for _ in range(p + 1)]
    narrow_records = [(k, 1) for p in range(2) for k in keys_on(p, 4, 5, f"k{p}-") if default_partition(
        k.encode(), 2) == p]  # fmt: skip
    ks.produce(wide, wide_records, bootstrap_servers=kafka_bootstrap, partitions=4)
    ks.produce(narrow, narrow_records, bootstrap_servers=kafka_bootstrap, partitions=2)
    b = ks.StreamsBuilder()
    b.stream(wide).merge(b.stream(narrow)).group_by_key().count(store="counts")
    topology = b.build()
    app_id = names("unequal")
    apps = [start_instances(topology, app_id, name) for name in "ab"]
    expected_tasks = {f"0_{p}" for p in range(4)}
    wait_for(lambda: balanced(apps, expected_tasks), 120, "4 tasks over 2 instances")
    assert {tp for app in apps for per in app.assignment().values() for tp in per.get("0_0", [])} == {
        f"{wide}-0", f"{narrow}-0"}  # fmt: skip
    expected = Counter(k for k, _ in wide_records + narrow_records)

    def counted() -> dict[str, int]:
        merged: dict[str, int] = {}
        for app in apps:
            merged.update(dict(app.store("counts").all()))
        return merged

    wait_for(lambda: counted() == dict(expected), 60, "the counts to equal a recount of both topics")


RUNNER = Path(__file__).with_name("wordcount_instance.py")
ROOT = Path(__file__).resolve().parents[2]


class Instance:
    """One ``wordcount_instance.py`` process; its output goes to ``log`` (appended across restarts)."""

    def __init__(self, args: list[str], log: Path) -> None:
        self.args, self.log = args, log
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self) -> None:
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        }
        with self.log.open("ab") as out:
            self.process = subprocess.Popen([sys.executable, str(RUNNER), *self.args], stdout=out,
                                            stderr=subprocess.STDOUT, env=env)  # fmt: skip

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.running:
            assert self.process is not None
            self.process.send_signal(sig)
            self.process.wait(60)

    def events(self) -> str:
        """The log's lines on tasks moving (assignments, starting offsets, restores, losses) and problems."""
        marks = ("applied assignment", "starts from", "restored", "lost", "generation", "FAILED", "WARN", "ERROR")
        lines = self.log.read_text(errors="replace").splitlines() if self.log.exists() else []
        return "\n".join(line[:400] for line in lines if any(m in line for m in marks))


def group_size(bootstrap: str, group: str) -> int:
    """How many members the broker lists in ``group`` now."""
    return len(describe_members(bootstrap, group))


@pytest.mark.timeout(300)  # nine membership events, each waited for; slower on a loaded machine
def test_exactly_once_counts_through_joins_clean_leaves_and_kills(names, kafka_bootstrap, tmp_path):
    rng = random.Random(2511)
    source, sink, app_id = names("sentences"), names("counts"), names("eos-leader")
    words = [f"w{i}" for i in range(60)]
    sent: list[str] = []

    def feed(n: int) -> None:
        batch = [" ".join(rng.choice(words) for _ in range(4)) for _ in range(n)]
        ks.produce(source, batch, bootstrap_servers=kafka_bootstrap, partitions=8)
        sent.extend(batch)

    feed(500)
    ks.produce(sink, [], bootstrap_servers=kafka_bootstrap, partitions=8)  # (created before the instances write)
    instances = [
        Instance(
            [
                kafka_bootstrap,
                app_id,
                source,
                sink,
                "exactly_once_v2",
                str(tmp_path / name),
                "in_memory",
                "wordcount",
            ],
            tmp_path / f"{name}.log",
        )
        for name in "abcd"
    ]
    try:
        for inst in instances[:2]:
            inst.start()
        events = ["join", "kill", "leave", "join", "pause", "kill", "join", "leave", "join"]
        log = []
        for event in events:
            feed(rng.randrange(200, 600))
            running = [i for i in instances if i.running]
            stopped = [i for i in instances if not i.running]
            target = rng.choice(stopped if event == "join" else running)
            log.append(f"{event} {target.log.stem}")
            before = len(ks.read_topic(sink, bootstrap_servers=kafka_bootstrap))
            if event == "join":
                target.start()
            elif event == "pause":  # a zombie: evicted (session timeout) while stopped, then it goes on
                assert target.process is not None
                target.process.send_signal(signal.SIGSTOP)
                left = len(running) - 1
                wait_for(lambda n=left: group_size(kafka_bootstrap, app_id) == n, 60,
                         "the stopped instance to be evicted")  # fmt: skip
                feed(200)
                target.process.send_signal(signal.SIGCONT)
            else:
                target.stop(signal.SIGKILL if event == "kill" else signal.SIGTERM)
            # the next event once more records were counted (the rebalance and handovers run meanwhile)
            wait_for(lambda b=before: len(ks.read_topic(sink, bootstrap_servers=kafka_bootstrap)) > b + 100, 120,
                     f"output after {log[-1]}")  # fmt: skip
        feed(300)
        expected = dict(Counter(w for s in sent for w in s.split()))

        wrong: dict[str, Any] = {}

        def final_counts() -> bool:
            out = ks.read_topic(sink, bootstrap_servers=kafka_bootstrap)  # read_committed
            got = dict(out.sort_values(["partition", "offset"]).groupby("key")["value"].last())
            wrong.clear()
            wrong.update({w: (got.get(w), n) for w, n in expected.items() if got.get(w) != n})
            return got == expected

        try:
            wait_for(final_counts, 60, f"the committed counts to equal a recount after {log}")
        except AssertionError as e:
            logs = "\n\n".join(f"{i.log.stem}:\n{i.events()}" for i in instances)
            out = ks.read_topic(sink, bootstrap_servers=kafka_bootstrap)
            key = min(wrong, default=None)
            mine = out[out["key"] == key]
            history = list(zip(mine["partition"], mine["offset"], mine["value"], strict=True))
            raise AssertionError(
                f"{e}; (got, expected) differ for {wrong}\nthe output for {key!r} (partition, offset, count): "
                f"{history}\n{logs}"
            ) from None
    finally:
        for inst in instances:
            inst.stop()


def test_lost_tasks_leave_nothing_of_theirs_for_the_next_transaction(
    make_kafka_app, names, kafka_bootstrap, monkeypatch
):
    """Tasks lost to an eviction close dirty: what closing their stores writes (the changes a store holds for the
    next commit) goes with the aborted transaction. Were it left for the thread's next transaction, the changelog
    would hold counts ahead of the committed offsets, and the task's next owner would count those records twice."""
    from kstream_nb.runtime.task_handover import TaskHandover

    left: list[bool] = []
    lose = TaskHandover.tasks_lost

    def recording(self: TaskHandover, reason: str) -> None:
        lose(self, reason)
        left.append(self.thread.collector.pending())

    monkeypatch.setattr(TaskHandover, "tasks_lost", recording)
    source = names("words")
    ks.produce(source, [(f"w{i % 7}", i) for i in range(50)], bootstrap_servers=kafka_bootstrap, partitions=1)
    b = ks.StreamsBuilder()
    b.stream(source).group_by_key().count(store="counts")
    app = make_kafka_app(b.build(), application_id=names("lost"), processing_guarantee="exactly_once_v2",
                         commit_interval_ms=3_600_000).start()  # fmt: skip
    wait_for(lambda: app.metrics()["process-total"] >= 50, 60, "the records processed (none committed)")
    app.threads[0].handover.member.lost = True  # as the group member marks itself when the group threw it out
    wait_for(lambda: left, 30, "the tasks to be lost")
    assert left == [False]
