"""Serdes: round trips, Java-compatible byte encodings, errors that name the topic."""

from __future__ import annotations

import datetime as dt
import struct
from typing import Any

import numpy as np
import orjson
import pandas as pd
import pytest

from kstream_nb.cluster.serde_specs import Serdes, serde_from
from kstream_nb.cluster.serdes import (
    BytesSerde,
    DoubleSerde,
    FloatSerde,
    FunctionSerde,
    IntegerSerde,
    JsonSerde,
    LongSerde,
    Serde,
    ShortSerde,
    StringSerde,
)
from kstream_nb.errors import SerializationError


@pytest.mark.parametrize(
    ("serde", "value"),
    [
        (JsonSerde(), {"a": 1, "b": [1, 2.5, "x"], "c": None}),
        (StringSerde(), "héllo"),
        (BytesSerde(), b"\x00\x01"),
        (ShortSerde(), -300),
        (IntegerSerde(), 2**31 - 1),
        (LongSerde(), -(2**63)),
        (FloatSerde(), 1.5),
        (DoubleSerde(), 3.141592653589793),
    ],
)
def test_round_trip(serde: Serde, value: Any) -> None:
    assert serde.deserialize("t", serde.serialize("t", value)) == value


@pytest.mark.parametrize(
    "serde", [JsonSerde(), StringSerde(), BytesSerde(), ShortSerde(), LongSerde(), DoubleSerde()]
)
def test_none_is_null(serde: Serde) -> None:
    assert serde.serialize("t", None) is None
    assert serde.deserialize("t", None) is None


def test_java_encodings() -> None:
    assert LongSerde().serialize("t", 1) == b"\x00\x00\x00\x00\x00\x00\x00\x01"
    assert IntegerSerde().serialize("t", -1) == b"\xff\xff\xff\xff"
    assert ShortSerde().serialize("t", 258) == b"\x01\x02"
    assert DoubleSerde().serialize("t", 1.5) == struct.pack(">d", 1.5)
    assert FloatSerde().serialize("t", 1.5) == struct.pack(">f", 1.5)
    assert StringSerde().serialize("t", "é") == "é".encode()
    assert LongSerde().serialize("t", np.int64(7)) == struct.pack(">q", 7)


def test_wrong_length_names_topic_and_sizes() -> None:
    with pytest.raises(SerializationError, match=r"'prices'.*size of data received is 3, expected 8"):
        LongSerde().deserialize("prices", b"abc")


def test_out_of_range_int_names_topic_and_type() -> None:
    with pytest.raises(SerializationError, match=r"IntegerSerde.*int.*'counts'"):
        IntegerSerde().serialize("counts", 2**40)


def test_json_handles_numpy_and_pandas() -> None:
    serde = JsonSerde()
    data = {
        "i": np.int64(3),
        "f": np.float32(1.5),
        "arr": np.arange(3),
        "ts": pd.Timestamp("2024-01-02 03:04:05"),
        "d": dt.date(2024, 1, 2),
        "nat": pd.NaT,
        1: "non-str key",
    }
    out = orjson.loads(serde.serialize("t", data) or b"")
    assert out == {
        "i": 3,
        "f": 1.5,
        "arr": [0, 1, 2],
        "ts": "2024-01-02T03:04:05",
        "d": "2024-01-02",
        "nat": None,
        "1": "non-str key",
    }


def test_json_serializer_for_bytes_sent_at_once_writes_the_same_bytes_and_errors() -> None:
    """``compact=False`` (a sink on Kafka: librdkafka copies what it sends) only skips trimming orjson's
    buffer; the bytes, the None-as-null rule and the error naming topic and type are the same."""
    serde = JsonSerde()
    kept, sent = serde.serializer("t"), serde.serializer("t", compact=False)
    for value in (1, "word", {"a": [1, 2.5, None]}, np.int64(7), pd.Timestamp("2024-01-02")):
        assert sent(value) == kept(value) == serde.serialize("t", value)
    assert sent(None) is None

    class Thing:
        pass

    with pytest.raises(SerializationError, match=r"Thing.*'t'"):
        sent(Thing())


def test_json_unserializable_names_topic_and_type() -> None:
    class Thing:
        pass

    with pytest.raises(SerializationError, match=r"Thing.*'orders'"):
        JsonSerde().serialize("orders", Thing())


def test_deserialize_error_shows_topic_and_first_bytes() -> None:
    with pytest.raises(SerializationError, match=r"'orders'.*b'\{not json'"):
        JsonSerde().deserialize("orders", b"{not json")
    with pytest.raises(SerializationError, match="'names'"):
        StringSerde().deserialize("names", b"\xff\xfe")


def test_string_and_bytes_type_checks() -> None:
    with pytest.raises(SerializationError, match="'t'"):
        StringSerde().serialize("t", 5)
    assert BytesSerde().serialize("t", bytearray(b"ab")) == b"ab"
    assert BytesSerde().serialize("t", memoryview(b"ab")) == b"ab"
    with pytest.raises(SerializationError):
        BytesSerde().serialize("t", "ab")


def test_function_serde() -> None:
    def ser(v: Any) -> bytes:
        return str(v).encode()

    def de(b: bytes) -> int:
        return int(b)

    serde = Serde.of(ser, de)
    assert isinstance(serde, FunctionSerde)
    assert serde.deserialize("t", serde.serialize("t", 12)) == 12
    assert serde.serialize("t", None) is None
    assert serde == Serde.of(ser, de)
    assert hash(serde) == hash(Serde.of(ser, de))
    assert serde != Serde.of(ser, lambda b: b)
    with pytest.raises(SerializationError, match="'t'"):
        serde.deserialize("t", b"x")


def test_equality_and_hash_by_class() -> None:
    assert JsonSerde() == JsonSerde()
    assert JsonSerde() != StringSerde()
    assert len({LongSerde(), LongSerde(), DoubleSerde()}) == 2


def test_serde_from() -> None:
    assert serde_from("json") == JsonSerde()
    assert serde_from("str") == StringSerde()
    assert serde_from("String") == StringSerde()
    assert serde_from("int") == IntegerSerde()
    assert serde_from("integer") == IntegerSerde()
    assert serde_from("long") == LongSerde()
    assert serde_from(DoubleSerde) == DoubleSerde()
    serde = LongSerde()
    assert serde_from(serde) is serde
    with pytest.raises(ValueError, match=r"'json'.*'double'"):
        serde_from("thrift")


def test_serdes_namespace() -> None:
    assert Serdes.json() == JsonSerde()
    assert Serdes.string() == StringSerde()
    assert Serdes.long() == LongSerde()
    assert Serdes.integer() == IntegerSerde()
    assert Serdes.short() == ShortSerde()
    assert Serdes.float() == FloatSerde()
    assert Serdes.double() == DoubleSerde()
    assert Serdes.bytes() == BytesSerde()
