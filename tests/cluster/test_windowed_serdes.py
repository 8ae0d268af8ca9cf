"""Kafka Streams' windowed keys and timestamped values: layouts, round trips, nulls, specs and bad bytes.

The expected bytes are written out by hand from Kafka Streams' layouts (``WindowKeySchema``, ``SessionKeySchema``,
``ValueAndTimestampSerializer``); tests/reference/test_kafka_streams_formats.py checks them on bytes Java wrote.
"""

from __future__ import annotations

import datetime as dt

import pytest

import kstream_nb as ks
from kstream_nb.cluster.serde_specs import Serdes, serde_from
from kstream_nb.cluster.serdes import JsonSerde, LongSerde, Serde, StringSerde
from kstream_nb.cluster.windowed_serdes import (
    LONG_MAX,
    SessionWindowedSerde,
    TimeWindowedSerde,
    ValueAndTimestampSerde,
)
from kstream_nb.errors import SerializationError

W = ks.Windowed
START = b"\x00\x00\x00\x00\x00\x00\x27\x10"  # 10000 as Java's 8-byte big-endian long
END = b"\x00\x00\x00\x00\x00\x00\x4e\x20"  # 20000


def test_time_windowed_key_is_the_key_then_the_start() -> None:
    serde = TimeWindowedSerde(StringSerde(), 10_000)
    assert serde.serialize("t", W("alice", 10_000, 20_000)) == b"alice" + START
    assert serde.deserialize("t", b"alice" + START) == W("alice", 10_000, 20_000)
    assert serde.deserialize("t", b"" + START) == W("", 10_000, 20_000)  # an empty String key
    assert TimeWindowedSerde(LongSerde(), "10s").serialize("t", W(7, 0, 10_000)) == bytes(7) + b"\x07" + bytes(8)


def test_time_windowed_end_is_start_plus_size_else_long_max() -> None:
    assert TimeWindowedSerde(StringSerde()).deserialize("t", b"k" + START) == W("k", 10_000, LONG_MAX)
    near_max = (LONG_MAX - 5).to_bytes(8, "big")
    assert TimeWindowedSerde(StringSerde(), 60_000).deserialize("t", b"k" + near_max).end == LONG_MAX  # overflow
    assert TimeWindowedSerde(StringSerde(), dt.timedelta(minutes=1)).window_size_ms == 60_000


def test_window_store_changelog_key_has_a_sequence_number() -> None:
    serde = TimeWindowedSerde(StringSerde(), 10_000).for_changelog()
    assert serde.serialize("c", W("bob", 10_000, 20_000)) == b"bob" + START + b"\x00\x00\x00\x00"
    assert serde.deserialize("c", b"bob" + START + b"\x00\x00\x00\x03") == W("bob", 10_000, 20_000)
    assert serde == serde_from("windowed-changelog(10s):string") != TimeWindowedSerde(StringSerde(), 10_000)


def test_session_windowed_key_is_the_key_then_end_then_start() -> None:
    serde = SessionWindowedSerde(StringSerde())
    assert serde.serialize("s", W("alice", 10_000, 20_000)) == b"alice" + END + START
    assert serde.deserialize("s", b"alice" + END + START) == W("alice", 10_000, 20_000)
    json_keys = SessionWindowedSerde(JsonSerde())
    assert json_keys.deserialize("s", json_keys.serialize("s", W({"id": 1}, 5, 5))) == W({"id": 1}, 5, 5)


def test_value_and_timestamp_is_the_timestamp_then_the_value() -> None:
    serde = ValueAndTimestampSerde(LongSerde())
    value = ks.ValueAndTimestamp(3, 10_000)
    assert serde.serialize("v", value) == START + b"\x00\x00\x00\x00\x00\x00\x00\x03"
    assert serde.deserialize("v", START + b"\x00\x00\x00\x00\x00\x00\x00\x03") == value
    as_json = ValueAndTimestampSerde(JsonSerde())
    assert as_json.deserialize("v", START + b'{"a":[1]}') == ks.ValueAndTimestamp({"a": [1]}, 10_000)


def test_nulls_are_kafka_nulls() -> None:
    for serde in (TimeWindowedSerde(StringSerde(), 10), SessionWindowedSerde(StringSerde())):
        assert serde.serialize("t", None) is None
        assert serde.deserialize("t", None) is None
        assert serde.deserialize("t", b"") is None  # Java's windowed deserializers: empty bytes are a null key
    timestamped = ValueAndTimestampSerde(StringSerde())
    assert timestamped.serialize("t", None) is None
    assert timestamped.serialize("t", ks.ValueAndTimestamp(None, 5)) is None  # Java: a null value is null
    assert timestamped.deserialize("t", None) is None


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("windowed:string", TimeWindowedSerde(StringSerde())),
        ("windowed(1m):long", TimeWindowedSerde(LongSerde(), 60_000)),
        ("Windowed(60000):long", TimeWindowedSerde(LongSerde(), 60_000)),
        ("windowed(500ms):json", TimeWindowedSerde(JsonSerde(), 500)),
        ("windowed-changelog(10s):string", TimeWindowedSerde(StringSerde(), 10_000, for_changelog=True)),
        ("session-windowed:string", SessionWindowedSerde(StringSerde())),
        ("session_windowed:json", SessionWindowedSerde(JsonSerde())),
        ("timestamped:json", ValueAndTimestampSerde(JsonSerde())),
        ("timestamped:windowed(10s):string", ValueAndTimestampSerde(TimeWindowedSerde(StringSerde(), 10_000))),
    ],
)
def test_specs(spec: str, expected: Serde) -> None:
    assert serde_from(spec) == expected


def test_serdes_factory_mirrors_javas_windowed_serdes() -> None:
    assert Serdes.time_windowed("string", "10s") == serde_from("windowed(10s):string")
    assert Serdes.time_windowed(StringSerde) == serde_from("windowed:string")
    assert Serdes.session_windowed("string") == serde_from("session-windowed:string")
    assert Serdes.value_and_timestamp("long") == serde_from("timestamped:long")


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("windowed(ten):string", r"'windowed\(ten\):string'.*cannot parse 'ten'"),
        ("windowed(0):string", r"window size must be > 0"),
        ("windowed():string", r"cannot parse ''"),
        ("session-windowed(5s):string", r"only time windows have a size"),
        ("timestamped:nope", r"'timestamped:nope'.*unknown serde 'nope'"),
        ("mystery:string", r"unknown serde 'mystery:string'.*'windowed\(<size>\):<serde>'"),
    ],
)
def test_bad_specs_say_what_is_wrong(spec: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        serde_from(spec)


def test_short_or_garbled_bytes_name_the_topic_and_the_layout() -> None:
    with pytest.raises(SerializationError, match=r"TimeWindowedSerde .* topic 'clicks-out' \(5 bytes.*8-byte"):
        TimeWindowedSerde(StringSerde(), 10).deserialize("clicks-out", b"short")
    with pytest.raises(SerializationError, match=r"topic 'cl' \(9 bytes.*4-byte sequence number"):
        TimeWindowedSerde(StringSerde(), 10, for_changelog=True).deserialize("cl", b"k" + START)
    with pytest.raises(SerializationError, match=r"SessionWindowedSerde .* topic 's' \(9 bytes.*16-byte end"):
        SessionWindowedSerde(StringSerde()).deserialize("s", b"k" + START)
    with pytest.raises(SerializationError, match=r"ValueAndTimestampSerde .* 'v' \(3 bytes.*8-byte timestamp"):
        ValueAndTimestampSerde(LongSerde()).deserialize("v", b"abc")
    # the inner key's bytes are not UTF-8, or the value is not the inner serde's
    with pytest.raises(SerializationError, match=r"topic 'w'.*the key inside does not deserialize.*StringSerde"):
        TimeWindowedSerde(StringSerde(), 10).deserialize("w", b"\xff\xfe" + START)
    with pytest.raises(SerializationError, match=r"topic 'v'.*the value inside does not deserialize.*LongSerde"):
        ValueAndTimestampSerde(LongSerde()).deserialize("v", START + b"\x01\x02")


def test_serializing_the_wrong_type_names_the_topic() -> None:
    with pytest.raises(SerializationError, match=r"TimeWindowedSerde .* str for topic 'out'.*expected a Windowed"):
        TimeWindowedSerde(StringSerde(), 10).serialize("out", "alice")
    with pytest.raises(SerializationError, match=r"topic 'out'.*its key serializes to null"):
        SessionWindowedSerde(StringSerde()).serialize("out", W(None, 0, 0))
    with pytest.raises(SerializationError, match=r"topic 'out'.*its key does not serialize.*expected str"):
        SessionWindowedSerde(StringSerde()).serialize("out", W(5, 0, 0))
    with pytest.raises(SerializationError, match=r"topic 'out'.*window start \d+ is not a 64-bit int"):
        TimeWindowedSerde(StringSerde(), 10).serialize("out", W("k", 2**70, 0))
    with pytest.raises(SerializationError, match=r"topic 'v'.*expected a ValueAndTimestamp"):
        ValueAndTimestampSerde(LongSerde()).serialize("v", 3)


def test_configure_reaches_the_inner_serde() -> None:
    """A wrapper configures its inner serde (a registry serde binds its registry there)."""

    class Bound(StringSerde):
        def __init__(self, configs: dict | None = None) -> None:
            self.configs = configs

        def configure(self, configs: object, is_key: bool) -> Serde:
            return Bound({"configs": configs, "is_key": is_key})

    serde = TimeWindowedSerde(Bound(), 10)
    configured = serde.configure({"x": 1}, True)
    assert isinstance(configured, TimeWindowedSerde) and configured.window_size_ms == 10
    assert configured.inner.configs == {"configs": {"x": 1}, "is_key": True}  # type: ignore[attr-defined]
    plain = SessionWindowedSerde(StringSerde())
    assert plain.configure({}, True) is plain
