"""The test schema registry (Apicurio Registry through Confluent's API) answers confluent_kafka's
``SchemaRegistryClient`` and its serializers as Confluent's Schema Registry does: Avro, Protobuf and JSON
schemas registered and read back by id, BACKWARD compatibility enforced, the wire format's schema id."""

from __future__ import annotations

import json
import struct
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from tests.registry_server import RegistryServer, RegistryServerError

pytestmark = pytest.mark.registry

ORDER_V1 = {"type": "record", "name": "Order", "namespace": "shop", "fields": [{"name": "id", "type": "long"}]}
#: v1 plus a field with a default: a reader of this version can read v1's records (BACKWARD compatible)
ORDER_V2 = {**ORDER_V1, "fields": [*ORDER_V1["fields"], {"name": "note", "type": "string", "default": ""}]}
#: v1 plus a field without a default: a reader of this version cannot read v1's records
ORDER_BAD = {**ORDER_V1, "fields": [*ORDER_V1["fields"], {"name": "qty", "type": "int"}]}

PROTO = 'syntax = "proto3";\npackage shop;\n\nmessage Order {\n  int64 id = 1;\n  string note = 2;\n}\n'
JSON_SCHEMA = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "Order",
    "type": "object",
    "properties": {"id": {"type": "integer"}, "note": {"type": "string"}},
    "required": ["id"],
}


@pytest.fixture
def client(schema_registry_url: str) -> SchemaRegistryClient:
    return SchemaRegistryClient({"url": schema_registry_url})


@pytest.fixture
def subject(request: pytest.FixtureRequest) -> str:
    """A subject name no other test uses (the session's registry is shared)."""
    return f"{request.node.name}-{uuid.uuid4().hex[:8]}-value"


def test_an_avro_schema_is_registered_and_read_back_by_id(client: SchemaRegistryClient, subject: str) -> None:
    schema_id = client.register_schema(subject, Schema(json.dumps(ORDER_V1), "AVRO"))

    assert json.loads(client.get_schema(schema_id).schema_str or "") == ORDER_V1
    latest = client.get_latest_version(subject)
    assert (latest.version, latest.schema_id) == (1, schema_id)
    assert client.get_versions(subject) == [1]
    # the same schema again is the same version and id
    assert client.register_schema(subject, Schema(json.dumps(ORDER_V1), "AVRO")) == schema_id
    assert client.get_versions(subject) == [1]


def test_an_incompatible_version_is_rejected_under_backward(client: SchemaRegistryClient, subject: str) -> None:
    client.register_schema(subject, Schema(json.dumps(ORDER_V1), "AVRO"))
    assert client.set_compatibility(subject, "BACKWARD") == {"compatibility": "BACKWARD"}

    assert client.test_compatibility(subject, Schema(json.dumps(ORDER_BAD), "AVRO")) is False
    with pytest.raises(SchemaRegistryError) as rejected:
        client.register_schema(subject, Schema(json.dumps(ORDER_BAD), "AVRO"))
    assert rejected.value.http_status_code == 409
    assert "qty" in rejected.value.error_message

    assert client.test_compatibility(subject, Schema(json.dumps(ORDER_V2), "AVRO")) is True
    client.register_schema(subject, Schema(json.dumps(ORDER_V2), "AVRO"))
    assert client.get_versions(subject) == [1, 2]


def test_backward_is_the_default_as_in_confluents_registry(client: SchemaRegistryClient, subject: str) -> None:
    client.register_schema(subject, Schema(json.dumps(ORDER_V1), "AVRO"))
    with pytest.raises(SchemaRegistryError) as rejected:
        client.register_schema(subject, Schema(json.dumps(ORDER_BAD), "AVRO"))
    assert rejected.value.http_status_code == 409


def test_a_protobuf_schema_is_registered_and_read_back(client: SchemaRegistryClient, subject: str) -> None:
    schema_id = client.register_schema(subject, Schema(PROTO, "PROTOBUF"))

    registered = client.get_schema(schema_id)
    assert registered.schema_type == "PROTOBUF"
    # Apicurio answers its canonical text (formatted by Square's Wire: a comment header, blank lines between
    # fields); the declarations are the ones registered
    assert _declarations(registered.schema_str or "") == _declarations(PROTO)
    assert client.get_latest_version(subject).schema_id == schema_id
    assert client.register_schema(subject, Schema(PROTO, "PROTOBUF")) == schema_id


def _declarations(proto: str) -> list[str]:
    return [line for line in proto.splitlines() if line.strip() and not line.lstrip().startswith("//")]


def test_a_json_schema_is_registered_and_read_back(client: SchemaRegistryClient, subject: str) -> None:
    schema_id = client.register_schema(subject, Schema(json.dumps(JSON_SCHEMA), "JSON"))

    registered = client.get_schema(schema_id)
    assert registered.schema_type == "JSON"
    assert json.loads(registered.schema_str or "") == JSON_SCHEMA


def test_avro_serializer_writes_the_registered_id(client: SchemaRegistryClient, subject: str) -> None:
    topic = subject.removesuffix("-value")
    ctx = SerializationContext(topic, MessageField.VALUE)
    data = AvroSerializer(client, json.dumps(ORDER_V1))({"id": 7}, ctx)

    schema_id = client.get_latest_version(subject).schema_id
    # Confluent's wire format: magic byte 0, the schema id (4 bytes, big-endian), Avro binary (7 zigzag = 0x0e)
    assert data == b"\x00" + struct.pack(">I", schema_id) + b"\x0e"
    assert AvroDeserializer(client)(data, ctx) == {"id": 7}


def test_json_serializer_writes_the_registered_id(client: SchemaRegistryClient, subject: str) -> None:
    topic = subject.removesuffix("-value")
    ctx = SerializationContext(topic, MessageField.VALUE)
    data = JSONSerializer(json.dumps(JSON_SCHEMA), client)({"id": 7, "note": "x"}, ctx)

    schema_id = client.get_latest_version(subject).schema_id
    assert data[:5] == b"\x00" + struct.pack(">I", schema_id)
    assert json.loads(data[5:]) == {"id": 7, "note": "x"}
    assert JSONDeserializer(None, schema_registry_client=client)(data, ctx) == {"id": 7, "note": "x"}


def _order_message_class() -> Any:
    """The class of ``PROTO``'s ``shop.Order``, made from its descriptor (as protoc's output would be)."""
    proto = descriptor_pb2.FileDescriptorProto(name="shop/order.proto", package="shop", syntax="proto3")
    order = proto.message_type.add(name="Order")
    optional = descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL
    order.field.add(name="id", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_INT64, label=optional)
    order.field.add(name="note", number=2, type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING, label=optional)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Order"))


def test_protobuf_serializer_writes_the_registered_id(client: SchemaRegistryClient, subject: str) -> None:
    """confluent_kafka registers a Protobuf schema as its base64 FileDescriptorProto; Apicurio takes that."""
    order = _order_message_class()
    topic = subject.removesuffix("-value")
    ctx = SerializationContext(topic, MessageField.VALUE)
    data = ProtobufSerializer(order, client, {"use.deprecated.format": False})(order(id=7, note="x"), ctx)

    schema_id = client.get_latest_version(subject).schema_id
    # magic byte, schema id, message index [0] (one zero byte), then the message: field 1 = 7, field 2 = "x"
    assert data == b"\x00" + struct.pack(">I", schema_id) + b"\x00" + b"\x08\x07\x12\x01x"
    decoded = ProtobufDeserializer(order, {"use.deprecated.format": False})(data, ctx)
    assert (decoded.id, decoded.note) == (7, "x")


def test_a_server_that_cannot_start_is_reported_with_its_log(tmp_path: Path) -> None:
    server = RegistryServer(tmp_path, heap="1k")  # the JVM refuses a heap this small and exits
    with pytest.raises(RegistryServerError, match=r"exited with code 1 while starting(.|\n)*heap"):
        server.start(timeout=60)
