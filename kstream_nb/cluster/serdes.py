"""Serdes: turn keys and values into bytes and back, byte-compatible with Kafka's Java serdes."""

from __future__ import annotations

import datetime as _dt
import functools
import struct
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from typing import Any

import orjson

from kstream_nb.errors import SerializationError

_JSON_OPTIONS = orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY


def _preview(data: bytes | bytearray | memoryview, limit: int = 32) -> str:
    raw = bytes(data[:limit])
    return repr(raw) + ("..." if len(data) > limit else "")


def _deser_error(serde: Serde, topic: str, data: bytes, exc: BaseException | str) -> SerializationError:
    return SerializationError(
        f"{type(serde).__name__} cannot deserialize data of topic {topic!r} "
        f"({len(data)} bytes, starting {_preview(data)}): {exc}"
    )


def _ser_error(serde: Serde, topic: str, data: Any, exc: BaseException | str) -> SerializationError:
    return SerializationError(
        f"{type(serde).__name__} cannot serialize a {type(data).__name__} for topic {topic!r}: {exc}"
    )


class Serde(ABC):
    """Serializer and deserializer of one type; ``None`` always maps to ``None`` (a Kafka null)."""

    @abstractmethod
    def serialize(self, topic: str, data: Any) -> bytes | None: ...

    @abstractmethod
    def deserialize(self, topic: str, data: bytes | None) -> Any: ...

    def serializer(self, topic: str, compact: bool = True) -> Callable[[Any], bytes | None]:
        """``serialize`` for one topic as a one-argument function (what a sink calls per record).

        ``compact=False``: the bytes are copied as soon as they are sent (Kafka's producer) and never kept,
        so a serde may return them without trimming its buffer.
        """
        return functools.partial(self.serialize, topic)

    def configure(self, configs: Mapping[str, Any], is_key: bool) -> Serde:
        """The serde as an app or call uses it for keys (``is_key``) or values, given the app's settings
        (Kafka's ``Serde.configure``): a Schema Registry serde binds its registry there. Returns a serde
        (``self`` when there is nothing to bind), never changes ``self``."""
        return self

    def canonical_key(self) -> Callable[[Any], Any] | None:
        """For a serde that reads some values back as another Python value with the same bytes (``"12"`` and
        ``12``): the function giving that read-back value, so that object-keyed stores find a key by its bytes
        as Kafka's byte-keyed stores do. None when every value reads back as itself."""
        return None

    @staticmethod
    def of(serialize: Callable[[Any], bytes | None], deserialize: Callable[[bytes], Any]) -> FunctionSerde:
        """A serde from two plain functions (they receive the data only, never None)."""
        return FunctionSerde(serialize, deserialize)

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other)

    def __hash__(self) -> int:
        return hash(type(self))

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class JoinedSerializers(dict[str, Callable[[Any], "bytes | None"]]):
    """A serde's serializer per topic, without the compact copy: for bytes joined into larger ones at once."""

    def __init__(self, serde: Serde) -> None:
        super().__init__()
        self.serde = serde

    def __missing__(self, topic: str) -> Callable[[Any], bytes | None]:
        serialize = self[topic] = self.serde.serializer(topic, compact=False)
        return serialize


def _json_default(obj: Any) -> Any:
    """Converts values orjson does not know natively (pandas, numpy extras, sets) to JSON types."""
    import numpy as np
    import pandas as pd

    if obj is pd.NaT or obj is pd.NA:
        return None
    if isinstance(obj, pd.Timestamp):
        return obj.isoformat()
    if isinstance(obj, pd.Timedelta):
        return obj.isoformat()
    if isinstance(obj, _dt.datetime | _dt.date | _dt.time):
        return obj.isoformat()
    if isinstance(obj, _dt.timedelta):
        return obj.total_seconds()
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, set | frozenset):
        return sorted(obj, key=repr)
    if isinstance(obj, tuple):
        return list(obj)
    if isinstance(obj, pd.Series):
        return obj.tolist()
    if isinstance(obj, bytes | bytearray | memoryview):
        return bytes(obj).decode("utf-8", errors="backslashreplace")
    raise TypeError(f"Type is not JSON serializable: {type(obj).__name__}")


def _json_bytes(serde: Serde, topic: str, data: Any) -> bytes:
    """``data`` as compact JSON bytes (orjson's own keep a ~4 KiB buffer each: a copy keeps logs and stores
    small); an error names ``serde`` and the topic."""
    try:
        return memoryview(orjson.dumps(data, default=_json_default, option=_JSON_OPTIONS)).tobytes()
    except (TypeError, orjson.JSONEncodeError) as exc:
        raise _ser_error(serde, topic, data, exc) from exc


class JsonSerde(Serde):
    """JSON via orjson; handles numpy scalars/arrays, pandas Timestamps (ISO strings) and datetimes."""

    def serialize(self, topic: str, data: Any) -> bytes | None:
        if data is None:
            return None
        return _json_bytes(self, topic, data)

    def serializer(self, topic: str, compact: bool = True) -> Callable[[Any], bytes | None]:
        """``serialize`` as a closure over orjson (no method lookups per record); without the compact copy
        when the bytes are not kept."""
        if type(self).serialize is not JsonSerde.serialize:
            return super().serializer(topic, compact)
        dumps, default, option = orjson.dumps, _json_default, _JSON_OPTIONS
        if not compact:

            def serialize_json_loose(data: Any) -> bytes | None:
                if data is None:
                    return None
                try:
                    return dumps(data, default=default, option=option)
                except (TypeError, orjson.JSONEncodeError) as exc:
                    raise _ser_error(self, topic, data, exc) from exc

            return serialize_json_loose

        def serialize_json(data: Any) -> bytes | None:
            if data is None:
                return None
            try:
                return memoryview(dumps(data, default=default, option=option)).tobytes()
            except (TypeError, orjson.JSONEncodeError) as exc:
                raise _ser_error(self, topic, data, exc) from exc

        return serialize_json

    def deserialize(self, topic: str, data: bytes | None) -> Any:
        if data is None:
            return None
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise _deser_error(self, topic, data, exc) from exc


class StringSerde(Serde):
    """UTF-8 strings (Java's StringSerializer)."""

    def serialize(self, topic: str, data: Any) -> bytes | None:
        if data is None:
            return None
        if not isinstance(data, str):
            raise _ser_error(self, topic, data, "expected str")
        return data.encode("utf-8")

    def deserialize(self, topic: str, data: bytes | None) -> Any:
        if data is None:
            return None
        try:
            return bytes(data).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise _deser_error(self, topic, data, exc) from exc


class BytesSerde(Serde):
    """Bytes as they are (Java's ByteArraySerializer); accepts bytes, bytearray and memoryview."""

    def serialize(self, topic: str, data: Any) -> bytes | None:
        if data is None:
            return None
        if isinstance(data, bytes):
            return data
        if isinstance(data, bytearray | memoryview):
            return bytes(data)
        raise _ser_error(self, topic, data, "expected bytes, bytearray or memoryview")

    def deserialize(self, topic: str, data: bytes | None) -> Any:
        return data


class _FixedWidthSerde(Serde):
    """Big-endian fixed-width numbers, as Kafka's Java number serializers write them."""

    _format: str = ""
    _width: int = 0
    _convert: Callable[[Any], Any] = int

    def serialize(self, topic: str, data: Any) -> bytes | None:
        if data is None:
            return None
        try:
            return struct.pack(self._format, type(self)._convert(data))
        except (struct.error, TypeError, ValueError, OverflowError) as exc:
            raise _ser_error(self, topic, data, exc) from exc

    def deserialize(self, topic: str, data: bytes | None) -> Any:
        if data is None:
            return None
        if len(data) != self._width:
            raise _deser_error(
                self, topic, data, f"size of data received is {len(data)}, expected {self._width} bytes"
            )
        return struct.unpack(self._format, data)[0]


def _to_int(data: Any) -> int:
    if isinstance(data, float):
        raise TypeError("expected an int, got a float")
    return int(data)


class ShortSerde(_FixedWidthSerde):
    """16-bit signed integers (Java's ShortSerializer)."""

    _format, _width, _convert = ">h", 2, staticmethod(_to_int)


class IntegerSerde(_FixedWidthSerde):
    """32-bit signed integers (Java's IntegerSerializer)."""

    _format, _width, _convert = ">i", 4, staticmethod(_to_int)


class LongSerde(_FixedWidthSerde):
    """64-bit signed integers (Java's LongSerializer)."""

    _format, _width, _convert = ">q", 8, staticmethod(_to_int)


class FloatSerde(_FixedWidthSerde):
    """IEEE 754 single precision (Java's FloatSerializer)."""

    _format, _width, _convert = ">f", 4, float


class DoubleSerde(_FixedWidthSerde):
    """IEEE 754 double precision (Java's DoubleSerializer)."""

    _format, _width, _convert = ">d", 8, float


class FunctionSerde(Serde):
    """A serde made of two user functions; equal when both functions are the same."""

    def __init__(self, serialize: Callable[[Any], bytes | None], deserialize: Callable[[bytes], Any]) -> None:
        self.serialize_fn = serialize
        self.deserialize_fn = deserialize

    def serialize(self, topic: str, data: Any) -> bytes | None:
        if data is None:
            return None
        try:
            result = self.serialize_fn(data)
        except SerializationError:
            raise
        except Exception as exc:
            raise _ser_error(self, topic, data, exc) from exc
        if result is not None and not isinstance(result, bytes):
            if isinstance(result, bytearray | memoryview):
                return bytes(result)
            raise _ser_error(self, topic, data, f"serializer returned {type(result).__name__}, not bytes")
        return result

    def deserialize(self, topic: str, data: bytes | None) -> Any:
        if data is None:
            return None
        try:
            return self.deserialize_fn(data)
        except SerializationError:
            raise
        except Exception as exc:
            raise _deser_error(self, topic, data, exc) from exc

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, FunctionSerde)
            and self.serialize_fn == other.serialize_fn
            and self.deserialize_fn == other.deserialize_fn
        )

    def __hash__(self) -> int:
        return hash((FunctionSerde, self.serialize_fn, self.deserialize_fn))

    def __repr__(self) -> str:
        return f"FunctionSerde({self.serialize_fn!r}, {self.deserialize_fn!r})"


#: first bytes of the JSON numbers and booleans (``null`` is left out: a None key is a Kafka null)
_JSON_SCALAR_START = frozenset(b"-0123456789tf")
#: first characters of the ``str`` keys that read back as another value (numbers, booleans, JSON)
_AMBIGUOUS_STR_START = frozenset('-0123456789tf{["')


class StringOrJsonSerde(Serde):
    """The default key serde: a ``str`` as its UTF-8 bytes (Java's StringSerializer), bytes as they are, any
    other key as JSON, so Java producers and kstream_nb put the same String key in the same partition.

    Reading back: JSON objects and arrays, JSON strings (``"..."``, the format of keys before this serde) and
    numbers or booleans written exactly as JSON writes them (``12``, ``1.5``, ``true``, not ``012`` or ``1.50``)
    come back as those values; other UTF-8 bytes as ``str``; the rest as ``bytes``. So a ``str`` key that
    reads as a number (``"12"``) comes back as the number, with the same bytes: key such topics with
    ``key_serde="string"`` to keep strings.
    """

    def serialize(self, topic: str, data: Any) -> bytes | None:
        if data is None:
            return None
        if type(data) is str:
            return data.encode("utf-8")
        if isinstance(data, bytes | bytearray | memoryview):
            return bytes(data)
        return _json_bytes(self, topic, data)

    def canonical_key(self) -> Callable[[Any], Any] | None:
        deserialize, ambiguous = self.deserialize, _AMBIGUOUS_STR_START

        def canonical(key: Any) -> Any:
            if type(key) is str and key[:1] in ambiguous:
                return deserialize("", key.encode("utf-8"))
            return key

        return canonical

    def deserialize(self, topic: str, data: bytes | None) -> Any:
        if data is None:
            return None
        if not data:
            return ""
        first = data[0]
        if first in b'{["':
            try:
                return orjson.loads(data)
            except orjson.JSONDecodeError:
                pass
        elif first in _JSON_SCALAR_START:
            try:
                value = orjson.loads(data)
            except orjson.JSONDecodeError:
                value = None
            if value is not None and orjson.dumps(value) == data:
                return value
        try:
            return bytes(data).decode("utf-8")
        except UnicodeDecodeError:
            return bytes(data)
