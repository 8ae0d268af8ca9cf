"""Records as they live in a topic partition: raw bytes plus metadata, or decoded columns."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from kstream_nb.errors import SerializationError

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

    from kstream_nb.cluster.serdes import Serde

CREATE_TIME = 0
LOG_APPEND_TIME = 1

Headers = tuple[tuple[str, "bytes | None"], ...]


class TopicPartition(NamedTuple):
    """One partition of one topic."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(slots=True)
class ConsumerRecord:
    """A record read from a partition: serialized key and value with offset, timestamp and headers."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: Headers = ()
    timestamp_type: int = CREATE_TIME


@dataclass(slots=True)
class ColumnarBatch:
    """Records held as decoded columns: keys, dict values as a DataFrame (one column per field).

    ``key_serde``/``value_serde`` are the serdes whose ``deserialize`` would have produced these objects,
    so the batch can be turned into bytes (and a reader using the same serdes can skip the round trip).
    """

    keys: list[Any]
    values: pd.DataFrame
    timestamps: np.ndarray
    key_serde: Serde
    value_serde: Serde
    headers: list[Headers] | None = None

    def __len__(self) -> int:
        return len(self.keys)

    def serialized(
        self, topic: str, partition: int
    ) -> list[tuple[bytes | None, bytes | None, int | None, Headers, int | None]]:
        """The batch as serialized records (key, value, timestamp, headers, partition) for ``topic``."""
        key, value = self.key_serde.serialize, self.value_serde.serialize
        headers = self.headers or [()] * len(self.keys)
        return [
            (key(topic, self.keys[i]), value(topic, v), int(self.timestamps[i]), headers[i], partition)
            for i, v in enumerate(self.values.to_dict("records"))
        ]


@dataclass(slots=True)
class ProducerRecord:
    """A record to produce: decoded key and value, optional timestamp (ms) and headers."""

    key: Any
    value: Any
    timestamp: int | None = None
    headers: Any = None


#: Raw records of a fetch as parallel lists: offsets, keys, values, timestamps, headers.
RawColumns = tuple[list[int], list["bytes | None"], list["bytes | None"], list[int], list[Headers]]


class FetchedBatch:
    """Consecutive records of one partition returned by a poll.

    ``records`` holds the records (serialized); ``columnar`` is set when the log stored them as decoded
    columns, so a reader can process the batch column-wise: then ``records`` is built on first access.
    Offsets may have gaps (compacted topics); ``next_offset`` is where the next fetch starts.
    """

    __slots__ = (
        "_count",
        "_next_offset",
        "_records",
        "_timestamp_type",
        "base_offset",
        "columnar",
        "partition",
        "raw",
        "topic",
    )

    def __init__(
        self,
        topic: str,
        partition: int,
        base_offset: int,
        records: list[ConsumerRecord] | None = None,
        columnar: ColumnarBatch | None = None,
        next_offset: int | None = None,
        timestamp_type: int = CREATE_TIME,
        raw: RawColumns | None = None,
    ) -> None:
        if records is None and columnar is None and raw is None:
            raise ValueError("FetchedBatch needs records, raw columns or a columnar batch")
        self.raw = raw
        self.topic = topic
        self.partition = partition
        self.base_offset = base_offset
        self.columnar = columnar
        self._records = records
        if records is not None:
            self._count = len(records)
        elif raw is not None:
            self._count = len(raw[0])
        else:
            self._count = len(columnar)  # type: ignore[arg-type]
        if next_offset is None:
            if records:
                next_offset = records[-1].offset + 1
            elif raw is not None and raw[0]:
                next_offset = raw[0][-1] + 1
            else:
                next_offset = base_offset + self._count
        self._next_offset = next_offset
        self._timestamp_type = timestamp_type

    @property
    def records(self) -> list[ConsumerRecord]:
        """The records as ConsumerRecords; serializes a columnar batch on first access."""
        if self._records is None and self.raw is not None:
            offsets, keys, values, timestamps, headers = self.raw
            t, p, ts_type = self.topic, self.partition, self._timestamp_type
            self._records = [
                ConsumerRecord(t, p, off, ts, k, v, h, ts_type)
                for off, k, v, ts, h in zip(offsets, keys, values, timestamps, headers)
            ]
        if self._records is None:
            assert self.columnar is not None
            self._records = columnar_to_records(
                self.topic, self.partition, self.base_offset, self.columnar, self._timestamp_type
            )
        return self._records

    @property
    def materialized(self) -> bool:
        """Whether ``records`` has been built (always true for raw batches)."""
        return self._records is not None

    @property
    def next_offset(self) -> int:
        return self._next_offset

    def __len__(self) -> int:
        return self._count

    def __repr__(self) -> str:
        kind = "columnar" if self.columnar is not None else "raw"
        return (
            f"FetchedBatch({self.topic}-{self.partition}, {self._count} {kind} records, "
            f"offsets {self.base_offset}..{self._next_offset - 1})"
        )


def columnar_to_records(
    topic: str, partition: int, base_offset: int, batch: ColumnarBatch, timestamp_type: int = CREATE_TIME
) -> list[ConsumerRecord]:
    """Serializes a columnar batch into ConsumerRecords with contiguous offsets from ``base_offset``."""
    key_ser = batch.key_serde.serialize
    value_ser = batch.value_serde.serialize
    values = batch.values.to_dict("records")
    timestamps = batch.timestamps.tolist()
    headers = batch.headers
    return [
        ConsumerRecord(
            topic,
            partition,
            base_offset + i,
            int(timestamps[i]),
            key_ser(topic, key),
            value_ser(topic, values[i]),
            headers[i] if headers else (),
            timestamp_type,
        )
        for i, key in enumerate(batch.keys)
    ]


def normalize_headers(headers: Any) -> Headers:
    """Headers as a tuple of (str, bytes | None); accepts a mapping or pairs, str values are UTF-8."""
    if not headers:
        return ()
    items = headers.items() if isinstance(headers, Mapping) else headers
    out = []
    for name, value in items:
        if isinstance(value, str):
            value = value.encode("utf-8")
        elif isinstance(value, bytearray | memoryview):
            value = bytes(value)
        elif value is not None and not isinstance(value, bytes):
            raise SerializationError(f"header {name!r} must be bytes, str or None, got {type(value).__name__}")
        out.append((str(name), value))
    return tuple(out)


def as_tp(tp: Any) -> TopicPartition:
    """A TopicPartition from a TopicPartition or a (topic, partition) pair."""
    return tp if isinstance(tp, TopicPartition) else TopicPartition(*tp)


def as_bytes(topic: str, what: str, data: Any) -> bytes | None:
    """A key or value handed to a producer as bytes (None stays None); anything else is a missing serde."""
    if data is None or isinstance(data, bytes):
        return data
    if isinstance(data, bytearray | memoryview):
        return bytes(data)
    raise SerializationError(
        f"the {what} sent to topic {topic!r} is a {type(data).__name__}, not bytes; serialize it with a serde"
    )
