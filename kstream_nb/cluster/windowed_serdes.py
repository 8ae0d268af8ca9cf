"""Kafka Streams' own formats: windowed keys and timestamped values, byte for byte as Kafka Streams writes them.

Checked against Kafka Streams 4.4 (its classes, and bytes its TopologyTestDriver wrote):

- ``TimeWindowedSerde``: the key's bytes, then the window start as an 8-byte big-endian long (Java's
  ``TimeWindowedSerializer``, ``WindowKeySchema.toBinary``). The end is not in the bytes: reading gives
  ``end = start + window size``, as Java's ``TimeWindowedDeserializer`` does (Long.MAX_VALUE when that
  overflows). Its changelog form (``for_changelog``, Java's ``forChangelog(true)``) is a window store changelog's
  key: the key's bytes, the start, then a 4-byte sequence number (``WindowKeySchema.toStoreKeyBinary``; 0 unless
  the store keeps duplicates).
- ``SessionWindowedSerde``: the key's bytes, the session end, then its start, 8 bytes each (``SessionKeySchema``);
  also the key format of session store changelogs.
- ``ValueAndTimestampSerde``: an 8-byte timestamp, then the value's bytes (``ValueAndTimestampSerializer``): what
  Kafka Streams keeps in its timestamped key-value and window stores. Their changelog topics do not use it: a
  changelog record carries the plain value, with the timestamp as the record's timestamp.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from kstream_nb.cluster.serdes import Serde, _deser_error, _ser_error
from kstream_nb.durations import Duration, to_millis
from kstream_nb.errors import SerializationError

#: Java's Long.MAX_VALUE: the end of a time window whose size is unknown, or whose end overflows
LONG_MAX = 2**63 - 1

_LONG = struct.Struct(">q")
_LONG_INT = struct.Struct(">qi")
_TWO_LONGS = struct.Struct(">qq")


@dataclass(frozen=True, slots=True)
class Windowed:
    """A key with its window: what windowed aggregations are keyed by (Kafka's ``Windowed<K>``)."""

    key: Any
    start: int
    end: int

    def __str__(self) -> str:
        return f"[{self.key}@{self.start}/{self.end}]"


class ValueAndTimestamp(NamedTuple):
    """What timestamped stores (KTables, aggregations) hold: a value and the timestamp that produced it."""

    value: Any
    timestamp: int


class _WrappingSerde(Serde):
    """A serde of Kafka Streams' formats around the serde of the key or value inside (``inner``)."""

    #: what the bytes hold, for error messages
    layout = ""
    #: what the inner serde writes: the key of a windowed key, the value of a ValueAndTimestamp
    _part = "key"

    def __init__(self, inner: Serde) -> None:
        if not isinstance(inner, Serde):
            raise TypeError(f"{type(self).__name__} wraps a Serde, got {inner!r}")
        self.inner = inner

    def _deser_error(self, topic: str, data: bytes, problem: str) -> SerializationError:
        return _deser_error(self, topic, data, f"{problem}; expected {self.layout}")

    def _ser_error(self, topic: str, data: Any, problem: str) -> SerializationError:
        return _ser_error(self, topic, data, problem)

    def _inner_bytes(self, topic: str, data: Any, part: Any) -> bytes:
        """The inner serde's bytes of ``part`` (the key or value inside ``data``); a None result is an error."""
        try:
            raw = self.inner.serialize(topic, part)
        except SerializationError as exc:
            raise self._ser_error(topic, data, f"its {self._part} does not serialize: {exc}") from exc
        if raw is None:
            raise self._ser_error(topic, data, f"its {self._part} serializes to null (a None {self._part}?)")
        return raw

    def _inner_value(self, topic: str, data: bytes, raw: bytes) -> Any:
        try:
            return self.inner.deserialize(topic, raw)
        except SerializationError as exc:
            raise self._deser_error(topic, data, f"the {self._part} inside does not deserialize: {exc}") from exc

    def configure(self, configs: Mapping[str, Any], is_key: bool) -> Serde:
        """Configures the inner serde (a registry serde binds its registry); a new wrapper when it changed."""
        inner = self.inner.configure(configs, is_key)
        return self if inner is self.inner else self._with_inner(inner)

    def _with_inner(self, inner: Serde) -> Serde:
        return type(self)(inner)

    def _state(self) -> tuple[Any, ...]:
        return (self.inner,)

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and self._state() == other._state()

    def __hash__(self) -> int:
        return hash((type(self), *self._state()))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(repr(s) for s in self._state())})"


class _WindowedSerde(_WrappingSerde):
    """A serde of ``Windowed`` keys; ``serialize_base_key`` gives the bytes Kafka partitions them by."""

    def serialize_base_key(self, topic: str, data: Windowed) -> bytes | None:
        """The inner key's bytes (Kafka's ``WindowedSerializer.serializeBaseKey``): a windowed sink partitions
        by them, so every window of a key lands in the key's partition."""
        return None if data is None else self._inner_bytes(topic, data, data.key)

    def _windowed(self, topic: str, data: Any) -> Windowed:
        if not isinstance(data, Windowed):
            raise self._ser_error(topic, data, "expected a Windowed key (Windowed(key, start, end))")
        return data


class TimeWindowedSerde(_WindowedSerde):
    """Kafka's ``TimeWindowedSerde``: ``Windowed`` keys as the key's bytes plus the 8-byte window start.

    ``window_size`` (ms, a ``timedelta`` or ``"10s"``) gives the end when reading, ``end = start + size``, as
    Java's ``TimeWindowedDeserializer``; without it the end is unknown and reads as ``LONG_MAX``
    (Java's Long.MAX_VALUE). ``for_changelog=True`` reads and writes the key of a window store's changelog
    (4 more bytes: a sequence number, written as 0).
    """

    def __init__(self, inner: Serde, window_size: Duration | None = None, for_changelog: bool = False) -> None:
        super().__init__(inner)
        self.window_size_ms = None if window_size is None else to_millis(window_size, "window size")
        if self.window_size_ms == 0:
            raise ValueError("window size must be > 0 ms, got 0")
        self.is_changelog = bool(for_changelog)
        self.layout = (
            "the key's bytes, an 8-byte window start and a 4-byte sequence number (a window store changelog key)"
            if self.is_changelog
            else "the key's bytes and an 8-byte window start (a time-windowed key)"
        )

    def for_changelog(self, is_changelog: bool = True) -> TimeWindowedSerde:
        """This serde for a window store's changelog keys (Java's ``TimeWindowedSerde.forChangelog``)."""
        return TimeWindowedSerde(self.inner, self.window_size_ms, is_changelog)

    def serialize(self, topic: str, data: Any) -> bytes | None:
        if data is None:
            return None
        windowed = self._windowed(topic, data)
        key = self._inner_bytes(topic, data, windowed.key)
        try:
            suffix = _LONG_INT.pack(windowed.start, 0) if self.is_changelog else _LONG.pack(windowed.start)
        except struct.error as exc:
            raise self._ser_error(topic, data, f"window start {windowed.start!r} is not a 64-bit int") from exc
        return key + suffix

    def deserialize(self, topic: str, data: bytes | None) -> Any:
        if not data:  # Java's TimeWindowedDeserializer: null and empty bytes are a null key
            return None
        suffix = _LONG_INT.size if self.is_changelog else _LONG.size
        if len(data) < suffix:
            raise self._deser_error(topic, data, f"{len(data)} bytes is shorter than the {suffix}-byte suffix")
        split = len(data) - suffix
        start = _LONG.unpack_from(data, split)[0]
        size = LONG_MAX if self.window_size_ms is None else self.window_size_ms
        end = min(start + size, LONG_MAX)
        return Windowed(self._inner_value(topic, data, bytes(data[:split])), start, end)

    def _with_inner(self, inner: Serde) -> Serde:
        return TimeWindowedSerde(inner, self.window_size_ms, self.is_changelog)

    def _state(self) -> tuple[Any, ...]:
        return (self.inner, self.window_size_ms, self.is_changelog)

    def __repr__(self) -> str:
        changelog = ", for_changelog=True" if self.is_changelog else ""
        return f"TimeWindowedSerde({self.inner!r}, window_size={self.window_size_ms!r}{changelog})"


class SessionWindowedSerde(_WindowedSerde):
    """Kafka's ``SessionWindowedSerde``: ``Windowed`` keys as the key's bytes, the session end, then its start
    (8 bytes each; Kafka's ``SessionKeySchema``, also the key of session store changelogs)."""

    layout = "the key's bytes, an 8-byte session end and an 8-byte session start (a session-windowed key)"

    def serialize(self, topic: str, data: Any) -> bytes | None:
        if data is None:
            return None
        windowed = self._windowed(topic, data)
        key = self._inner_bytes(topic, data, windowed.key)
        try:
            return key + _TWO_LONGS.pack(windowed.end, windowed.start)
        except struct.error as exc:
            problem = f"session start {windowed.start!r} or end {windowed.end!r} is not a 64-bit int"
            raise self._ser_error(topic, data, problem) from exc

    def deserialize(self, topic: str, data: bytes | None) -> Any:
        if not data:  # Java's SessionWindowedDeserializer: null and empty bytes are a null key
            return None
        if len(data) < _TWO_LONGS.size:
            raise self._deser_error(topic, data, f"{len(data)} bytes is shorter than the 16-byte end and start")
        split = len(data) - _TWO_LONGS.size
        end, start = _TWO_LONGS.unpack_from(data, split)
        return Windowed(self._inner_value(topic, data, bytes(data[:split])), start, end)


class ValueAndTimestampSerde(_WrappingSerde):
    """Kafka's ``ValueAndTimestampSerde``: a ``ValueAndTimestamp`` as an 8-byte big-endian timestamp, then the
    value's bytes; a None value (or one the inner serde writes as null) is a Kafka null."""

    layout = "an 8-byte timestamp, then the value's bytes (a timestamped store value)"
    _part = "value"

    def serialize(self, topic: str, data: Any) -> bytes | None:
        if data is None:
            return None
        if not isinstance(data, ValueAndTimestamp):
            raise self._ser_error(topic, data, "expected a ValueAndTimestamp(value, timestamp)")
        if data.value is None:
            return None
        raw = self.inner.serialize(topic, data.value)
        if raw is None:
            return None
        try:
            return _LONG.pack(data.timestamp) + raw
        except struct.error as exc:
            raise self._ser_error(topic, data, f"timestamp {data.timestamp!r} is not a 64-bit int") from exc

    def deserialize(self, topic: str, data: bytes | None) -> Any:
        if data is None:
            return None
        if len(data) < _LONG.size:
            raise self._deser_error(topic, data, f"{len(data)} bytes is shorter than the 8-byte timestamp")
        value = self._inner_value(topic, data, bytes(data[_LONG.size :]))
        return None if value is None else ValueAndTimestamp(value, _LONG.unpack_from(data)[0])


#: ``windowed:<inner>``, ``windowed(<size>):<inner>``, ``windowed-changelog(<size>):<inner>``,
#: ``session-windowed:<inner>``, ``timestamped:<inner>``
_SPEC = re.compile(r"^\s*([a-z_-]+)\s*(?:\(\s*([^()]*?)\s*\))?\s*:\s*(.+?)\s*$", re.IGNORECASE)
WRAPPER_SPECS = ("windowed", "windowed(<size>)", "windowed-changelog(<size>)", "session-windowed", "timestamped")


def wrapper_from_spec(spec: str, inner_from: Callable[[str], Serde]) -> Serde | None:
    """The serde a spec like ``"windowed(10s):string"`` names (its inner spec resolved by ``inner_from``);
    None when ``spec`` has no wrapper prefix. Raises ValueError naming what is wrong with a wrapper spec."""
    match = _SPEC.match(spec)
    if match is None:
        return None
    name, size, inner_spec = match.group(1).lower().replace("_", "-"), match.group(2), match.group(3)
    if name not in ("windowed", "windowed-changelog", "session-windowed", "timestamped"):
        return None
    if size is not None and name not in ("windowed", "windowed-changelog"):
        raise ValueError(f"serde {spec!r}: only time windows have a size ({name!r} takes none)")
    window_size_ms = None
    if size is not None:
        try:
            window_size_ms = to_millis(int(size) if size.isdigit() else size, "window size")
            if window_size_ms <= 0:
                raise ValueError(f"window size must be > 0 ms, got {size!r}")
        except ValueError as exc:
            example = "write e.g. 'windowed(10s):string' or 'windowed(60000):long'"
            raise ValueError(f"serde {spec!r}: {exc}; {example}") from exc
    try:
        inner = inner_from(inner_spec)
    except ValueError as exc:
        raise ValueError(f"serde {spec!r}: {exc}") from exc
    if name == "session-windowed":
        return SessionWindowedSerde(inner)
    if name == "timestamped":
        return ValueAndTimestampSerde(inner)
    return TimeWindowedSerde(inner, window_size_ms, name == "windowed-changelog")
