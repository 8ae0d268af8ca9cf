"""The stream-table join buffer (Kafka's RocksDBTimeOrderedKeyValueBuffer): grace, order, changelog, restore."""

from __future__ import annotations

from kstream_nb.cluster.serde_specs import serde_from
from kstream_nb.state.time_ordered_buffer import (
    BufferedRecord,
    TimeOrderedJoinBuffer,
    TimeOrderedJoinBufferBuilder,
)
from tests.state.conftest import FakeContext


def make(grace: int = 5) -> tuple[TimeOrderedJoinBuffer, FakeContext]:
    buffer = TimeOrderedJoinBufferBuilder("KSTREAM-JOIN-0000000004-Buffer", grace, "string", "json").build()
    context = FakeContext()
    buffer.init(context)
    return buffer, context


def test_records_wait_for_the_grace_period_and_leave_in_time_then_key_order() -> None:
    buffer, _ = make(grace=5)
    assert buffer.put("b", {"v": 1}, 10)
    assert buffer.put("a", {"v": 2}, 10)
    assert buffer.put("a", {"v": 3}, 8)
    assert buffer.evict() == []  # stream time 10: nothing at or before 5
    assert buffer.put("c", {"v": 4}, 15)
    assert buffer.evict() == [
        BufferedRecord("a", {"v": 3}, 8, ()),
        BufferedRecord("a", {"v": 2}, 10, ()),
        BufferedRecord("b", {"v": 1}, 10, ()),
    ]
    assert len(buffer) == 1


def test_a_record_older_than_the_grace_period_is_not_buffered() -> None:
    buffer, _ = make(grace=5)
    buffer.put("a", 1, 20)
    assert buffer.put("a", 2, 15) is True  # exactly stream time - grace: buffered (and due at once)
    assert buffer.put("a", 3, 14) is False
    assert buffer.evict() == [BufferedRecord("a", 2, 15, ())]
    assert buffer.observed_stream_time == 20


def test_equal_timestamp_and_key_keep_arrival_order() -> None:
    buffer, _ = make(grace=0)
    buffer.put("k", "first", 3)
    buffer.put("k", "second", 3)
    assert [r.value for r in buffer.evict()] == ["first", "second"]


def test_puts_and_evictions_are_logged_and_restored() -> None:
    buffer, context = make(grace=5)
    buffer.put("a", {"v": 1}, 1, headers=(("h", b"x"),))
    buffer.put("b", {"v": 2}, 9)
    buffer.put("c", {"v": 3}, 7)
    assert [r.key for r in buffer.evict()] == ["a"]
    logged = [(key, value, ts) for _, _, key, value, ts in context.logged]
    assert [ts for _, _, ts in logged] == [1, 9, 7, 1]
    assert logged[-1][1] is None  # the eviction's tombstone
    assert context.registered[0][2] == "app-KSTREAM-JOIN-0000000004-Buffer-changelog"

    restored, other = make(grace=5)
    other.registered[0][1](logged)
    assert restored.observed_stream_time == 9 and len(restored) == 2
    assert restored.put("d", {"v": 4}, 20)
    assert restored.evict() == [
        BufferedRecord("c", {"v": 3}, 7, ()),
        BufferedRecord("b", {"v": 2}, 9, ()),
    ]


def test_headers_survive_the_changelog() -> None:
    buffer, context = make(grace=0)
    buffer.put("a", "v", 5, headers=(("h", b"1"), ("n", None)))
    restored = TimeOrderedJoinBuffer("buf", 10, serde_from("string"), serde_from("json"))
    other = FakeContext()
    restored.init(other)
    other.registered[0][1]([(k, v, ts) for _, _, k, v, ts in context.logged])
    assert restored.put("z", "later", 100)
    assert restored.evict()[0] == BufferedRecord("a", "v", 5, (("h", b"1"), ("n", None)))


def test_waiting_records_can_be_read() -> None:
    buffer, _ = make(grace=5)
    buffer.put("b", 1, 3)
    buffer.put("a", 2, 4)
    assert [(kv.key, kv.value.value) for kv in buffer.all()] == [("b", 1), ("a", 2)]
    assert buffer.approximate_num_entries() == 2 and [kv.key for kv in buffer.range("b")] == ["b"]
