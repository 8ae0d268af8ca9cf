"""A topic written as a Java producer writes it (String keys: the key's UTF-8 bytes, partitioned by murmur2)
reads with kstream_nb's defaults and joins with records that kstream_nb keys by ``str``."""

from __future__ import annotations

import orjson
import pytest
from confluent_kafka import Producer

import kstream_nb as ks
from kstream_nb.cluster import connect
from kstream_nb.cluster.base import TopicSpec
from tests.helpers import wait_for

pytestmark = pytest.mark.kafka

PARTITIONS = 4
#: user ids as Java apps write them, some of which look like numbers
USERS = {f"user-{i}": f"region-{i % 3}" for i in range(12)} | {str(1000 + i): f"region-{i % 3}" for i in range(8)}


def _produce_like_java(bootstrap: str, topic: str) -> None:
    """Java's StringSerializer keys and its default partitioner (murmur2), through librdkafka."""
    producer = Producer({"bootstrap.servers": bootstrap, "partitioner": "murmur2_random"})
    for user, region in USERS.items():
        producer.produce(topic, key=user.encode("utf-8"), value=orjson.dumps({"region": region}))
    assert producer.flush(30) == 0


def test_java_string_keyed_table_joins_a_stream_keyed_by_str(kafka_bootstrap: str, names, make_kafka_app) -> None:
    users, orders, out = names("users"), names("orders"), names("enriched")
    admin = connect(kafka_bootstrap).admin()
    admin.create_topics([TopicSpec(users, PARTITIONS), TopicSpec(orders, PARTITIONS), TopicSpec(out, PARTITIONS)])
    _produce_like_java(kafka_bootstrap, users)

    # the defaults read the Java producer's topic: each key where Java put it, as the user id
    table = ks.read_topic(users, bootstrap_servers=kafka_bootstrap)
    assert {str(k): v["region"] for k, v in zip(table["key"], table["value"], strict=True)} == USERS

    # orders keyed by the same ids, as str, by kstream_nb: they must land in the users' partitions
    order_records = [(user, {"order": n, "amount": n * 10}) for n, user in enumerate(sorted(USERS))]
    ks.produce(orders, order_records, bootstrap_servers=kafka_bootstrap, partitions=PARTITIONS)
    placed = ks.read_topic(orders, bootstrap_servers=kafka_bootstrap)
    partition_of_user = {str(k): p for k, p in zip(table["key"], table["partition"], strict=True)}
    assert all(partition_of_user[str(k)] == p for k, p in zip(placed["key"], placed["partition"], strict=True))

    b = ks.StreamsBuilder()
    regions = b.table(users)
    b.stream(orders).join(regions, lambda order, user: {**order, "region": user["region"]}).to(out)
    app = make_kafka_app(b.build(), application_id=names("join-app")).start()
    app.wait_until_running(60)
    wait_for(
        lambda: len(ks.read_topic(out, bootstrap_servers=kafka_bootstrap)) >= len(order_records),
        timeout=60,
        what="every order joined",
    )
    app.wait_until_idle(30)
    joined = ks.read_topic(out, bootstrap_servers=kafka_bootstrap)
    assert len(joined) == len(order_records)
    assert {(str(k), v["order"], v["region"]) for k, v in zip(joined["key"], joined["value"], strict=True)} == {
        (user, order["order"], USERS[user]) for user, order in order_records
    }
