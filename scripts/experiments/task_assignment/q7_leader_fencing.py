"""Q7: two producers call init_transactions() with the same transactional.id (the leader's
``<app>-assignment-leader``): is the first fenced, with which error, and when does it learn it? What does
init_transactions cost (first on the broker, a fresh id, a takeover of a live id)?"""

from __future__ import annotations

import statistics
import time
from typing import Any

from confluent_kafka import KafkaException, TopicPartition
from harness import Lab, describe_error, kafka

TXN_ID = "app-assignment-leader"


def timed_init(lab: Lab, txn_id: str, **config: Any) -> tuple[Any, float]:
    producer = lab.producer(transactional_id=txn_id, **config)
    start = time.monotonic()
    producer.init_transactions(30)
    return producer, time.monotonic() - start


def attempt(what: str, call: Any) -> str:
    try:
        call()
        return f"{what}: ok"
    except KafkaException as e:
        return f"{what}: {describe_error(e)}"


def main() -> None:
    with kafka() as lab:
        lab.create_topics(control=1)
        p1_errors: list[str] = []
        p1_reports: list[str] = []
        p1, first = timed_init(lab, TXN_ID, error_cb=lambda e: p1_errors.append(describe_error(e)))
        print(f"p1 init_transactions: {first * 1000:.0f} ms (first transactional producer on this broker)")
        p1.begin_transaction()
        p1.produce("control", b"p1-open", on_delivery=lambda e, m: p1_reports.append(describe_error(e)))
        p1.flush(10)
        print(f"p1 has an open transaction with 1 record (delivery: {p1_reports[-1]})")

        p2, takeover = timed_init(lab, TXN_ID)
        print(f"p2 init_transactions on the same id: {takeover * 1000:.0f} ms (p1's transaction open)")
        p1.poll(1.0)
        print(f"p1 idle 1 s after that: error_cb {p1_errors or 'not called'}")
        p1.produce("control", b"p1-late", on_delivery=lambda e, m: p1_reports.append(describe_error(e)))
        try:
            p1.flush(10)
            flushed = "flush ok"
        except SystemError as e:  # seen with confluent-kafka 2.16.1: the binding's own bug, no KafkaError
            flushed = f"flush raised SystemError: {e}"
        print(f"p1 produces again: delivery {p1_reports[-1]}; {flushed}; error_cb {p1_errors or 'not called'}")
        print(attempt("p1 commit_transaction", lambda: p1.commit_transaction(10)))
        print(attempt("p1 abort_transaction", lambda: p1.abort_transaction(10)))
        print(attempt("p1 begin_transaction", p1.begin_transaction))
        p2.begin_transaction()
        p2.produce("control", b"p2")
        print(attempt("p2 begin + produce + commit_transaction", lambda: p2.commit_transaction(10)))

        reader = lab.consumer("q7-reader", isolation_level="read_committed")
        reader.assign([TopicPartition("control", 0, 0)])
        values: list[bytes] = []
        deadline = time.monotonic() + 10
        while b"p2" not in values and time.monotonic() < deadline:
            values += [m.value() or b"" for m in reader.consume(10, 0.2) if m.error() is None]
        print(f"read_committed reader sees {values}")

        fresh = [timed_init(lab, f"fresh-{i}")[1] * 1000 for i in range(5)]
        taken = [timed_init(lab, TXN_ID)[1] * 1000 for _ in range(5)]
        print(f"init_transactions, median of 5: fresh id {statistics.median(fresh):.0f} ms "
              f"({min(fresh):.0f}-{max(fresh):.0f}); takeover of a live id {statistics.median(taken):.0f} ms "
              f"({min(taken):.0f}-{max(taken):.0f})")  # fmt: skip


if __name__ == "__main__":
    main()
