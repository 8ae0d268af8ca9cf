"""Kafka's murmur2 partitioner, checked against values from Kafka's own UtilsTest."""

from __future__ import annotations

from collections import Counter

import pytest

from kstream_nb.cluster.base import TopicSpec
from kstream_nb.cluster.memory import MemoryCluster
from kstream_nb.cluster.partitioner import default_partition, murmur2, to_positive


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"21", -973932308),
        (b"foobar", -790332482),
        (b"a-little-bit-long-string", -985981536),
        (b"a-little-bit-longer-string", -1486304829),
        (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
        (b"abc", 479470107),
    ],
)
def test_murmur2_matches_kafka(data: bytes, expected: int) -> None:
    assert murmur2(data) == expected


def test_to_positive_clears_sign_bit() -> None:
    assert to_positive(-1) == 0x7FFFFFFF
    assert to_positive(-(2**31)) == 0
    assert to_positive(5) == 5


def test_default_partition_is_stable_and_in_range() -> None:
    for key in (b"", b"a", b"user-42", bytes(range(37))):
        p = default_partition(key, 7)
        assert 0 <= p < 7
        assert p == to_positive(murmur2(key)) % 7
    assert default_partition(bytearray(b"abc"), 3) == default_partition(b"abc", 3)  # type: ignore[arg-type]


def test_null_keys_spread_round_robin(cluster: MemoryCluster) -> None:
    cluster.create_topics([TopicSpec("t", 4)])
    producer = cluster.producer()
    parts = Counter(producer.send("t", None, b"v").partition for _ in range(40))
    assert parts == {0: 10, 1: 10, 2: 10, 3: 10}


def test_keyed_records_follow_murmur2(cluster: MemoryCluster) -> None:
    cluster.create_topics([TopicSpec("t", 5)])
    producer = cluster.producer()
    for i in range(20):
        key = f"key-{i}".encode()
        assert producer.send("t", key, b"v").partition == default_partition(key, 5)
