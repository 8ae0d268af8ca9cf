"""Q1: a group member commits offsets of partitions outside its group assignment (a topic it does not
subscribe to), synchronously and asynchronously: does the broker store them? Then a second member joins
while the first does not poll: what do the first member's commits get, before and after it is dropped?"""

from __future__ import annotations

import time
from typing import Any

from confluent_kafka import Consumer, TopicPartition
from harness import commit_error, describe_error, kafka, pump, wait_for


def main() -> None:
    with kafka() as lab:
        lab.create_topics(x=2, y=2)
        events: list[str] = []
        commits: list[str] = []

        def on_commit(err: Any, parts: list[TopicPartition]) -> None:
            errs = [describe_error(p.error) for p in parts if p.error is not None]
            commits.append(f"{describe_error(err)}; per partition: {errs or 'no errors'}")

        a = lab.consumer("q1", client_id="a", on_commit=on_commit, max_poll_interval_ms=6000)
        a.subscribe(
            ["x"],
            on_assign=lambda c, p: events.append(f"a assigned {[x.partition for x in p]}"),
            on_revoke=lambda c, p: events.append(f"on_revoke {[x.partition for x in p]}"),
            on_lost=lambda c, p: events.append(f"on_lost {[x.partition for x in p]}"),
        )
        wait_for(lambda: bool(events), 30, "a's first assignment", lambda: pump(a))
        print(f"a joined; {events[-1]} of x; a subscribes to x only")

        print(f"sync  commit y-0@5 (not in a's assignment): {commit_error(a, [TopicPartition('y', 0, 5)])}")
        a.commit(offsets=[TopicPartition("y", 1, 7)], asynchronous=True)
        wait_for(lambda: bool(commits), 10, "the async commit's answer", lambda: pump(a))
        print(f"async commit y-1@7: on_commit said {commits[-1]}")
        print(f"read back by AdminClient.list_consumer_group_offsets: {lab.committed('q1', [('y', 0), ('y', 1)])}")

        b_assigned: list[float] = []
        b = lab.consumer("q1", client_id="b")
        b.subscribe(["x"], on_assign=lambda c, p: b_assigned.append(time.monotonic()))
        joined = time.monotonic()
        wait_for(lambda: time.monotonic() - joined > 1.5, 5, "b's join to reach the broker", lambda: pump(b))
        state = lab.describe("q1").state
        print(f"b subscribed, a not polled for 1.5 s; group state {state}")
        print(f"  a sync commit y-0@6 now (a's generation still the group's): "
              f"{commit_error(a, [TopicPartition('y', 0, 6)])}")  # fmt: skip
        wait_for(lambda: bool(b_assigned), 60, "b's assignment", lambda: pump(b))
        members = [m.client_id for m in lab.describe("q1").members]
        print(f"b assigned {b_assigned[0] - joined:.1f} s after it subscribed; members now {members}")
        print(f"  a sync commit y-0@8 (a dropped, has not polled): {commit_error(a, [TopicPartition('y', 0, 8)])}")
        a.commit(offsets=[TopicPartition("y", 1, 9)], asynchronous=True)
        seen = poll_errors(a, 3.0)
        wait_for(lambda: len(commits) > 1, 10, "the 2nd async commit's answer", lambda: pump(a))
        print(f"  a async commit y-1@9: on_commit said {commits[-1]}")
        print(f"  a's next polls returned errors {seen or 'none'}; callbacks {events[1:] or 'none'}")
        print(f"read back: {lab.committed('q1', [('y', 0), ('y', 1)])}")


def poll_errors(consumer: Consumer, seconds: float) -> list[str]:
    """Polls ``consumer`` for ``seconds``; the errors its polls returned."""
    out: list[str] = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        out += [describe_error(m.error()) for m in consumer.consume(10, 0.1) if m.error() is not None]
    return out


if __name__ == "__main__":
    main()
