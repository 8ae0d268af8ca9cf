"""Q2: an assign-only consumer (never subscribes) with the group's group.id, while a subscribed member is in
the group: does it start at the group's committed offsets; under read_committed, does it wait for a pending
transactional offset commit; does incremental_assign/unassign of one partition leave the others' streams
without gap or duplicate?"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable

from confluent_kafka import Consumer, TopicPartition
from harness import Lab, commit_error, kafka, pump, wait_for, where


def first_offsets(consumer: Consumer, count: int, timeout: float) -> dict[int, int]:
    """Polls until ``count`` partitions delivered a record; the first offset of each."""
    first: dict[int, int] = {}

    def poll() -> None:
        for msg in pump(consumer, timeout=0.05):
            first.setdefault(*where(msg))

    wait_for(lambda: len(first) >= count, timeout, "first records", poll)
    return first


def main() -> None:
    with kafka() as lab:
        lab.create_topics(t=3)
        for p in range(3):
            lab.fill("t", p, 100)
        group = lab.consumer("q2", client_id="group-member")
        assigned: list[int] = []
        group.subscribe(["t"], on_assign=lambda c, parts: assigned.append(len(parts)))
        wait_for(lambda: bool(assigned), 30, "the group member's assignment", lambda: pump(group))
        print(f"group member joined q2 (subscribed to t); committing t-0@40, t-1@60: "
              f"{commit_error(group, [TopicPartition('t', 0, 40), TopicPartition('t', 1, 60)])}")  # fmt: skip

        fetch = lab.consumer("q2", client_id="fetch")
        fetch.assign([TopicPartition("t", 0), TopicPartition("t", 1)])
        first = first_offsets(fetch, 2, 10)
        print(f"assign-only consumer, same group.id, assign([t-0, t-1]): first offsets {first}")
        own = commit_error(fetch, [TopicPartition("t", 0, 41)])
        print(f"  its own commit of t-0@41 (the group has a member): {own}")
        print(f"  members of q2 now: {[m.client_id for m in lab.describe('q2').members]}")

        pending_transactional_commit(lab, group)
        incremental(lab, fetch)


def pending_transactional_commit(lab: Lab, group: Consumer) -> None:
    """A transaction commits t-2@30 for the group; readers assign t-2 while it is open, then it commits."""
    producer = lab.producer(transactional_id="q2-tx")
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.send_offsets_to_transaction([TopicPartition("t", 2, 30)], group.consumer_group_metadata(), 30)
    print("transaction open with t-2@30 sent (send_offsets_to_transaction), not committed")
    committed = lab.consumer("q2", client_id="rc", isolation_level="read_committed")
    uncommitted = lab.consumer("q2", client_id="ru", isolation_level="read_uncommitted")
    committed.assign([TopicPartition("t", 2)])
    uncommitted.assign([TopicPartition("t", 2)])
    got_rc: list[int] = []
    got_ru: list[int] = []
    end = time.monotonic() + 3
    while time.monotonic() < end:
        got_rc += [where(m)[1] for m in pump(committed)]
        got_ru += [where(m)[1] for m in pump(uncommitted)]
    print(f"  for 3 s: read_committed reader got {len(got_rc)} records; read_uncommitted reader started at "
          f"{got_ru[0] if got_ru else None}")  # fmt: skip
    print(f"  stable offsets (admin, require_stable=True) are not answered while open: {stable_probe(lab)}")
    start = time.monotonic()
    producer.commit_transaction(30)
    took = wait_for(lambda: bool(got_rc), 30, "read_committed after commit",
                    lambda: got_rc.extend(where(m)[1] for m in pump(committed)))  # fmt: skip
    print(
        f"  after commit_transaction: read_committed reader starts at {got_rc[0]}, "
        f"{took * 1000:.0f} ms after the commit began ({(time.monotonic() - start) * 1000:.0f} ms total)"
    )


def stable_probe(lab: Lab) -> str:
    try:
        return f"answered {lab.committed('q2', [('t', 2)], stable=True)}"
    except Exception as e:  # the admin future fails with the broker's error
        return f"{type(e).__name__}: {e}"


def incremental(lab: Lab, fetch: Consumer) -> None:
    """fetch (at the end of t-0/t-1) reads them one record at a time while more are written; mid-stream it
    adds t-2 (committed at 30), later drops t-1; every partition's offsets must be one contiguous run."""
    seen: dict[int, list[int]] = defaultdict(list)

    def take_until(done: Callable[[], bool]) -> None:
        deadline = time.monotonic() + 30
        while not done():
            if time.monotonic() > deadline:
                raise TimeoutError(f"fetch stalled; read so far: { {p: o[-1] for p, o in seen.items()} }")
            for msg in fetch.consume(1, 0.5):
                if msg.error() is None:
                    partition, offset = where(msg)
                    seen[partition].append(offset)

    for p in (0, 1):
        lab.fill("t", p, 200, start=100)
    take_until(lambda: len(seen[0]) >= 20 and len(seen[1]) >= 20)
    fetch.incremental_assign([TopicPartition("t", 2)])
    print(f"incremental_assign([t-2]) after {len(seen[0])} + {len(seen[1])} records of t-0/t-1 (one per consume)")
    for p in (0, 1):
        lab.fill("t", p, 100, start=300)
    take_until(lambda: len(seen[1]) >= 150 and len(seen[2]) >= 20)
    fetch.incremental_unassign([TopicPartition("t", 1)])
    t1_at_unassign = len(seen[1])
    print(f"incremental_unassign([t-1]) after {t1_at_unassign} records of t-1, {len(seen[2])} of t-2")
    lab.fill("t", 0, 100, start=400)
    lab.fill("t", 2, 50, start=100)
    take_until(lambda: seen[0][-1:] == [499] and seen[2][-1:] == [149])
    for msg in fetch.consume(100, 1.0):  # anything of t-1 still queued would show up here
        if msg.error() is None:
            partition, offset = where(msg)
            seen[partition].append(offset)
    for p, offsets in sorted(seen.items()):
        contiguous = offsets == list(range(offsets[0], offsets[0] + len(offsets)))
        print(f"  t-{p}: offsets {offsets[0]}..{offsets[-1]}, {len(offsets)} records, contiguous without "
              f"duplicates: {contiguous}")  # fmt: skip
    print(f"  t-1 records after its incremental_unassign: {len(seen[1]) - t1_at_unassign} (none expected)")
    print(f"  assignment at the end: {sorted((tp.topic, tp.partition) for tp in fetch.assignment())}")


if __name__ == "__main__":
    main()
