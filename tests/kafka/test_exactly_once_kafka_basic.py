"""exactly_once_v2 on Apache Kafka: transactional producers, read_committed consumers.

Quick checks in one process; the fault test with SIGKILLed instances is in test_exactly_once_kafka.py.
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

import pytest

import kstream_nb as ks
from kstream_nb.cluster import connect
from kstream_nb.cluster.records import TopicPartition
from tests.helpers import wait_for

pytestmark = pytest.mark.kafka

SENTENCES = [f"w{i % 7} w{i % 3} w{i % 5}" for i in range(600)]


def topology(names: Any) -> ks.Topology:
    b = ks.StreamsBuilder()
    counts = b.stream(names("sentences")).flat_map_values(str.split).group_by(lambda k, w: w).count(store="counts")
    counts.to_stream().to(names("counts-out"))
    return b.build()


def test_word_count_exactly_once_on_kafka(kafka_bootstrap: str, names: Any, make_kafka_app: Any) -> None:
    ks.produce(names("sentences"), SENTENCES, bootstrap_servers=kafka_bootstrap, partitions=3)
    app = make_kafka_app(
        topology(names), names("eos"), processing_guarantee="exactly_once_v2", num_stream_threads=2
    )
    app.start().wait_until_running(60).wait_until_idle(60)
    expected = Counter(w for s in SENTENCES for w in s.split())
    assert dict(app.store("counts").all()) == dict(expected)
    out = ks.read_topic(names("counts-out"), bootstrap_servers=kafka_bootstrap)
    assert Counter(out["key"]) == expected  # one update per increment, no duplicate
    assert app.metrics()["commit-total"] > 0
    assert app.stop()


def test_pandas_style_sink_exactly_once_on_kafka(kafka_bootstrap: str, names: Any, make_kafka_app: Any) -> None:
    """Column expressions (a filter and a computed column) under exactly_once_v2: read_committed sees each
    selected order once, with its computed column."""
    orders = [(f"o{i}", {"amount": i * 10, "qty": i % 4}) for i in range(300)]
    ks.produce(names("orders"), orders, bootstrap_servers=kafka_bootstrap, partitions=3, timestamps=1_000)
    b = ks.StreamsBuilder()
    s = b.stream(names("orders"))
    s[s["amount"] > 1_000].assign(total=s["amount"] * s["qty"]).to(names("big"))
    app = make_kafka_app(b.build(), names("eos-columns"), processing_guarantee="exactly_once_v2")
    app.start().wait_until_running(60).wait_until_idle(60)
    out = ks.read_topic(names("big"), bootstrap_servers=kafka_bootstrap)
    expected = {k: {**v, "total": v["amount"] * v["qty"]} for k, v in orders if v["amount"] > 1_000}
    assert len(out) == len(expected)
    assert dict(zip(out["key"], out["value"], strict=True)) == expected
    assert app.stop()


def test_a_transaction_that_outlives_its_timeout_is_fenced_and_the_tasks_rebuilt(
    kafka_bootstrap: str, names: Any, make_kafka_app: Any
) -> None:
    """A record that takes longer than ``transaction.timeout.ms`` (2 s here): the broker aborts the open
    transaction and fences the producer. As Kafka Streams does, a new producer takes over, the tasks are
    rebuilt from their changelogs and read again from the committed offsets: the counts end exact."""
    source, repartition = names("slow-in"), f"{names('fenced')}-counts-repartition"
    ks.produce(source, ["a b", "c slow", "d"], bootstrap_servers=kafka_bootstrap)
    inside, go_on = threading.Event(), threading.Event()

    def hold_once(key: Any, word: str) -> None:
        if word == "slow" and not go_on.is_set():
            inside.set()
            go_on.wait(60)

    b = ks.StreamsBuilder()
    words = b.stream(source).flat_map_values(str.split).peek(hold_once)  # "c" is sent before "slow" holds
    words.group_by(lambda k, w: w).count(store="counts").to_stream().to(names("slow-out"))
    app = make_kafka_app(
        b.build(), names("fenced"), processing_guarantee="exactly_once_v2",
        client_config={"producer.transaction.timeout.ms": 2000},
    )  # fmt: skip
    app.start()
    assert inside.wait(60), "the slow record was never reached"
    admin = connect(kafka_bootstrap).admin()
    tp = TopicPartition(repartition, 0)

    def aborted_by_the_broker() -> bool:  # the open transaction's marker is written: nothing is open
        ends = admin.end_offsets([tp])[tp]
        return ends > 0 and admin.committed_end_offsets([tp])[tp] == ends

    wait_for(aborted_by_the_broker, timeout=60, what="the broker to abort the timed-out transaction")
    go_on.set()
    app.wait_until_idle(60)
    assert dict(app.store("counts").all()) == {"a": 1, "b": 1, "c": 1, "slow": 1, "d": 1}
    out = ks.read_topic(names("slow-out"), bootstrap_servers=kafka_bootstrap)
    assert Counter(out["key"]) == {"a": 1, "b": 1, "c": 1, "slow": 1, "d": 1}
    assert app.stop()
