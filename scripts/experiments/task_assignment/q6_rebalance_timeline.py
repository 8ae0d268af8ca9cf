"""Q6: three members (eager range, one thread each); a 4th joins, later leaves cleanly: when does every
member's on_revoke/on_assign run, and what do synchronous commits sent between on_revoke and on_assign get?
Then the latency of one control round: status record -> leader reads it -> leader's transactional
assignment record -> member reads it (read_committed)."""

from __future__ import annotations

import statistics
import threading
import time
from collections import Counter

from confluent_kafka import Consumer, TopicPartition
from harness import Lab, commit_error, kafka, wait_for


class Member(threading.Thread):
    """A subscribed member polled on its own thread; between on_revoke and on_assign it commits the
    partition it owned last, synchronously, every 20 ms, and records each answer."""

    def __init__(self, lab: Lab, name: str, t0: list[float], log: list[tuple[float, str, str]]) -> None:
        super().__init__(name=name, daemon=True)
        self.consumer: Consumer = lab.consumer("q6", client_id=name)
        self.t0, self.log, self.stop = t0, log, threading.Event()
        self.between = False
        self.owned: list[int] = []
        self.commits: list[tuple[float, float, str]] = []  # sent, answered, outcome
        self.leave = threading.Event()

    def now(self) -> float:
        return time.monotonic() - self.t0[0]

    def on_assign(self, consumer: Consumer, parts: list[TopicPartition]) -> None:
        self.between = False
        self.owned = [p.partition for p in parts]
        self.log.append((self.now(), self.name, f"on_assign {self.owned}"))

    def on_revoke(self, consumer: Consumer, parts: list[TopicPartition]) -> None:
        self.log.append((self.now(), self.name, f"on_revoke {[p.partition for p in parts]}"))
        self.between = bool(self.owned)

    def run(self) -> None:
        self.consumer.subscribe(["x"], on_assign=self.on_assign, on_revoke=self.on_revoke)
        n = 0
        while not self.stop.is_set():
            if self.leave.is_set():
                self.consumer.close()
                self.log.append((self.now(), self.name, "closed (left)"))
                return
            self.consumer.consume(100, 0.01)
            if self.between:
                n += 1
                sent = self.now()
                code = commit_error(self.consumer, [TopicPartition("x", self.owned[-1], n)])
                self.commits.append((sent, self.now(), code))
                time.sleep(0.02)


def timeline(log: list[tuple[float, str, str]], since: int) -> None:
    for t, name, what in sorted(log[since:]):
        print(f"  {t:6.3f} s  {name}: {what}")


def rebalances(lab: Lab) -> None:
    lab.create_topics(x=12)
    t0 = [time.monotonic()]
    log: list[tuple[float, str, str]] = []
    members = [Member(lab, name, t0, log) for name in ("a", "b", "c")]
    for m in members:
        m.start()
    wait_for(lambda: all(m.owned for m in members) and len(lab.describe("q6").members) == 3, 30, "3 members")
    time.sleep(1)  # let the members' first fetches and commits pass before measuring
    outcomes: Counter[str] = Counter()
    cycles = [("join", "d"), ("leave", "d"), ("join", "e"), ("leave", "e"), ("join", "f"), ("leave", "f")]
    for i, (action, name) in enumerate(cycles):
        start = len(log)
        for m in members:
            m.commits.clear()
        t0[0] = time.monotonic()
        if action == "join":
            members.append(Member(lab, name, t0, log))
            members[-1].start()
        else:
            members.pop().leave.set()
        expected = 4 if action == "join" else 3
        first = start

        def assigned(expected: int = expected, first: int = first) -> bool:
            return sum("on_assign" in w for _, _, w in log[first:]) >= expected

        wait_for(assigned, 30, f"{name} {action}")
        time.sleep(0.5)  # observation window: callbacks or commits arriving late would show up in the log
        commits = [(m.name, c) for m in members for c in m.commits]
        outcomes.update(code for _, (_, _, code) in commits)
        if i < 2:
            print(f"{name} {action}s at t=0 (a, b, c stay):")
            timeline(log, start)
            for who, (sent, answered, code) in commits:
                print(f"  {who}'s sync commit sent {sent:.3f} s, answered {answered:.3f} s: {code}")
    print(f"all sync commits between on_revoke and on_assign over 3 joins and 3 leaves: {dict(outcomes)}")
    for m in members:
        m.stop.set()
        m.join(10)


def control_round(lab: Lab) -> None:
    """20 rounds: a status written by a plain producer, read by the leader, answered with a transactional
    record, read by a read_committed member; fetch.wait.max.ms=10 on both readers."""
    lab.create_topics(control=1)
    status_producer = lab.producer()
    leader_in = lab.consumer("q6-leader", fetch_wait_max_ms=10)
    member_in = lab.consumer("q6-member", fetch_wait_max_ms=10, isolation_level="read_committed")
    for c in (leader_in, member_in):
        c.assign([TopicPartition("control", 0, 0)])
    leader_out = lab.producer(transactional_id="q6-leader")
    leader_out.init_transactions(30)

    def read_until(consumer: Consumer, value: bytes) -> None:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if any(m.error() is None and m.value() == value for m in consumer.consume(100, 0.005)):
                return
        raise TimeoutError(f"{value!r} not read")

    rounds: list[float] = []
    for i in range(20):
        start = time.monotonic()
        status_producer.produce("control", f"status-{i}".encode())
        status_producer.poll(0)
        read_until(leader_in, f"status-{i}".encode())
        leader_out.begin_transaction()
        leader_out.produce("control", f"assignment-{i}".encode())
        leader_out.commit_transaction(10)
        read_until(member_in, f"assignment-{i}".encode())
        rounds.append((time.monotonic() - start) * 1000)
    rest = rounds[1:]
    print(
        f"control round (status -> leader -> transactional assignment -> member): first {rounds[0]:.0f} ms; "
        f"next 19: median {statistics.median(rest):.0f} ms, min {min(rest):.0f}, max {max(rest):.0f}"
    )


def main() -> None:
    with kafka() as lab:
        rebalances(lab)
        control_round(lab)


if __name__ == "__main__":
    main()
