"""The ``auto`` serde: a topic mixing formats record by record reads back as each record was written."""

from __future__ import annotations

import struct
from typing import Any

import pytest
from google.protobuf import descriptor_pb2, descriptor_pool
from google.protobuf.message_factory import GetMessageClass

import kstream_nb as ks
from kstream_nb.cluster.auto_serde import AutoSerde, RawBytes
from kstream_nb.cluster.base import TopicSpec
from kstream_nb.cluster.memory import get_cluster
from kstream_nb.cluster.registry_serdes import AvroSerde, JsonSchemaSerde, ProtobufSerde
from kstream_nb.cluster.schema_registry import SchemaRegistryError, registry_configs
from kstream_nb.cluster.serde_specs import Serdes, serde_from
from kstream_nb.cluster.serdes import DoubleSerde, IntegerSerde, JsonSerde, LongSerde, StringSerde
from kstream_nb.cluster.topic_io import read_topic
from kstream_nb.cluster.windowed_serdes import Windowed
from kstream_nb.errors import SerializationError, TopologyError
from kstream_nb.topology.topology import Topology

EPOCH_MS = 1_764_000_000_000  # 2025-11-24, what Java's System.currentTimeMillis() writes with LongSerializer

#: (key bytes, value bytes, expected key, expected value, expected key format, expected value format);
#: the bytes are written as Java's serializers write them, checked here with struct (big-endian)
MIXED: list[tuple[bytes | None, bytes | None, object, object, str, str]] = [
    (b"user-1", b'{"clicks": 3, "page": "/home"}', "user-1", {"clicks": 3, "page": "/home"}, "string", "json"),
    (b"user-2", struct.pack(">i", 42), "user-2", 42, "string", "int"),
    (b"user-3", struct.pack(">i", -7), "user-3", -7, "string", "int"),
    (b"user-4", struct.pack(">q", EPOCH_MS), "user-4", EPOCH_MS, "string", "long"),
    (b"user-5", struct.pack(">q", 5), "user-5", 5, "string", "long"),
    (b"user-6", struct.pack(">d", 98.6), "user-6", 98.6, "string", "double"),
    (b"user-7", struct.pack(">d", -0.001), "user-7", -0.001, "string", "double"),
    (b"user-8", b"\xca\xfe\xba\xbe\x00\x01", "user-8", b"\xca\xfe\xba\xbe\x00\x01", "string", "bytes"),
    (struct.pack(">i", 1001), b"plain text value", 1001, "plain text value", "int", "string"),
    (struct.pack(">q", 2**40), b'"a json string"', 2**40, "a json string", "long", "json"),
    (b"user-9", None, "user-9", None, "string", "null"),
    ("müller".encode(), b"[1, 2.5, null]", "müller", [1, 2.5, None], "string", "json"),
    (b"", b"", "", "", "string", "string"),
]


def _write_raw(bootstrap: str, topic: str, records: list[tuple[bytes | None, bytes | None]]) -> None:
    cluster = get_cluster(bootstrap)
    cluster.admin().create_topics([TopicSpec(topic, 1)], exist_ok=True)
    producer = cluster.producer()
    for i, (key, value) in enumerate(records):
        producer.send(topic, key, value, 1_000 + i)
    producer.close()


def test_a_mixed_topic_reads_record_by_record(bootstrap: str) -> None:
    _write_raw(bootstrap, "mixed", [(k, v) for k, v, *_ in MIXED])
    frame = read_topic("mixed", bootstrap, key_serde="auto", value_serde="auto")
    assert list(frame.columns) == ["partition", "offset", "timestamp", "time", "key", "value", "headers"]
    assert frame["key"].tolist() == [row[2] for row in MIXED]
    assert frame["value"].tolist() == [row[3] for row in MIXED]
    auto = AutoSerde()
    assert [auto.detect("mixed", k)[0] for k, *_ in MIXED] == [row[4] for row in MIXED]
    assert [auto.detect("mixed", v)[0] for _, v, *_ in MIXED] == [row[5] for row in MIXED]


def test_kstream_nb_java_compatible_serdes_read_back(bootstrap: str) -> None:
    """Records written through kstream_nb's Java-compatible serdes (the same bytes as the struct rows above)."""
    writes = [
        (StringSerde(), "order-17", IntegerSerde(), 2_000_000),
        (StringSerde(), "order-18", LongSerde(), -3),
        (StringSerde(), "order-19", DoubleSerde(), 19.99),
        (IntegerSerde(), 7, JsonSerde(), {"qty": 2}),
        (LongSerde(), EPOCH_MS, StringSerde(), "shipped"),
    ]
    for i, (kser, key, vser, value) in enumerate(writes):
        ks.produce("orders", [(key, value)], bootstrap, timestamps=[i], key_serde=kser, value_serde=vser)
    frame = read_topic("orders", bootstrap, key_serde="auto", value_serde="auto")
    assert list(zip(frame["key"], frame["value"])) == [(key, value) for _, key, _, value in writes]


@pytest.mark.parametrize(
    ("written", "expected"),
    [
        (0, 0),
        (1, 1),
        (-1, -1),
        (2**31 - 1, 2**31 - 1),
        (-(2**31), -(2**31)),
        (1_000_000_000, 1_000_000_000),  # as a float 0.0047200695: 8 digits, not what a person types
        (1_234_567_890, 1_234_567_890),  # as a float 1228890.25
        (1_764_000_000, 1_764_000_000),  # epoch seconds
        (831_000_000, 831_000_000),  # every float the rule reads is an int of magnitude over that
        (-831_000_000, -831_000_000),
    ],
)
def test_four_bytes_read_as_an_int(written: int, expected: int) -> None:
    assert AutoSerde().detect("t", struct.pack(">i", written)) == ("int", expected)


@pytest.mark.parametrize("written", [1.5, 3.14, -98.6, 0.001, 123456.0, 1e-6, 1e8])
def test_four_bytes_of_a_typed_float_read_as_that_decimal(written: float) -> None:
    # Java's Float.toString prints these floats as the decimal typed, e.g. 3.14f -> "3.14"
    assert AutoSerde().detect("t", struct.pack(">f", written)) == ("float", written)


@pytest.mark.parametrize(
    "written",
    [0, 5, -1, EPOCH_MS, EPOCH_MS * 1000, EPOCH_MS * 1_000_000, 1_900_000_000_000_000_000, 2**63 - 1, -(2**63)],
)
def test_eight_bytes_read_as_a_long(written: int) -> None:
    # counters, epoch ms/us/ns, snowflake-style ids, Long.MAX_VALUE and Long.MIN_VALUE
    assert AutoSerde().detect("t", struct.pack(">q", written)) == ("long", written)


@pytest.mark.parametrize("written", [98.6, -0.001, 0.1 + 0.2, 1e-9, 1.5e17, -273.15, 6.02214076e-5])
def test_eight_bytes_read_as_a_double(written: float) -> None:
    assert AutoSerde().detect("t", struct.pack(">d", written)) == ("double", written)


def test_printable_numbers_read_as_text() -> None:
    """The documented ambiguity: text wins over a number whose bytes are all printable."""
    assert AutoSerde().detect("t", struct.pack(">i", 1_633_837_924)) == ("string", "abcd")
    assert AutoSerde().detect("t", b"1234") == ("json", 1234)
    assert AutoSerde().detect("t", b"0123") == ("string", "0123")


def test_undecodable_bytes_show_as_a_hex_preview(bootstrap: str) -> None:
    long_blob = bytes(range(200, 256)) * 2
    _write_raw(bootstrap, "blobs", [(b"\x01\x02", b"\xff\x00\x01"), (None, long_blob), (b"texts\x1b[0m", b"\x00")])
    frame = read_topic("blobs", bootstrap, key_serde="auto", value_serde="auto")
    assert frame["key"].tolist() == [b"\x01\x02", None, b"texts\x1b[0m"]
    assert frame["value"].tolist() == [b"\xff\x00\x01", long_blob, b"\x00"]
    assert all(isinstance(v, RawBytes) for v in frame["value"])
    assert repr(frame["value"][0]) == "0xff0001"
    assert repr(frame["value"][1]) == "0x" + long_blob[:32].hex() + "… (112 bytes)"
    shown = frame.to_string()
    assert "0xff0001" in shown and "0x0102" in shown and "\\x" not in shown


def test_windowed_keys_are_not_detected_and_read_as_their_bytes(bootstrap: str) -> None:
    """Kafka Streams' time-windowed key (the key's bytes, then the window start as an 8-byte long) and
    session-windowed key (then end and start): auto shows their bytes; the explicit specs decode them."""
    time_key = b"user-1" + struct.pack(">q", EPOCH_MS)
    session_key = b"user-2" + struct.pack(">qq", EPOCH_MS + 5_000, EPOCH_MS)
    assert Serdes.time_windowed("string").serialize("counts", Windowed("user-1", EPOCH_MS, EPOCH_MS + 60_000)) == (
        time_key
    )
    assert Serdes.session_windowed("string").serialize(
        "counts", Windowed("user-2", EPOCH_MS, EPOCH_MS + 5_000)
    ) == (session_key)
    _write_raw(bootstrap, "counts", [(time_key, struct.pack(">q", 3)), (session_key, struct.pack(">q", 2))])
    frame = read_topic("counts", bootstrap, key_serde="auto", value_serde="auto")
    assert frame["key"].tolist() == [time_key, session_key] and frame["value"].tolist() == [3, 2]
    assert [AutoSerde().detect("counts", k)[0] for k in (time_key, session_key)] == ["bytes", "bytes"]
    windowed = read_topic("counts", bootstrap, key_serde="windowed(60s):string", value_serde="long", max_records=1)
    assert windowed["key"][0] == Windowed("user-1", EPOCH_MS, EPOCH_MS + 60_000)


def test_an_unknown_wire_format_record_reads_as_its_bytes(bootstrap: str) -> None:
    garbled = b"\x00" + struct.pack(">i", 987_654) + b"\x02\x06abc"
    _write_raw(bootstrap, "garbled", [(b"k", garbled)])
    frame = read_topic("garbled", bootstrap, key_serde="auto", value_serde="auto")
    assert frame["value"].tolist() == [garbled]


def test_auto_resolves_from_specs_and_refuses_to_write() -> None:
    assert isinstance(serde_from("auto"), AutoSerde) and isinstance(Serdes.auto(), AutoSerde)
    with pytest.raises(SerializationError, match=r"'auto' serde only reads.*topic 'out'"):
        AutoSerde().serialize("out", {"a": 1})


def test_apps_refuse_auto_for_their_sources() -> None:
    builder = ks.StreamsBuilder()
    with pytest.raises(TopologyError, match=r"source topic 'orders': value_serde='auto'.*one format per topic"):
        builder.stream("orders", value_serde="auto")
    with pytest.raises(TopologyError, match=r"source topic 'users': key_serde='auto'.*different stores"):
        builder.table("users", key_serde=AutoSerde())
    with pytest.raises(TopologyError, match="source topic 'countries': key_serde='auto'"):
        builder.global_table("countries", key_serde="auto")
    with pytest.raises(TopologyError, match="source topic 'a, b': value_serde='auto'"):
        Topology().add_source("src", "a", "b", value_serde=AutoSerde)
    for name in ("default_key_serde", "default_value_serde"):
        with pytest.raises(ValueError, match=f"{name}='auto' is for exploring"):
            ks.StreamsConfig.of(application_id="a", **{name: "auto"})


def _reading_class() -> type[Any]:
    """A Protobuf message class ``autotest.Reading {string sensor = 1; double celsius = 2;}``, built as protoc's
    generated code builds it (a file descriptor in a pool)."""
    types = label = descriptor_pb2.FieldDescriptorProto
    proto = descriptor_pb2.FileDescriptorProto(name="autotest_reading.proto", package="autotest", syntax="proto3")
    message = proto.message_type.add(name="Reading")
    message.field.add(name="sensor", number=1, type=types.TYPE_STRING, label=label.LABEL_OPTIONAL)
    message.field.add(name="celsius", number=2, type=types.TYPE_DOUBLE, label=label.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return GetMessageClass(pool.FindMessageTypeByName("autotest.Reading"))


CLICK = {
    "type": "record",
    "name": "Click",
    "fields": [{"name": "page", "type": "string"}, {"name": "n", "type": "int"}],
}
PERSON = {"title": "Person", "type": "object", "properties": {"name": {"type": "string"}}}


def test_registry_records_decode_among_other_formats(bootstrap: str) -> None:
    """Avro, Protobuf and JSON Schema records in Confluent's wire format, through the embedded registry, mixed
    record by record with plain formats; a wire-format record the registry cannot decode shows its bytes."""
    configs = registry_configs(bootstrap)
    avro = AvroSerde(CLICK).configure(configs, False)
    avro_int = AvroSerde('"int"').configure(configs, False)
    reading = _reading_class()
    proto = ProtobufSerde(reading).configure(configs, False)
    person = JsonSchemaSerde(PERSON).configure(configs, False)
    int_record = avro_int.serialize("mixed", 100_000)  # an Avro int key: 8 bytes in all, like a long
    assert int_record is not None and len(int_record) == 8
    int_id = int.from_bytes(int_record[1:5], "big")
    unknown_id = b"\x00" + struct.pack(">i", 987_654) + b"\x02\x06abc"
    bad_payload = b"\x00" + int_record[1:5] + b"\xff\xff\xff\xff\xff\xff"  # not a varint Avro can end
    # a long whose bytes 1-4 are the "int" schema's id: its 3 bytes decode as Avro int 1 with 2 bytes left over
    colliding_long = (int_id << 24) | 0x02_00_00
    values = [
        avro.serialize("mixed", {"page": "/home", "n": 3}),
        int_record,
        proto.serialize("mixed", reading(sensor="s1", celsius=21.5)),
        person.serialize("mixed", {"name": "Ann"}),
        b'{"plain": "json"}',
        struct.pack(">q", EPOCH_MS),
        struct.pack(">q", colliding_long),
        unknown_id,
        bad_payload,
    ]
    _write_raw(bootstrap, "mixed", [(b"k", v) for v in values])
    frame = read_topic("mixed", bootstrap, key_serde="auto", value_serde="auto")
    assert frame["value"].tolist() == [
        {"page": "/home", "n": 3},
        100_000,
        {"sensor": "s1", "celsius": 21.5},
        {"name": "Ann"},
        {"plain": "json"},
        EPOCH_MS,
        colliding_long,
        unknown_id,
        bad_payload,
    ]
    auto = AutoSerde().configure(configs, False)
    assert isinstance(auto, AutoSerde)
    assert [auto.detect("mixed", v)[0] for v in values] == [
        "avro", "avro", "protobuf", "jsonschema", "json", "long", "long", "bytes", "bytes",
    ]  # fmt: skip


def test_an_unreachable_registry_is_named_not_hidden(bootstrap: str) -> None:
    configs = registry_configs(bootstrap, "http://127.0.0.1:1", {"max.retries": 0})
    auto = AutoSerde().configure(configs, False)
    assert isinstance(auto, AutoSerde)
    with pytest.raises(SchemaRegistryError, match=r"http://127\.0\.0\.1:1 cannot be reached.*schema id 7"):
        auto.detect("t", b"\x00\x00\x00\x00\x07abc")
    # records not in the wire format never ask the registry
    assert auto.detect("t", b"abc") == ("string", "abc")


def test_without_a_registry_wire_format_records_read_as_bytes() -> None:
    auto = AutoSerde().configure(registry_configs("kafka.example:9092"), False)
    record = b"\x00\x00\x00\x00\x01\x06abc"
    assert auto.detect("t", record) == ("bytes", record)
