"""Kafka's default partitioner: murmur2 of the key bytes, so keys land where Java clients put them."""

from __future__ import annotations

import struct
from functools import lru_cache

_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


@lru_cache(maxsize=65_536)
def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2`` (seed 0x9747b28c) as a signed 32-bit int."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    length4 = length // 4
    for k in struct.unpack_from(f"<{length4}I", data):
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = (h * _M) & _MASK
        h ^= k
    tail = length & ~3
    extra = length % 4
    if extra == 3:
        h ^= data[tail + 2] << 16
    if extra >= 2:
        h ^= data[tail + 1] << 8
    if extra >= 1:
        h ^= data[tail]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - 0x100000000 if h & 0x80000000 else h


def to_positive(n: int) -> int:
    """Kafka's ``Utils.toPositive``: clears the sign bit."""
    return n & 0x7FFFFFFF


def default_partition(key_bytes: bytes, num_partitions: int) -> int:
    """The partition Kafka's default partitioner picks for a non-null key."""
    return _partition(key_bytes if type(key_bytes) is bytes else bytes(key_bytes), num_partitions)


@lru_cache(maxsize=1 << 16)
def _partition(key_bytes: bytes, num_partitions: int) -> int:
    return to_positive(murmur2(key_bytes)) % num_partitions
