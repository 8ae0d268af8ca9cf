"""Suppression buffers: bounds, errors, and final-result release rules."""

from __future__ import annotations

import pytest

import kstream_nb as ks
from kstream_nb.cluster.serde_specs import serde_from
from kstream_nb.errors import SerializationError, StreamsError
from kstream_nb.processor.api import Change
from kstream_nb.processor.suppress import BufferConfig, until_time_limit, until_window_closes
from kstream_nb.processor.windows import TimeWindows, Windowed
from kstream_nb.state.suppression_buffer import BufferedUpdate, BufferKeySerde, BufferValueSerde


def _counts_by_value(suppressed: object) -> ks.StreamsBuilder:
    b = ks.StreamsBuilder()
    counts = b.table("in").group_by(lambda k, v: (v, k)).count()
    counts.suppress(suppressed).to_stream().to("out")
    return b


def test_buffer_full_with_shut_down_when_full_raises_a_clear_error() -> None:
    b = _counts_by_value(until_time_limit(1000, BufferConfig.with_max_records(1).shut_down_when_full()))
    with ks.TopologyTestDriver(b.build()) as d:
        i = d.create_input_topic("in")
        i.pipe_input("k1", "v1", timestamp=0)
        with pytest.raises(Exception, match="suppression buffer full") as info:
            i.pipe_input("k2", "v2", timestamp=1)
    assert "shut down when full" in str(info.value) or "shut down when full" in repr(info.value.__cause__)


def test_emit_early_when_full_releases_the_oldest_key() -> None:
    b = _counts_by_value(until_time_limit(1000, BufferConfig.with_max_records(1).emit_early_when_full()))
    with ks.TopologyTestDriver(b.build()) as d:
        i = d.create_input_topic("in")
        i.pipe_input("k1", "v1", timestamp=0)
        i.pipe_input("k2", "v2", timestamp=1)
        got = [(r.key, r.value, r.timestamp) for r in d.create_output_topic("out").read_records_to_list()]
    assert got == [("v1", 1, 0)]


def test_a_byte_bound_emits_the_oldest_key_once_the_buffer_outgrows_it() -> None:
    # each buffered count of a value weighs len('["v1",1,null]') = 13 bytes: two fit in 30, three do not
    b = _counts_by_value(until_time_limit(1000, BufferConfig.with_max_bytes(30).emit_early_when_full()))
    with ks.TopologyTestDriver(b.build()) as d:
        i = d.create_input_topic("in")
        for t, (key, value) in enumerate([("k1", "v1"), ("k2", "v2"), ("k3", "v3"), ("k4", "v3")]):
            i.pipe_input(key, value, timestamp=t)
        got = [(r.key, r.value, r.timestamp) for r in d.create_output_topic("out").read_records_to_list()]
    # v3's second update replaces its entry (now 10 bytes): still two keys, nothing more released
    assert got == [("v1", 1, 0)]


def test_until_window_closes_rejects_a_non_windowed_table() -> None:
    b = ks.StreamsBuilder()
    table = b.table("in")
    with pytest.raises(TypeError, match="windowed KTable"):
        table.suppress(until_window_closes())


def test_until_window_closes_cannot_emit_early() -> None:
    with pytest.raises(StreamsError, match="cannot emit early"):
        until_window_closes(BufferConfig.with_max_records(10))


def test_suppress_needs_a_suppressed_config() -> None:
    b = ks.StreamsBuilder()
    with pytest.raises(TypeError, match="until_window_closes"):
        b.table("in").suppress("final")


def test_until_window_closes_releases_only_final_value_at_end_plus_grace() -> None:
    b = ks.StreamsBuilder()
    (
        b.stream("in")
        .group_by_key()
        .windowed_by(TimeWindows.of(10).grace(5))
        .count(store="c")
        .suppress(until_window_closes())
        .to_stream()
        .to("out")
    )
    with ks.TopologyTestDriver(b.build()) as d:
        i = d.create_input_topic("in")
        out = d.create_output_topic("out")
        i.pipe_input("a", "x", timestamp=1)
        i.pipe_input("a", "x", timestamp=9)
        i.pipe_input("b", "x", timestamp=14)  # stream time 14 < 10 + 5
        assert out.read_records_to_list() == []
        i.pipe_input("b", "x", timestamp=15)  # 10 + 5 <= 15: window [0,10) of key a is final
        got = [(r.key, r.value, r.timestamp) for r in out.read_records_to_list()]
    assert got == [({"key": "a", "start": 0, "end": 10}, 2, 9)]


def test_until_time_limit_zero_emits_every_update() -> None:
    b = _counts_by_value(until_time_limit(0))
    with ks.TopologyTestDriver(b.build()) as d:
        i = d.create_input_topic("in")
        i.pipe_input("k1", "v1", timestamp=0)
        i.pipe_input("k2", "v1", timestamp=1)
        got = [(r.key, r.value, r.timestamp) for r in d.create_output_topic("out").read_records_to_list()]
    assert got == [("v1", 1, 0), ("v1", 2, 1)]


def _windowed_suppressed(name: str | None = None) -> ks.Topology:
    b = ks.StreamsBuilder()
    counts = b.stream("in").group_by_key().windowed_by(TimeWindows(10_000)).count()
    counts.suppress(until_window_closes(), name=name).to_stream().to("out")
    return b.build()


@pytest.mark.parametrize(
    ("name", "store"), [(None, "KTABLE-SUPPRESS-STATE-STORE-0000000005"), ("final", "final-store")]
)
def test_the_suppression_buffer_is_a_logged_store_named_as_in_kafka(name: str | None, store: str) -> None:
    description = _windowed_suppressed(name).describe()
    nodes = {node["name"]: node for sub in description.subtopologies for node in sub["nodes"]}
    assert nodes[name or "KTABLE-SUPPRESS-0000000004"]["stores"] == [store]
    assert store in description.changelog_stores


def test_buffer_keys_and_values_round_trip_windowed_and_plain_keys_with_headers() -> None:
    keys, values = BufferKeySerde(serde_from("json")), BufferValueSerde(serde_from("json"))
    for key in (Windowed({"user": "a"}, 10_000, 20_000), Windowed("b", -5, 7), "plain", ["composite", 1]):
        assert keys.deserialize("t", keys.serialize("t", key)) == key
    held = BufferedUpdate(20_000, 12_345, (("trace", b"\x00\x01"), ("empty", None)), Change({"n": 2}, None))
    assert values.deserialize("t", values.serialize("t", held)) == held
    tombstone = BufferedUpdate(7, 3, (), Change(None, 4))
    assert values.deserialize("t", values.serialize("t", tombstone)) == tombstone


def test_a_corrupt_buffer_record_names_its_topic() -> None:
    with pytest.raises(SerializationError, match="suppression buffer key in topic 'app-x-changelog'"):
        BufferKeySerde(serde_from("json")).deserialize("app-x-changelog", b"\x07junk")
    with pytest.raises(SerializationError, match="suppression buffer value in topic 'app-x-changelog'"):
        BufferValueSerde(serde_from("json")).deserialize("app-x-changelog", b"\x00\x01")
