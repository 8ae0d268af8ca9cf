"""exactly_once_v2 on Apache Kafka: transactional producers, read_committed consumers.

Quick checks in one process; the fault test with SIGKILLed instances is in test_exactly_once_kafka.py.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from confluent_kafka import Producer

import kstream_nb as ks
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


def test_a_fenced_producer_is_replaced_and_the_tasks_rebuilt(
    kafka_bootstrap: str, names: Any, make_kafka_app: Any
) -> None:
    """Another producer registers the app thread's transactional id, so the broker fences the thread's
    producer. As Kafka Streams does for a lost task under exactly_once_v2, a new producer takes over and
    the tasks are rebuilt from their changelogs and read again from the committed offsets: counts stay exact."""
    source = names("fence-in")
    first, second = ["a b", "c a"], ["b d", "a"]
    ks.produce(source, first, bootstrap_servers=kafka_bootstrap)
    b = ks.StreamsBuilder()
    counts = b.stream(source).flat_map_values(str.split).group_by(lambda k, w: w).count(store="counts")
    counts.to_stream().to(names("fence-out"))
    app = make_kafka_app(b.build(), names("fenced"), processing_guarantee="exactly_once_v2")
    app.start().wait_until_running(60).wait_until_idle(60)
    (thread,) = app.threads
    usurper = Producer(
        {"bootstrap.servers": kafka_bootstrap, "transactional.id": thread.producer.config["transactional.id"]}
    )
    usurper.init_transactions(30)  # the broker fences the thread's producer
    fenced = thread.producer
    ks.produce(source, second, bootstrap_servers=kafka_bootstrap)
    wait_for(lambda: thread.producer is not fenced, timeout=60, what="the fenced producer to be replaced")
    app.wait_until_idle(60)
    expected = Counter(w for s in first + second for w in s.split())
    assert dict(app.store("counts").all()) == dict(expected)
    out = ks.read_topic(names("fence-out"), bootstrap_servers=kafka_bootstrap)
    assert Counter(out["key"]) == expected  # one update per word: nothing counted twice
    assert app.stop()
