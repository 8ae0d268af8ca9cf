"""Schema Registry serdes (Avro, Protobuf, JSON Schema) through ks.produce / ks.read_topic, on the embedded
registry of a memory:// cluster; the wire format and the subjects are checked against the registry's own
answers and against fastavro / protobuf / json decoding the payload on their own."""

from __future__ import annotations

import base64
import io
import json
import pickle
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import fastavro
import numpy as np
import pandas as pd
import pytest
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext

import kstream_nb as ks
from kstream_nb.cluster.memory import reset_cluster
from kstream_nb.cluster.registry_serdes import AvroRecord, AvroSerde, JsonSchemaSerde, ProtobufSerde
from kstream_nb.cluster.schema_registry import SchemaRegistryError, embedded_registry
from kstream_nb.cluster.serde_specs import serde_from
from kstream_nb.errors import DeserializationError, SerializationError
from tests.registry_helpers import (
    JSON_ORDER,
    ORDER_V1,
    ORDER_V2,
    REGISTRIES,
    Registry,
    framing,
    order_class,
    registry_for,
)


@pytest.fixture(params=REGISTRIES)
def registry(request: pytest.FixtureRequest) -> Iterator[Registry]:
    yield from registry_for(request)


# ---- Avro ---------------------------------------------------------------------------------------------------


def test_avro_round_trip_reads_with_no_schema(registry: Registry) -> None:
    topic = registry.topic("orders")
    orders = [("c1", {"id": "o1", "amount": 5.0}), ("c2", {"id": "o2", "amount": 20.5})]
    registry.produce(topic, orders, value_serde=ks.Serdes.avro(ORDER_V1))
    frame = registry.read(topic, value_serde="avro")
    assert list(zip(frame["key"], frame["value"])) == orders
    raw = registry.read(topic, value_serde="bytes")["value"].tolist()
    schema_id = registry.schema_id(f"{topic}-value")
    parsed = fastavro.parse_schema(ORDER_V1)
    for data, (_, value) in zip(raw, orders):
        written_id, payload = framing(data)
        assert written_id == schema_id
        assert fastavro.schemaless_reader(io.BytesIO(payload), parsed) == value
        # a reader elsewhere (its own client, as another process has) reads them with confluent's deserializer
        assert AvroDeserializer(registry.client)(data, SerializationContext(topic, MessageField.VALUE)) == value
    assert json.loads(registry.client.get_schema(schema_id).schema_str)["name"] in ("Order", "shop.Order")


def test_avro_keys_use_the_key_subject(registry: Registry) -> None:
    topic = registry.topic("keyed")
    key_schema = {"type": "record", "name": "CustomerKey", "fields": [{"name": "customer", "type": "string"}]}
    registry.produce(topic, [({"customer": "c1"}, 1)], key_serde=ks.Serdes.avro(key_schema), value_serde="long")
    frame = registry.read(topic, key_serde="avro", value_serde="long")
    assert frame["key"].tolist() == [{"customer": "c1"}] and frame["value"].tolist() == [1]
    assert registry.client.get_subjects() and f"{topic}-key" in registry.client.get_subjects()
    assert f"{topic}-value" not in registry.client.get_subjects()


def test_avro_records_are_dicts_column_expressions_can_filter(registry: Registry) -> None:
    topic = registry.topic("filtered")
    registry.produce(
        topic, [{"id": f"o{i}", "amount": float(i * 4)} for i in range(6)], value_serde=ks.Serdes.avro(ORDER_V1)
    )
    driver_topology = ks.StreamsBuilder()
    stream = driver_topology.stream(topic, value_serde="avro")
    stream[stream["amount"] > 10].to(registry.topic("big"), value_serde=ks.Serdes.avro(ORDER_V1))
    app = ks.KafkaStreams(driver_topology.build(), registry.topic("filter-app"), registry.bootstrap,
                          schema_registry_url=registry.url)  # fmt: skip
    try:
        app.start().wait_until_running().wait_until_idle()
        out = registry.read(registry.topic("big"), value_serde="avro")["value"].tolist()
    finally:
        assert app.stop()
    assert out == [{"id": f"o{i}", "amount": float(i * 4)} for i in range(6) if i * 4 > 10]


@pytest.mark.parametrize(
    ("strategy", "subject"),
    [("topic", "{topic}-value"), ("record", "shop.Order"), ("topic_record", "{topic}-shop.Order")],
)
def test_subject_name_strategies(registry: Registry, strategy: str, subject: str) -> None:
    topic = registry.topic(f"strategy-{strategy}")
    schema = {**ORDER_V1, "namespace": f"shop{registry.suffix}"}
    expected = subject.format(topic=topic).replace("shop.", f"shop{registry.suffix}.")
    registry.produce(topic, [{"id": "o1", "amount": 1.0}], value_serde=AvroSerde(schema, strategy))
    assert expected in registry.client.get_subjects()
    (data,) = registry.read(topic, value_serde="bytes")["value"]
    assert framing(data)[0] == registry.schema_id(expected)
    assert registry.read(topic, value_serde="avro")["value"].tolist() == [{"id": "o1", "amount": 1.0}]


def test_schema_evolution_a_reader_sees_both_versions(registry: Registry) -> None:
    topic = registry.topic("evolving")
    registry.produce(topic, [{"id": "o1", "amount": 1.0}], value_serde=ks.Serdes.avro(ORDER_V1))
    registry.produce(topic, [{"id": "o2", "amount": 2.0, "currency": "USD"}], value_serde=ks.Serdes.avro(ORDER_V2))
    assert sorted(registry.client.get_versions(f"{topic}-value")) == [1, 2]
    ids = [framing(d)[0] for d in registry.read(topic, value_serde="bytes")["value"]]
    assert ids == [registry.schema_id(f"{topic}-value", 1), registry.schema_id(f"{topic}-value", 2)]
    # each record as its writer wrote it
    assert registry.read(topic, value_serde="avro")["value"].tolist() == [
        {"id": "o1", "amount": 1.0},
        {"id": "o2", "amount": 2.0, "currency": "USD"},
    ]
    # both resolved into the v2 reader schema: the v1 record gets the default
    assert registry.read(topic, value_serde=AvroSerde(reader_schema=ORDER_V2))["value"].tolist() == [
        {"id": "o1", "amount": 1.0, "currency": "EUR"},
        {"id": "o2", "amount": 2.0, "currency": "USD"},
    ]


@pytest.mark.parametrize("registry", [pytest.param("real", marks=pytest.mark.registry)], indirect=True)
def test_an_incompatible_schema_is_refused_with_the_registrys_message(registry: Registry) -> None:
    topic = registry.topic("incompatible")
    registry.produce(topic, [{"id": "o1", "amount": 1.0}], value_serde=ks.Serdes.avro(ORDER_V1))
    # a field without a default: a reader of this version cannot read v1 records (not BACKWARD compatible)
    v3 = {**ORDER_V1, "fields": [*ORDER_V1["fields"], {"name": "qty", "type": "int"}]}
    with pytest.raises(SchemaRegistryError) as refused:
        registry.produce(topic, [{"id": "o2", "amount": 2.0, "qty": 1}], value_serde=ks.Serdes.avro(v3))
    message = str(refused.value)
    assert f"topic '{topic}', subject '{topic}-value'" in message
    assert f"Schema Registry at {registry.url} answered" in message and "HTTP status code 409" in message
    assert refused.value.url == registry.url
    assert registry.client.get_versions(f"{topic}-value") == [1]


# ---- Protobuf -----------------------------------------------------------------------------------------------


def test_protobuf_round_trip_as_dicts_and_messages(registry: Registry) -> None:
    order = order_class()
    topic = registry.topic("pb-orders")
    messages = [
        order(order_id="o1", quantity=2**40, kind="STORE", tags=["a", "b"], customer={"name": "Ann"}),
        order(order_id="o2", quantity=3),
    ]
    registry.produce(
        topic, [messages[0], {"order_id": "o2", "quantity": 3}], value_serde=ks.Serdes.protobuf(order)
    )
    raw = registry.read(topic, value_serde="bytes")["value"].tolist()
    schema_id = registry.schema_id(f"{topic}-value")
    for data, message in zip(raw, messages):
        written_id, payload = framing(data)
        assert written_id == schema_id
        # the message indexes: PbOrder is message 1 of its file; a count then the indexes, zigzag varints
        assert payload[:2] == b"\x02\x02"
        assert order.FromString(payload[2:]) == message
    assert registry.client.get_schema(schema_id).schema_type == "PROTOBUF"
    # read with no class: the writer's schema from the registry; 64-bit ints stay ints, enums are names
    assert registry.read(topic, value_serde="protobuf")["value"].tolist() == [
        {"order_id": "o1", "quantity": 2**40, "kind": "STORE", "tags": ["a", "b"], "customer": {"name": "Ann"}},
        {"order_id": "o2", "quantity": 3, "kind": "ONLINE", "tags": [], "customer": None},
    ]
    read_back = registry.read(topic, value_serde=ProtobufSerde(order, as_messages=True))["value"].tolist()
    assert read_back == messages


# ---- JSON Schema --------------------------------------------------------------------------------------------


def test_json_schema_round_trip_and_validation(registry: Registry) -> None:
    topic = registry.topic("json-orders")
    values = [{"id": "o1", "qty": 2}, {"id": "o2", "qty": 7}]
    registry.produce(topic, values, value_serde=ks.Serdes.json_schema(JSON_ORDER))
    raw = registry.read(topic, value_serde="bytes")["value"].tolist()
    schema_id = registry.schema_id(f"{topic}-value")
    assert [framing(d) for d in raw] == [
        (schema_id, json.dumps(v, separators=(",", ":")).encode()) for v in values
    ]
    assert registry.client.get_schema(schema_id).schema_type == "JSON"
    assert registry.read(topic, value_serde="jsonschema")["value"].tolist() == values
    with pytest.raises(SerializationError, match=rf"topic '{topic}', subject '{topic}-value'\).*minimum of 1"):
        registry.produce(topic, [{"id": "o3", "qty": 0}], value_serde=JsonSchemaSerde(JSON_ORDER))


# ---- bad input ----------------------------------------------------------------------------------------------


def test_unknown_schema_id_names_topic_partition_offset_and_id(registry: Registry) -> None:
    topic = registry.topic("unknown-id")
    registry.produce(topic, [{"id": "o1", "amount": 1.0}], value_serde=ks.Serdes.avro(ORDER_V1))
    registry.produce(topic, [b"\x00\x7f\xff\xff\xf0" + b"\x04o2"], value_serde="bytes")
    with pytest.raises(DeserializationError) as caught:
        registry.read(topic, value_serde="avro")
    message = str(caught.value)
    assert f"topic={topic}" in message and "partition=0" in message and "offset=1" in message
    assert "schema id 2147483632" in message and "no such schema" in message


def test_a_record_that_does_not_match_its_schema(registry: Registry) -> None:
    topic = registry.topic("mismatch")
    registry.produce(topic, [{"id": "o1", "amount": 1.0}], value_serde=ks.Serdes.avro(ORDER_V1))
    (good,) = registry.read(topic, value_serde="bytes")["value"]
    schema_id = framing(good)[0]
    registry.produce(topic, [good[:5] + b"\x08o"], value_serde="bytes")  # a string of 4 bytes cut after 1
    with pytest.raises(DeserializationError) as caught:
        registry.read(topic, value_serde="avro")
    message = str(caught.value)
    assert f"topic={topic}" in message and "offset=1" in message and f"schema id {schema_id}" in message


def test_bytes_not_in_the_wire_format(registry: Registry) -> None:
    topic = registry.topic("plain")
    registry.produce(topic, [{"id": "o1"}])  # JSON
    with pytest.raises(DeserializationError, match=r"not in Confluent's Schema Registry wire format.*offset=0"):
        registry.read(topic, value_serde="avro")


def test_writing_needs_the_writers_schema(registry: Registry) -> None:
    with pytest.raises(SerializationError, match=r"needs the writer's schema"):
        registry.produce(registry.topic("no-schema"), [{"id": "o1"}], value_serde="avro")
    with pytest.raises(SerializationError, match=r"needs the writer's schema.*ProtobufSerde\(MyMessage\)"):
        registry.produce(registry.topic("no-class"), [{"id": "o1"}], value_serde="protobuf")


def test_records_read_carry_their_schema_to_be_written_again(registry: Registry) -> None:
    orders, copy = registry.topic("orders"), registry.topic("copy")
    registry.produce(orders, [{"id": "o1", "amount": 1.0}], value_serde=ks.Serdes.avro(ORDER_V1))
    (record,) = registry.read(orders, value_serde="avro")["value"]
    assert record == {"id": "o1", "amount": 1.0} and isinstance(record, AvroRecord)
    assert pickle.loads(pickle.dumps(record)).schema == record.schema
    # written by name ("avro", no schema given) with the schema it carries, registered under the new subject
    registry.produce(copy, [record], value_serde="avro")
    assert registry.read(copy, value_serde="avro")["value"].tolist() == [record]
    assert json.loads(registry.client.get_latest_version(f"{copy}-value").schema.schema_str)["name"] in (
        "Order",
        "shop.Order",
    )
    # a dict built by the user carries none
    with pytest.raises(SerializationError, match=r"needs the writer's schema to write a dict"):
        registry.produce(copy, [{**record, "amount": 2.0}], value_serde="avro")
    order = order_class()
    registry.produce(
        registry.topic("pb"), [order(order_id="o1", quantity=5)], value_serde=ks.Serdes.protobuf(order)
    )
    (message,) = registry.read(registry.topic("pb"), value_serde="protobuf")["value"]
    registry.produce(registry.topic("pb-copy"), [message], value_serde="protobuf")
    (data,) = registry.read(registry.topic("pb-copy"), value_serde="bytes")["value"]
    assert order.FromString(framing(data)[1][2:]) == order(order_id="o1", quantity=5)


def test_embedded_registries_are_per_cluster() -> None:
    a, b = f"memory://sr-a-{uuid.uuid4().hex[:8]}", f"memory://sr-b-{uuid.uuid4().hex[:8]}"
    try:
        ks.produce("orders", [{"id": "o1", "amount": 1.0}], a, value_serde=ks.Serdes.avro(ORDER_V1))
        ks.produce("noise", [{"n": 1}], b, value_serde=ks.Serdes.json_schema({"type": "object"}))
        (data,) = ks.read_topic("orders", a, value_serde="bytes")["value"]
        ks.produce("orders", [data], b, value_serde="bytes")
        assert ks.read_topic("orders", a, value_serde="avro")["value"].tolist() == [{"id": "o1", "amount": 1.0}]
        # b's registry gave id 1 to its own JSON schema; a's Avro schema id means nothing there
        assert embedded_registry(b).get_subjects() == ["noise-value"]
        with pytest.raises(
            DeserializationError, match=r"embedded Schema Registry of memory://sr-b.* is a JSON schema"
        ):
            ks.read_topic("orders", b, value_serde="avro")
    finally:
        reset_cluster(a)
        reset_cluster(b)


def test_a_reset_cluster_gets_an_empty_registry() -> None:
    url = f"memory://sr-reset-{uuid.uuid4().hex[:8]}"
    ks.produce("orders", [{"id": "o1", "amount": 1.0}], url, value_serde=ks.Serdes.avro(ORDER_V1))
    assert embedded_registry(url).get_subjects() == ["orders-value"]
    reset_cluster(url)
    assert embedded_registry(url).get_subjects() == []
    reset_cluster(url)


def test_an_unreachable_registry_is_named() -> None:
    url = f"memory://sr-down-{uuid.uuid4().hex[:8]}"
    with socket_closed() as registry_url:
        with pytest.raises(SchemaRegistryError, match=rf"Schema Registry at {registry_url} cannot be reached"):
            ks.produce("orders", [{"id": "o1", "amount": 1.0}], url, value_serde=ks.Serdes.avro(ORDER_V1),
                       schema_registry_url=registry_url)  # fmt: skip
        ks.produce("orders", [b"\x00\x00\x00\x00\x01\x04o1"], url, value_serde="bytes")
        with pytest.raises(DeserializationError, match=rf"Schema Registry at {registry_url} cannot be reached"):
            ks.read_topic("orders", url, value_serde="avro", schema_registry_url=registry_url)
    reset_cluster(url)


def test_a_kafka_cluster_needs_a_registry_url() -> None:
    with pytest.raises(SchemaRegistryError, match=r"set schema_registry_url="):
        serde_from("avro").configure({"bootstrap_servers": "127.0.0.1:9092"}, is_key=False)


def test_an_unconfigured_serde_says_how_to_bind_it() -> None:
    with pytest.raises(SchemaRegistryError, match=r"has no Schema Registry.*schema_registry_url"):
        ks.Serdes.avro(ORDER_V1).serialize("orders", {"id": "o1", "amount": 1.0})
    with pytest.raises(SchemaRegistryError, match=r"has no Schema Registry"):
        AvroSerde().deserialize("orders", b"\x00\x00\x00\x00\x01\x04o1")


def test_bad_settings_fail_at_once() -> None:
    with pytest.raises(ValueError, match=r"Unrecognized properties: basic.auth.password"):
        ks.read_topic(
            "x", schema_registry_url="http://127.0.0.1:1", schema_registry_config={"basic.auth.password": "p"}
        )
    java = "io.confluent.kafka.serializers.subject.TopicRecordNameStrategy"
    assert AvroSerde(ORDER_V1, java).subject_name_strategy == "topic_record"
    with pytest.raises(ValueError, match=r"unknown subject_name_strategy 'subject'"):
        AvroSerde(ORDER_V1, "subject")
    with pytest.raises(ValueError, match=r"invalid Avro schema"):
        AvroSerde({"type": "record", "name": "R", "fields": [{"name": "x", "type": "nope"}]})


# ---- credentials --------------------------------------------------------------------------------------------


class _Refusing(BaseHTTPRequestHandler):
    """A registry that refuses every request as Confluent's does without valid credentials (401, 40101)."""

    seen: list[str | None] = []

    def do_GET(self) -> None:
        self._refuse()

    def do_POST(self) -> None:
        self._refuse()

    def _refuse(self) -> None:
        type(self).seen.append(self.headers.get("Authorization"))
        body = json.dumps({"error_code": 40101, "message": "Unauthorized"}).encode()
        self.send_response(401)
        self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


def test_basic_auth_settings_reach_the_registry_and_a_refusal_is_named() -> None:
    server = HTTPServer(("127.0.0.1", 0), _Refusing)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    cluster = f"memory://sr-auth-{uuid.uuid4().hex[:8]}"
    _Refusing.seen = []
    # as a Java client's settings name them (the Python client takes basic.auth.user.info alone)
    credentials = {"basic.auth.credentials.source": "USER_INFO", "basic.auth.user.info": "ann:s3cret"}
    try:
        with pytest.raises(SchemaRegistryError, match=rf"Schema Registry at {url} refused the credentials"):
            ks.produce(
                "orders",
                [{"id": "o1", "amount": 1.0}],
                cluster,
                value_serde=ks.Serdes.avro(ORDER_V1),
                schema_registry_url=url,
                schema_registry_config=credentials,
            )
    finally:
        server.shutdown()
        server.server_close()
        reset_cluster(cluster)
    # RFC 7617: "Basic " + base64("user:password")
    assert _Refusing.seen and set(_Refusing.seen) == {"Basic " + base64.b64encode(b"ann:s3cret").decode()}


class socket_closed:
    """A loopback URL nothing listens on (a port bound, then released)."""

    def __enter__(self) -> str:
        import socket

        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        return f"http://127.0.0.1:{port}"

    def __exit__(self, *exc: object) -> None:
        pass


def test_a_dataframe_produced_as_avro(registry: Registry) -> None:
    topic = registry.topic("frame")
    schema = {
        "type": "record",
        "name": "Row",
        "fields": [{"name": "amount", "type": "double"}, {"name": "qty", "type": "long"}],
    }
    frame = pd.DataFrame({"key": ["a", "b", "c"], "amount": [1.5, 2.5, 3.5], "qty": np.arange(3, dtype=np.int64)})
    registry.produce(topic, frame, value_serde=ks.Serdes.avro(schema))
    rows = [{"amount": a, "qty": q} for a, q in zip([1.5, 2.5, 3.5], range(3))]
    assert registry.read(topic, value_serde="avro")["value"].tolist() == rows
    parsed = fastavro.parse_schema(schema)
    payloads = [framing(d)[1] for d in registry.read(topic, value_serde="bytes")["value"]]
    assert [fastavro.schemaless_reader(io.BytesIO(p), parsed) for p in payloads] == rows
