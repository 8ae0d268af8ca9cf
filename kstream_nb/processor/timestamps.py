"""Timestamp extractors: where a record's event time comes from (record, value field, callable, clock)."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from kstream_nb.processor.api import Record


class TimestampExtractor:
    """Gives the timestamp (ms) that drives stream time and windows for a consumed record."""

    #: True when the extractor only returns the record's own timestamp (lets batches skip extraction).
    uses_record_timestamp = False

    def extract(self, record: Record, partition_time: int) -> int:
        raise NotImplementedError


class RecordTimestampExtractor(TimestampExtractor):
    """The record's own timestamp (CreateTime or LogAppendTime): Kafka's default."""

    uses_record_timestamp = True

    def extract(self, record: Record, partition_time: int) -> int:
        return record.timestamp


class WallclockTimestampExtractor(TimestampExtractor):
    """Processing time: the wall clock when the record is consumed."""

    def extract(self, record: Record, partition_time: int) -> int:
        return int(time.time() * 1000)


def to_epoch_millis(value: Any) -> int:
    """Epoch milliseconds from an int/float (ms), a datetime, a pandas Timestamp or an ISO-8601 string."""
    if isinstance(value, bool):
        raise TypeError(f"cannot use {value!r} as a timestamp")
    if isinstance(value, (int, float)):
        return int(value)
    if isinstance(value, str):
        value = datetime.fromisoformat(value.replace("Z", "+00:00"))
    if hasattr(value, "timestamp"):
        return int(value.timestamp() * 1000)
    raise TypeError(f"cannot use {type(value).__name__} {value!r} as a timestamp")


class FieldTimestampExtractor(TimestampExtractor):
    """Event time from a field of a dict value (epoch ms, datetime or ISO-8601 string)."""

    def __init__(self, field: str) -> None:
        self.field = field

    def extract(self, record: Record, partition_time: int) -> int:
        value = record.value
        if not isinstance(value, dict) or self.field not in value:
            raise ValueError(f"timestamp field {self.field!r} missing in value {value!r}")
        return to_epoch_millis(value[self.field])

    def __repr__(self) -> str:
        return f"FieldTimestampExtractor({self.field!r})"


class CallableTimestampExtractor(TimestampExtractor):
    """Event time computed by a user function of the record (``fn(record) -> ms``)."""

    def __init__(self, fn: Callable[[Record], Any]) -> None:
        self.fn = fn

    def extract(self, record: Record, partition_time: int) -> int:
        return to_epoch_millis(self.fn(record))


TimestampExtractorLike = TimestampExtractor | Callable[[Record], Any] | str | None


def timestamp_extractor_from(spec: TimestampExtractorLike) -> TimestampExtractor:
    """Resolves ``None``/"record" (record time), "wallclock", ``"field:NAME"``, a callable or an extractor."""
    if spec is None or spec == "record":
        return RecordTimestampExtractor()
    if isinstance(spec, TimestampExtractor):
        return spec
    if spec in ("wallclock", "wall_clock", "processing_time"):
        return WallclockTimestampExtractor()
    if isinstance(spec, str) and spec.startswith("field:"):
        return FieldTimestampExtractor(spec[len("field:") :])
    if callable(spec):
        return CallableTimestampExtractor(spec)
    raise ValueError(
        f"unknown timestamp extractor {spec!r}: use 'record', 'wallclock', 'field:NAME', "
        "a callable(record) -> ms, or a TimestampExtractor"
    )
