"""A task of several partitions waits for records its consumer has not fetched yet (KIP-695, Kafka Streams'
default ``max.task.idle.ms`` 0): here the consumer hands out one record per poll, so without the wait a
stream-table join would look orders up before the older user records reached the table."""

from __future__ import annotations

import uuid

import kstream_nb as ks


def test_a_join_task_waits_for_table_records_the_broker_already_holds() -> None:
    url = f"memory://idle-{uuid.uuid4().hex[:8]}"
    users = [(f"u{i}", {"name": f"user {i}"}) for i in range(6)]
    orders = [(f"u{5 - i}", {"order": i}) for i in range(6)]  # each order's user comes late in its topic
    ks.produce("users", users, bootstrap_servers=url, partitions=1, timestamps=1)
    ks.produce("orders", orders, bootstrap_servers=url, partitions=1, timestamps=100)
    b = ks.StreamsBuilder()
    b.stream("orders").join(b.table("users"), lambda o, u: {**o, **u}).to("enriched")
    app = ks.KafkaStreams(b.build(), "idle", url, max_poll_records=1).start()
    try:
        app.wait_until_idle(30)
    finally:
        app.stop()
    out = ks.read_topic("enriched", bootstrap_servers=url)
    # every order meets its user: users are stamped before every order, and were on the broker all along
    assert sorted(out["value"].map(lambda v: (v["order"], v["name"]))) == [(i, f"user {5 - i}") for i in range(6)]
