"""An app on Apache Kafka with a real Schema Registry (the session's Apicurio, Confluent's API): it reads an Avro
topic written through the registry, aggregates into an Avro store and writes Avro; checked against a recount
and against the subjects and ids the registry answers."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext

import kstream_nb as ks
from tests.kafka.conftest import Names
from tests.kafka_broker import FAST_CLIENT_CONFIG
from tests.registry_helpers import ORDER_V1, framing

pytestmark = pytest.mark.kafka

TOTAL = {
    "type": "record",
    "name": "Total",
    "namespace": "shop",
    "fields": [{"name": "customer", "type": "string"}, {"name": "total", "type": "double"}],
}
ORDERS = [(f"c{i % 5}", {"id": f"o{i}", "amount": float((i * 11) % 30)}) for i in range(200)]


def test_an_app_on_kafka_reads_avro_through_the_registry_aggregates_and_writes_avro(
    kafka_bootstrap: str,
    schema_registry_url: str,
    names: Names,
    make_kafka_app: Callable[..., ks.KafkaStreams],
) -> None:
    orders, totals, app_id = names("orders"), names("totals"), names("avro-totals")
    io = {"bootstrap_servers": kafka_bootstrap, "schema_registry_url": schema_registry_url}
    avro_orders = ks.Serdes.avro(ORDER_V1)
    ks.produce(orders, ORDERS, partitions=3, value_serde=avro_orders, client_config=FAST_CLIENT_CONFIG, **io)
    b = ks.StreamsBuilder()
    stream = b.stream(orders, value_serde="avro")
    stream[stream["amount"] > 10].group_by_key().aggregate(
        lambda: 0.0,
        lambda k, v, total: total + v["amount"],
        store="totals",
        value_serde=ks.Serdes.avro({"type": "double"}),
    ).to_stream().map_values(lambda k, v: {"customer": k, "total": v}).to(
        totals, value_serde=ks.Serdes.avro(TOTAL)
    )
    app = make_kafka_app(b.build(), app_id, schema_registry_url=schema_registry_url)
    app.start().wait_until_running(60).wait_until_idle(60)
    expected: dict[str, float] = defaultdict(float)
    for customer, order in ORDERS:
        if order["amount"] > 10:
            expected[customer] += order["amount"]
    out = ks.read_topic(totals, value_serde="avro", client_config=FAST_CLIENT_CONFIG, **io)
    assert {v["customer"]: v["total"] for v in out["value"]} == dict(expected)
    registry = SchemaRegistryClient({"url": schema_registry_url})
    raw = ks.read_topic(totals, value_serde="bytes", client_config=FAST_CLIENT_CONFIG, **io)["value"]
    assert {framing(data)[0] for data in raw} == {registry.get_latest_version(f"{totals}-value").schema_id}
    # another client (as a Java or Python consumer elsewhere) reads the app's output with the fetched schema
    reader, ctx = AvroDeserializer(registry), SerializationContext(totals, MessageField.VALUE)
    assert [reader(data, ctx) for data in raw] == out["value"].tolist()
    subjects = set(registry.get_subjects())
    assert {f"{orders}-value", f"{totals}-value", f"{app_id}-totals-changelog-value"} <= subjects
