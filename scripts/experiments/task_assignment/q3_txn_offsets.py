"""Q3: ``producer.send_offsets_to_transaction(offsets, group_consumer.consumer_group_metadata())`` for
partitions the group consumer does not own: committed? With a stale generation (the member rejoined since),
after the member's eviction (no poll past max.poll.interval.ms), and with hand-made metadata carrying
generation -1 and no member id: which error, where (send_offsets or commit), retriable/abortable/fatal?"""

from __future__ import annotations

import time
from typing import Any

from confluent_kafka import KafkaException, Producer, TopicPartition
from harness import Lab, describe_error, kafka, pump, wait_for


def transaction(lab: Lab, producer: Producer, offset: int, metadata: Any) -> str:
    """One transaction writing a record to `out` and y-0@offset for q3; what happened, and y-0 after it."""
    producer.begin_transaction()
    producer.produce("out", f"y-0@{offset}".encode())
    try:
        producer.send_offsets_to_transaction([TopicPartition("y", 0, offset)], metadata, 30)
    except KafkaException as e:
        outcome = f"send_offsets_to_transaction failed: {describe_error(e)}"
        outcome += "; " + abort(producer)
    else:
        try:
            producer.commit_transaction(30)
            outcome = "committed"
        except KafkaException as e:
            outcome = f"commit_transaction failed: {describe_error(e)}; " + abort(producer)
    return f"{outcome}; y-0 now {lab.settled('q3', [('y', 0)])['y-0']}"


def abort(producer: Producer) -> str:
    try:
        producer.abort_transaction(30)
        return "abort_transaction ok"
    except KafkaException as e:
        return f"abort_transaction failed: {describe_error(e)}"


def main() -> None:
    with kafka() as lab:
        lab.create_topics(x=2, y=2, out=1)
        assigned: dict[str, int] = {}

        def member(name: str) -> Any:
            consumer = lab.consumer("q3", client_id=name, max_poll_interval_ms=6000)
            consumer.subscribe(["x"], on_assign=lambda c, p: assigned.__setitem__(name, assigned.get(name, 0) + 1))
            return consumer

        a = member("a")
        wait_for(lambda: "a" in assigned, 30, "a's assignment", lambda: pump(a))
        gen1 = a.consumer_group_metadata()
        producer = lab.producer(transactional_id="q3-tx")
        producer.init_transactions(30)
        print(f"a subscribes to x only; metadata {gen1!r}")
        print(f"1. y-0@3 with a's metadata (y not a's): {transaction(lab, producer, 3, gen1)}")

        b = member("b")
        wait_for(lambda: assigned.get("a") == 2 and "b" in assigned, 30, "rebalance 2", lambda: pump(a, b))
        print(f"b joined, both reassigned; a's metadata now {a.consumer_group_metadata()!r}")
        print(f"2. y-0@4 with a's generation-1 metadata (stale): {transaction(lab, producer, 4, gen1)}")
        print(f"3. y-0@5 with a's current metadata: {transaction(lab, producer, 5, a.consumer_group_metadata())}")
        gen2 = a.consumer_group_metadata()

        stopped = time.monotonic()
        wait_for(lambda: assigned.get("b") == 2, 60, "rebalance without a", lambda: pump(b))
        members = [m.client_id for m in lab.describe("q3").members]
        print(f"a not polled: b reassigned {time.monotonic() - stopped:.1f} s later, members {members}; "
              f"a's metadata (not polled) {a.consumer_group_metadata()!r}")  # fmt: skip
        print(f"4. y-0@6 with evicted a's last metadata: {transaction(lab, producer, 6, gen2)}")
        emptied = a.consumer_group_metadata()
        print(f"4b. y-0@6 with evicted a's metadata read now (member id emptied): "
              f"{transaction(lab, producer, 6, emptied)}")  # fmt: skip
        handmade = b"CGMDv2:" + (-1).to_bytes(4, "little", signed=True) + b"q3\x00\x00\x01"
        print(f"5. y-0@7 with hand-made metadata {handmade!r} (generation -1, no member id; b in the group): "
              f"{transaction(lab, producer, 7, handmade)}")  # fmt: skip
        errors = [describe_error(m.error()) for m in a.consume(10, 1.0) if m.error() is not None]
        print(f"a polls again: errors {errors}; metadata {a.consumer_group_metadata()!r}")
        print(f"6. y-0@8 with evicted a's metadata after that poll: "
              f"{transaction(lab, producer, 8, a.consumer_group_metadata())}")  # fmt: skip


if __name__ == "__main__":
    main()
