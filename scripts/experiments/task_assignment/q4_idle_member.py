"""Q4: a subscribed member that fetches nothing, two ways: ``assign([])`` in on_assign, or assign the given
partitions and ``pause`` them. Does it fetch (librdkafka statistics)? Do rebalances and heartbeats go on
(a 2nd member joins, both get on_assign; no rebalance while it idles past session.timeout.ms)? CPU seconds
of 1000 ``consume(100, 0)`` calls."""

from __future__ import annotations

import json
import time
from typing import Any

from confluent_kafka import Consumer, TopicPartition
from harness import Lab, kafka, pump, wait_for


def idle_member(lab: Lab, group: str, variant: str, events: list[str], stats: dict[str, Any]) -> Consumer:
    def on_assign(consumer: Consumer, parts: list[TopicPartition]) -> None:
        events.append(f"m1 on_assign {[p.partition for p in parts]}")
        if variant == "assign([])":
            consumer.assign([])
        else:
            consumer.assign(parts)
            consumer.pause(parts)

    consumer = lab.consumer(group, client_id="m1", statistics_interval_ms=500,
                            stats_cb=lambda s: stats.update(json.loads(s)))  # fmt: skip
    consumer.subscribe(["x"], on_assign=on_assign, on_revoke=lambda c, p: events.append("m1 on_revoke"))
    return consumer


def fetch_facts(stats: dict[str, Any]) -> str:
    parts = stats.get("topics", {}).get("x", {}).get("partitions", {})
    states = {p: (v["fetch_state"], v["fetchq_cnt"]) for p, v in parts.items() if p != "-1"}
    return f"per partition (fetch_state, queued msgs) {states}; rxmsgs {stats.get('rxmsgs')}"


def cpu_of_idle_polls(consumer: Consumer) -> tuple[float, float, int]:
    """(CPU seconds, wall seconds, records returned) of 1000 consume(100, 0) calls."""
    records = 0
    cpu, wall = time.process_time(), time.monotonic()
    for _ in range(1000):
        records += len(consumer.consume(100, 0))
    return time.process_time() - cpu, time.monotonic() - wall, records


def run(lab: Lab, variant: str) -> None:
    group = "q4-" + ("empty" if variant == "assign([])" else "paused")
    events: list[str] = []
    stats: dict[str, Any] = {}
    m1 = idle_member(lab, group, variant, events, stats)
    wait_for(lambda: bool(events), 30, "m1's assignment", lambda: pump(m1))
    time.sleep(1.2)  # two statistics intervals (500 ms), so stats_cb reports the state after on_assign
    pump(m1)
    cpu, wall, records = cpu_of_idle_polls(m1)
    print(f"[{variant}] m1 alone: {events}; assignment() = {[p.partition for p in m1.assignment()]}")
    print(f"  1000 x consume(100, 0): {cpu:.3f} CPU s, {wall:.3f} wall s, {records} records")
    print(f"  fetching? {fetch_facts(stats)}")
    cpu = time.process_time()
    end = time.monotonic() + 5
    while time.monotonic() < end:
        m1.consume(100, 0)
        time.sleep(0.01)
    print(f"  5 s of consume(100, 0) every 10 ms: {time.process_time() - cpu:.3f} CPU s (whole process)")

    m2_events: list[str] = []
    m2 = lab.consumer(group, client_id="m2")
    m2.subscribe(["x"], on_assign=lambda c, p: m2_events.append(f"m2 on_assign {[x.partition for x in p]}"))
    start = time.monotonic()
    wait_for(lambda: bool(m2_events) and events.count("m1 on_revoke") == 1 and len(events) >= 3, 30,
             "both reassigned", lambda: pump(m1, m2))  # fmt: skip
    print(f"  m2 joins: {events[1:]} and {m2_events}, {time.monotonic() - start:.1f} s")
    before = (len(events), len(m2_events))
    quiet_until = time.monotonic() + 9  # session.timeout.ms is 6 s: a member without heartbeats would go
    m2_records = 0
    while time.monotonic() < quiet_until:
        m1.consume(100, 0)
        m2_records += len(pump(m2, timeout=0.01))
    described = lab.describe(group)
    print(
        f"  9 s later: group {described.state.name}, members {sorted(m.client_id for m in described.members)}, "
        f"callbacks since {len(events) - before[0] + len(m2_events) - before[1]}, m2 read {m2_records} records"
    )
    print(f"  m1 {fetch_facts(stats)}")


def main() -> None:
    with kafka() as lab:
        lab.create_topics(x=4)
        for p in range(4):
            lab.fill("x", p, 1000)
        for variant in ("assign([])", "assign+pause"):
            run(lab, variant)


if __name__ == "__main__":
    main()
