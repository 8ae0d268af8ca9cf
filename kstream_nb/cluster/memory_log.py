"""The partition log of the embedded cluster: segments of raw records or columnar batches.

Offsets are contiguous when appended; compaction may leave gaps, which fetches skip.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from kstream_nb.cluster.records import (
    CREATE_TIME,
    LOG_APPEND_TIME,
    ColumnarBatch,
    FetchedBatch,
    Headers,
    columnar_to_records,
)
from kstream_nb.errors import StreamsError
from kstream_nb.time_bounds import now_ms

DEFAULT_RETENTION_MS = 7 * 24 * 3_600_000
DEFAULT_DELETE_RETENTION_MS = 24 * 3_600_000
DEFAULT_SEGMENT_RECORDS = 10_000
CLEANUP_POLICIES = ("delete", "compact", "compact,delete", "delete,compact")
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")


@dataclass(frozen=True)
class TopicConfig:
    """The topic configs the embedded cluster honours, parsed from Kafka's config names."""

    compact: bool = False
    delete: bool = True
    retention_ms: int = DEFAULT_RETENTION_MS
    delete_retention_ms: int = DEFAULT_DELETE_RETENTION_MS
    timestamp_type: int = CREATE_TIME

    @staticmethod
    def parse(topic: str, config: Mapping[str, Any]) -> TopicConfig:
        """Validates Kafka-named configs; raises StreamsError naming the topic and the bad setting."""
        policy = str(config.get("cleanup.policy", "delete")).replace(" ", "").lower()
        if policy not in CLEANUP_POLICIES:
            raise StreamsError(
                f"topic {topic!r}: cleanup.policy={policy!r} is not one of {', '.join(CLEANUP_POLICIES[:3])}"
            )
        ts_type = str(config.get("message.timestamp.type", "CreateTime"))
        if ts_type not in TIMESTAMP_TYPES:
            raise StreamsError(
                f"topic {topic!r}: message.timestamp.type={ts_type!r} is not CreateTime or LogAppendTime"
            )
        try:
            retention = int(config.get("retention.ms", DEFAULT_RETENTION_MS))
            delete_retention = int(config.get("delete.retention.ms", DEFAULT_DELETE_RETENTION_MS))
        except (TypeError, ValueError) as exc:
            raise StreamsError(f"topic {topic!r}: invalid retention setting: {exc}") from exc
        return TopicConfig(
            compact="compact" in policy,
            delete="delete" in policy,
            retention_ms=retention,
            delete_retention_ms=delete_retention,
            timestamp_type=LOG_APPEND_TIME if ts_type == "LogAppendTime" else CREATE_TIME,
        )


@dataclass
class RawSegment:
    """Serialized records in parallel lists; ``offsets`` is None while they are contiguous."""

    base_offset: int
    keys: list[bytes | None] = field(default_factory=list)
    values: list[bytes | None] = field(default_factory=list)
    timestamps: list[int] = field(default_factory=list)
    headers: list[Headers] = field(default_factory=list)
    offsets: list[int] | None = None
    max_timestamp: int = -1
    last_append_ms: int = 0
    payload: int | None = None  # payload_bytes() once the segment is closed (it no longer changes)

    def __len__(self) -> int:
        return len(self.keys)

    @property
    def next_offset(self) -> int:
        if self.offsets is not None:
            return self.offsets[-1] + 1 if self.offsets else self.base_offset
        return self.base_offset + len(self.keys)

    def offset_at(self, index: int) -> int:
        return self.offsets[index] if self.offsets is not None else self.base_offset + index

    def index_of(self, offset: int) -> int:
        """Index of the first record with an offset >= ``offset``."""
        if self.offsets is not None:
            return bisect.bisect_left(self.offsets, offset)
        return max(0, offset - self.base_offset)

    def offset_for_time(self, timestamp: int) -> int | None:
        """The earliest offset whose timestamp is >= ``timestamp`` (None: no record here is that new)."""
        if self.max_timestamp < timestamp:
            return None
        stamps = np.fromiter(self.timestamps, dtype=np.int64, count=len(self.timestamps))
        return self.offset_at(int(np.argmax(stamps >= timestamp)))


@dataclass
class ColumnarSegment:
    """One ColumnarBatch appended whole; its offsets are contiguous."""

    base_offset: int
    batch: ColumnarBatch
    max_timestamp: int
    last_append_ms: int
    payload: int | None = None  # payload_bytes(), computed on first use: serializing the batch costs

    def __len__(self) -> int:
        return len(self.batch)

    @property
    def next_offset(self) -> int:
        return self.base_offset + len(self.batch)

    def offset_for_time(self, timestamp: int) -> int | None:
        """The earliest offset whose timestamp is >= ``timestamp`` (None: no record here is that new)."""
        if self.max_timestamp < timestamp:
            return None
        return self.base_offset + int(np.argmax(self.batch.timestamps >= timestamp))


Segment = RawSegment | ColumnarSegment


class PartitionLog:
    """One partition: an ordered list of segments, guarded by its own lock."""

    def __init__(
        self, topic: str, partition: int, config: TopicConfig, segment_records: int = DEFAULT_SEGMENT_RECORDS
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.config = config
        self.segment_records = segment_records
        self.lock = threading.Lock()
        self._segments: list[Segment] = []
        self._bases: list[int] = []
        self._start = 0
        self._end = 0
        self._appended_since_clean = 0
        self._live_after_clean = 0

    @property
    def start_offset(self) -> int:
        return self._start

    @property
    def end_offset(self) -> int:
        return self._end

    def _active_raw(self, now: int) -> RawSegment:
        seg = self._segments[-1] if self._segments else None
        if isinstance(seg, RawSegment) and seg.offsets is None and len(seg) < self.segment_records:
            return seg
        new = RawSegment(self._end, last_append_ms=now)
        self._push(new)
        return new

    def _push(self, seg: Segment) -> None:
        self._segments.append(seg)
        self._bases.append(seg.base_offset)

    def append(
        self, key: bytes | None, value: bytes | None, timestamp: int | None, headers: Headers
    ) -> tuple[int, int]:
        """Appends one record; returns (offset, timestamp as stored)."""
        if key is None and self.config.compact:
            raise StreamsError(f"compacted topic {self.topic!r} cannot accept a record with a null key")
        with self.lock:
            now = now_ms()
            if timestamp is None or self.config.timestamp_type == LOG_APPEND_TIME:
                timestamp = now
            seg = self._active_raw(now)
            seg.keys.append(key)
            seg.values.append(value)
            seg.timestamps.append(timestamp)
            seg.headers.append(headers)
            if timestamp > seg.max_timestamp:
                seg.max_timestamp = timestamp
            seg.last_append_ms = now
            offset = self._end
            self._end += 1
            if len(seg) >= self.segment_records:
                self._after_roll(now)
            return offset, timestamp

    def append_many(self, records: list[tuple[bytes | None, bytes | None, int | None, Headers]]) -> None:
        """Appends several records under one lock (the producer's batch path)."""
        if self.config.compact and any(r[0] is None for r in records):
            raise StreamsError(f"compacted topic {self.topic!r} cannot accept a record with a null key")
        with self.lock:
            now = now_ms()
            log_append = self.config.timestamp_type == LOG_APPEND_TIME
            # append's body again, inline: this loop runs once per record a producer sends
            for key, value, timestamp, headers in records:
                if timestamp is None or log_append:
                    timestamp = now
                seg = self._active_raw(now)
                seg.keys.append(key)
                seg.values.append(value)
                seg.timestamps.append(timestamp)
                seg.headers.append(headers)
                if timestamp > seg.max_timestamp:
                    seg.max_timestamp = timestamp
                seg.last_append_ms = now
                self._end += 1
                if len(seg) >= self.segment_records:
                    self._after_roll(now)

    def append_columnar(self, batch: ColumnarBatch) -> int:
        """Appends a whole ColumnarBatch as one segment; returns its base offset."""
        if not len(batch):
            return self._end
        if self.config.compact and any(k is None for k in batch.keys):
            raise StreamsError(f"compacted topic {self.topic!r} cannot accept a record with a null key")
        with self.lock:
            now = now_ms()
            if self.config.timestamp_type == LOG_APPEND_TIME:
                batch = replace(batch, timestamps=np.full(len(batch), now, dtype=np.int64))
            max_ts = int(np.max(batch.timestamps))
            seg = ColumnarSegment(self._end, batch, max_ts, now)
            self._push(seg)
            self._end += len(batch)
            self._after_roll(now, appended=len(batch))
            return seg.base_offset

    def roll(self) -> None:
        """Closes the active raw segment so that compaction and retention may touch its records."""
        with self.lock:
            if self._segments and isinstance(self._segments[-1], RawSegment) and len(self._segments[-1]):
                self._push(RawSegment(self._end, last_append_ms=now_ms()))

    def _after_roll(self, now: int, appended: int = 0) -> None:
        self._appended_since_clean += appended or self.segment_records
        if self.config.delete:
            self._apply_retention(now)
        if self.config.compact and self._appended_since_clean >= max(self.segment_records, self._live_after_clean):
            self._compact(now)

    def apply_retention(self) -> int:
        """Drops closed segments older than retention.ms; returns the number of records dropped."""
        with self.lock:
            return self._apply_retention(now_ms()) if self.config.delete else 0

    def _apply_retention(self, now: int) -> int:
        if self.config.retention_ms < 0:
            return 0
        limit = now - self.config.retention_ms
        dropped = 0
        while len(self._segments) > 1 and self._segments[0].max_timestamp < limit:
            seg = self._segments.pop(0)
            self._bases.pop(0)
            dropped += len(seg)
            self._start = self._segments[0].base_offset
        return dropped

    def compact(self) -> int:
        """Runs the log cleaner now (closed segments only); returns the number of records removed."""
        with self.lock:
            return self._compact(now_ms()) if self.config.compact else 0

    def _compact(self, now: int) -> int:
        self._appended_since_clean = 0
        closed = self._segments[:-1]
        if not closed:
            return 0
        raws = [self._as_raw(seg) for seg in closed]
        latest: dict[bytes | None, int] = {}
        for seg in raws:
            for i, key in enumerate(seg.keys):
                latest[key] = seg.offset_at(i)
        tombstone_limit = now - self.config.delete_retention_ms
        out: list[Segment] = []
        current: RawSegment | None = None
        removed = 0
        for seg in raws:
            drop_tombstones = seg.last_append_ms <= tombstone_limit
            for i, key in enumerate(seg.keys):
                off = seg.offset_at(i)
                value = seg.values[i]
                if latest[key] != off or (value is None and drop_tombstones):
                    removed += 1
                    continue
                if current is None or len(current) >= self.segment_records:
                    current = RawSegment(off, offsets=[], last_append_ms=seg.last_append_ms)
                    out.append(current)
                assert current.offsets is not None
                current.keys.append(key)
                current.values.append(value)
                current.timestamps.append(seg.timestamps[i])
                current.headers.append(seg.headers[i])
                current.offsets.append(off)
                current.max_timestamp = max(current.max_timestamp, seg.timestamps[i])
                current.last_append_ms = max(current.last_append_ms, seg.last_append_ms)
        if not out:
            out.append(RawSegment(closed[0].base_offset, offsets=[], last_append_ms=now))
        self._segments = [*out, self._segments[-1]]
        self._bases = [seg.base_offset for seg in self._segments]
        self._live_after_clean = sum(len(seg) for seg in self._segments)
        return removed

    def _as_raw(self, seg: Segment) -> RawSegment:
        if isinstance(seg, RawSegment):
            return seg
        records = columnar_to_records(self.topic, self.partition, seg.base_offset, seg.batch)
        return RawSegment(
            seg.base_offset,
            keys=[r.key for r in records],
            values=[r.value for r in records],
            timestamps=[r.timestamp for r in records],
            headers=[r.headers for r in records],
            max_timestamp=seg.max_timestamp,
            last_append_ms=seg.last_append_ms,
        )

    def offset_for_time(self, timestamp: int) -> int:
        """The earliest offset whose record timestamp is >= ``timestamp``, the end offset when none is, as Kafka
        answers ListOffsets by time (out-of-order timestamps: the first record that new, older ones may follow).
        The time index is Kafka's coarse one, each segment's largest timestamp: the first segment that reaches
        the target is searched. (A per-record index cost a quarter of the append rate, in-order timestamps
        growing it at every record; a search of one segment of at most ``segment_records`` takes < 1 ms.)"""
        with self.lock:
            for seg in self._segments:
                if seg.max_timestamp >= timestamp:
                    found = seg.offset_for_time(timestamp)
                    if found is not None:
                        return found
            return self._end

    def payload_bytes(self) -> int:
        """The bytes of the partition's keys, values and headers (names and values) as they are stored:
        what its records weigh without Kafka's batch overhead; closed segments keep their sum."""
        with self.lock:
            segments = list(self._segments)
        total = 0
        for i, seg in enumerate(segments):
            if seg.payload is not None:
                total += seg.payload
                continue
            if isinstance(seg, ColumnarSegment):
                size = _records_size(
                    (k, v, h) for k, v, _, h, _ in seg.batch.serialized(self.topic, self.partition)
                )
            else:
                with self.lock:
                    size = _records_size(zip(seg.keys, seg.values, seg.headers, strict=False))
            if isinstance(seg, ColumnarSegment) or i < len(segments) - 1:
                seg.payload = size
            total += size
        return total

    def fetch(self, offset: int, max_records: int) -> tuple[list[FetchedBatch], int]:
        """Up to ``max_records`` records from ``offset`` (>= start offset) and the offset after them."""
        ts_type = self.config.timestamp_type
        parts: list[FetchedBatch | _RawSlice] = []
        with self.lock:
            if offset >= self._end:
                return [], offset
            idx = max(0, bisect.bisect_right(self._bases, offset) - 1)
            for seg in self._segments[idx:]:
                if max_records <= 0:
                    break
                if seg.next_offset <= offset:
                    continue
                if isinstance(seg, ColumnarSegment):
                    lo = max(0, offset - seg.base_offset)
                    hi = min(len(seg), lo + max_records)
                    batch = seg.batch if lo == 0 and hi == len(seg) else _slice_batch(seg.batch, lo, hi)
                    parts.append(
                        FetchedBatch(self.topic, self.partition, seg.base_offset + lo, None, batch, None, ts_type)
                    )
                else:
                    lo = seg.index_of(offset)
                    hi = min(len(seg), lo + max_records)
                    if hi <= lo:
                        continue
                    parts.append(_RawSlice.take(seg, lo, hi))
                max_records -= hi - lo
                offset = seg.offset_at(hi - 1) + 1 if isinstance(seg, RawSegment) else seg.base_offset + hi
            end = self._end
        batches = [
            part if isinstance(part, FetchedBatch) else part.build(self.topic, self.partition, ts_type)
            for part in parts
        ]
        return batches, batches[-1].next_offset if batches else end


@dataclass(frozen=True, slots=True)
class _RawSlice:
    """A copy of part of a raw segment, taken under the lock and turned into records outside it."""

    keys: list[bytes | None]
    values: list[bytes | None]
    timestamps: list[int]
    headers: list[Headers]
    offsets: list[int] | range
    next_offset: int

    @staticmethod
    def take(seg: RawSegment, lo: int, hi: int) -> _RawSlice:
        offsets = (
            seg.offsets[lo:hi] if seg.offsets is not None else range(seg.base_offset + lo, seg.base_offset + hi)
        )
        return _RawSlice(
            seg.keys[lo:hi],
            seg.values[lo:hi],
            seg.timestamps[lo:hi],
            seg.headers[lo:hi],
            offsets,
            seg.next_offset if hi == len(seg) else seg.offset_at(hi),
        )

    def build(self, topic: str, partition: int, ts_type: int) -> FetchedBatch:
        offsets = list(self.offsets)
        raw = (offsets, self.keys, self.values, self.timestamps, self.headers)
        return FetchedBatch(topic, partition, offsets[0], None, None, self.next_offset, ts_type, raw=raw)


def _records_size(records: Iterable[tuple[bytes | None, bytes | None, Headers]]) -> int:
    """The summed lengths of keys, values, header names (UTF-8) and header values."""
    total = 0
    for key, value, headers in records:
        total += (len(key) if key is not None else 0) + (len(value) if value is not None else 0)
        for name, header in headers:
            total += len(name.encode()) + (len(header) if header is not None else 0)
    return total


def _slice_batch(batch: ColumnarBatch, lo: int, hi: int) -> ColumnarBatch:
    return replace(
        batch,
        keys=batch.keys[lo:hi],
        values=batch.values.iloc[lo:hi].reset_index(drop=True),
        timestamps=batch.timestamps[lo:hi],
        headers=batch.headers[lo:hi] if batch.headers else None,
    )


class TopicLog:
    """A topic: its config and its partition logs."""

    def __init__(
        self,
        name: str,
        partitions: int,
        config: Mapping[str, Any],
        segment_records: int = DEFAULT_SEGMENT_RECORDS,
    ) -> None:
        self.name = name
        self.raw_config = {str(k): str(v) for k, v in config.items()}
        self.config = TopicConfig.parse(name, config)
        self.segment_records = segment_records
        self.partitions = [PartitionLog(name, p, self.config, segment_records) for p in range(partitions)]

    def add_partitions(self, new_total: int) -> None:
        for p in range(len(self.partitions), new_total):
            self.partitions.append(PartitionLog(self.name, p, self.config, self.segment_records))
