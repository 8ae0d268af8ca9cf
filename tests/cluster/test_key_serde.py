"""The default key serde: a ``str`` key is written as Java's StringSerializer writes it, other keys as JSON."""

from __future__ import annotations

import struct
from typing import Any

import orjson
import pytest

import kstream_nb as ks
from kstream_nb.cluster.partitioner import default_partition
from kstream_nb.cluster.serde_specs import serde_from
from kstream_nb.cluster.serdes import StringOrJsonSerde

KEYS = StringOrJsonSerde()


@pytest.mark.parametrize("key", ["abc", "order-1001", "Zürich", "", " 12", "012", "1.50", "null", "t", "fa"])
def test_a_str_key_is_its_utf8_bytes_and_reads_back_as_itself(key: str) -> None:
    data = KEYS.serialize("t", key)
    assert data == key.encode("utf-8")  # what Java's StringSerializer writes
    assert KEYS.deserialize("t", data) == key


@pytest.mark.parametrize(
    "key", [12, -7, 0, 2**53, 1.5, -0.25, 1e20, True, False, {"user": 7, "region": "eu"}, [1, "a", None]]
)
def test_other_keys_are_json_and_round_trip_exactly(key: Any) -> None:
    data = KEYS.serialize("t", key)
    assert data == orjson.dumps(key)
    back = KEYS.deserialize("t", data)
    assert back == key and type(back) is type(key)


@pytest.mark.parametrize(
    ("data", "read"),
    [
        (b"12", 12),  # a str "12" has these bytes too: it reads back as the number
        (b"true", True),
        (b'{"a":1}', {"a": 1}),
        (b'{ "a" : 1 }', {"a": 1}),  # JSON objects as other writers space them
        (b'"abc"', "abc"),  # a JSON string: how keys were written before this serde
        (b"012", "012"),  # not how JSON writes a number
        (b"1e3", "1e3"),
        (b"-0", "-0"),
        (b"null", "null"),
        (b"{not json", "{not json"),
        (b"\xff\xfe", b"\xff\xfe"),  # not UTF-8: the bytes
        (struct.pack(">q", 42), "\x00" * 7 + "*"),  # as Java's StringDeserializer reads a long's bytes
    ],
)
def test_the_reading_rule(data: bytes, read: Any) -> None:
    assert KEYS.deserialize("t", data) == read


def test_it_is_the_default_key_serde_and_values_stay_json() -> None:
    config = ks.StreamsConfig.of(application_id="a")
    assert isinstance(config.default_key_serde, StringOrJsonSerde)
    assert serde_from("string_or_json") == KEYS
    ks.produce("mixed", [("abc", {"v": 1}), (7, "x")], bootstrap_servers="memory://key-serde")
    raw = ks.read_topic("mixed", bootstrap_servers="memory://key-serde", key_serde="bytes", value_serde="bytes")
    assert raw["key"].tolist() == [b"abc", b"7"]
    assert raw["value"].tolist() == [b'{"v":1}', b'"x"']
    frame = ks.read_topic("mixed", bootstrap_servers="memory://key-serde")
    assert frame["key"].tolist() == ["abc", 7]


def test_a_str_key_lands_in_the_partition_java_gives_it() -> None:
    keys = [f"user-{i}" for i in range(40)]
    ks.produce("users", [(k, i) for i, k in enumerate(keys)], bootstrap_servers="memory://key-part", partitions=6)
    frame = ks.read_topic("users", bootstrap_servers="memory://key-part")
    for key, partition in zip(frame["key"], frame["partition"], strict=True):
        assert partition == default_partition(key.encode("utf-8"), 6)


def test_a_store_finds_a_key_by_its_bytes() -> None:
    """A numeric-looking str key reads back as a number; the store answers for both forms, as Kafka's
    byte-keyed stores do, before and after a restore."""
    b = ks.StreamsBuilder()
    b.table("ids", store="ids")
    with ks.TopologyTestDriver(b.build()) as driver:
        driver.create_input_topic("ids").pipe_input("1001", "alice")
        store = driver.get_key_value_store("ids")
        assert store.get("1001") == "alice" and store.get(1001) == "alice"
