"""What the Schema Registry serde tests share: a test's cluster and registry (embedded, or the real server
the session starts), example schemas, and Confluent's wire format read by hand."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from google.protobuf import descriptor_pb2, descriptor_pool
from google.protobuf.message_factory import GetMessageClass

import kstream_nb as ks
from kstream_nb.cluster.memory import reset_cluster
from kstream_nb.cluster.schema_registry import embedded_registry

#: the registries the registry tests run on: a memory:// cluster's embedded one (confluent-kafka's mock) and the
#: session's real server (Apicurio, Confluent's API; ``schema_registry_url`` in tests/conftest.py)
REGISTRIES = ["embedded", pytest.param("real", marks=pytest.mark.registry)]


ORDER_V1 = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [{"name": "id", "type": "string"}, {"name": "amount", "type": "double"}],
}
#: v1 plus a field with a default: BACKWARD compatible (a v2 reader reads v1 records)
ORDER_V2 = {**ORDER_V1, "fields": [*ORDER_V1["fields"], {"name": "currency", "type": "string", "default": "EUR"}]}
JSON_ORDER = {
    "title": "JsonOrder",
    "type": "object",
    "properties": {"id": {"type": "string"}, "qty": {"type": "integer", "minimum": 1}},
    "required": ["id", "qty"],
}


class Registry:
    """One test's cluster and registry: the kwargs of ks.produce / ks.read_topic, and a client of the
    registry that the test asks on its own (the embedded registry is confluent-kafka's mock, in process)."""

    def __init__(self, kind: str, bootstrap: str, url: str | None) -> None:
        self.kind, self.bootstrap, self.url = kind, bootstrap, url
        self.client = embedded_registry(bootstrap) if url is None else SchemaRegistryClient({"url": url})
        self.suffix = uuid.uuid4().hex[:8]

    def topic(self, base: str) -> str:
        return f"{base}-{self.suffix}"

    @property
    def io(self) -> dict[str, Any]:
        return {"bootstrap_servers": self.bootstrap, "schema_registry_url": self.url}

    def produce(self, topic: str, records: Any, **kwargs: Any) -> int:
        return ks.produce(topic, records, **self.io, **kwargs)

    def read(self, topic: str, **kwargs: Any) -> Any:
        return ks.read_topic(topic, **self.io, **kwargs)

    def schema_id(self, subject: str, version: int | str = "latest") -> int:
        return int(self.client.get_version(subject, version).schema_id)


def registry_for(request: pytest.FixtureRequest) -> Iterator[Registry]:
    """The ``registry`` fixture's body (``request.param``: ``"embedded"`` or ``"real"``)."""
    bootstrap = f"memory://sr-{uuid.uuid4().hex[:8]}"
    url = None if request.param == "embedded" else request.getfixturevalue("schema_registry_url")
    yield Registry(request.param, bootstrap, url)
    reset_cluster(bootstrap)


def framing(data: bytes) -> tuple[int, bytes]:
    """Confluent's wire format, read by hand: magic byte 0, the schema id (4 bytes, big-endian), the payload."""
    assert data[0] == 0
    return int.from_bytes(data[1:5], "big"), data[5:]


def order_class() -> type[Any]:
    """A generated Protobuf message class (shop.PbOrder: a nested message, an enum, int64, repeated)."""
    field = descriptor_pb2.FieldDescriptorProto
    file = descriptor_pb2.FileDescriptorProto(name="shop/pb_order.proto", package="shop", syntax="proto3")
    customer = file.message_type.add(name="Customer")
    customer.field.add(name="name", number=1, type=field.TYPE_STRING, label=field.LABEL_OPTIONAL)
    kind = file.enum_type.add(name="Kind")
    kind.value.add(name="ONLINE", number=0)
    kind.value.add(name="STORE", number=1)
    order = file.message_type.add(name="PbOrder")
    order.field.add(name="order_id", number=1, type=field.TYPE_STRING, label=field.LABEL_OPTIONAL)
    order.field.add(name="quantity", number=2, type=field.TYPE_INT64, label=field.LABEL_OPTIONAL)
    order.field.add(
        name="kind", number=3, type=field.TYPE_ENUM, type_name=".shop.Kind", label=field.LABEL_OPTIONAL
    )
    order.field.add(name="tags", number=4, type=field.TYPE_STRING, label=field.LABEL_REPEATED)
    order.field.add(
        name="customer", number=5, type=field.TYPE_MESSAGE, type_name=".shop.Customer", label=field.LABEL_OPTIONAL
    )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return GetMessageClass(pool.FindMessageTypeByName("shop.PbOrder"))
