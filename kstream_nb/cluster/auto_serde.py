"""``AutoSerde`` (spec ``"auto"``): guesses each record's format, for exploring topics written by others."""

from __future__ import annotations

import math
import re
import struct
from collections.abc import Mapping
from typing import Any

from kstream_nb.cluster.serdes import Serde, StringOrJsonSerde
from kstream_nb.errors import SerializationError, TopologyError

#: control characters that plain text does not contain (tab, newline and carriage return are allowed)
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
#: the magnitudes read as a double / float rather than a long / int (see ``AutoSerde``)
_DOUBLE_RANGE = (1e-9, 1e18)
_FLOAT_RANGE = (1e-6, 1e9)
#: most significant digits of a 4-byte float read as a float: what people type (``1.5``, ``98.6``, ``0.001``)
_FLOAT_DIGITS = 6
_PREVIEW_BYTES = 32
_TEXT = StringOrJsonSerde()


def hex_preview(data: bytes | bytearray | memoryview, limit: int = _PREVIEW_BYTES) -> str:
    """``0x`` and the hex of the first ``limit`` bytes; longer data ends with ``… (N bytes)``."""
    raw = bytes(data)
    if len(raw) <= limit:
        return "0x" + raw.hex()
    return f"0x{raw[:limit].hex()}… ({len(raw)} bytes)"


class RawBytes(bytes):
    """Bytes no format rule decoded: equal to (and usable as) those bytes, shown as a hex preview in
    DataFrames, widgets and the panel instead of a long ``b'\\x00...'`` escape string."""

    def __repr__(self) -> str:
        return hex_preview(self)

    __str__ = __repr__


def _short_float(data: bytes) -> float | None:
    """A 4-byte IEEE-754 single read as what a person typed: the decimal of at most ``_FLOAT_DIGITS``
    significant digits whose nearest single it is, when its magnitude is in ``_FLOAT_RANGE``; else None."""
    (value,) = struct.unpack(">f", data)
    if not math.isfinite(value) or not _FLOAT_RANGE[0] <= abs(value) < _FLOAT_RANGE[1]:
        return None
    for digits in range(1, _FLOAT_DIGITS + 1):
        decimal = float(f"{value:.{digits - 1}e}")
        if struct.pack(">f", decimal) == data:
            return decimal
    return None


def _plain_double(data: bytes) -> float | None:
    """An 8-byte IEEE-754 double when finite with a magnitude in ``_DOUBLE_RANGE``; else None."""
    (value,) = struct.unpack(">d", data)
    if math.isfinite(value) and _DOUBLE_RANGE[0] <= abs(value) < _DOUBLE_RANGE[1]:
        return float(value)
    return None


class AutoSerde(Serde):
    """Reads each record in the first format that fits, in this order (``detect`` also names the format):

    1. ``avro`` / ``protobuf`` / ``jsonschema``: Confluent's wire format (byte 0 is 0, then a 4-byte schema
       id) whose id the bound registry knows; decoded with the serde of the schema's type. An unknown id or a
       payload that does not match its schema falls through to the next rules (ending as bytes).
    2. ``json`` / ``string``: UTF-8 text without control characters (tab, CR, LF allowed), read as the
       default key serde reads it: JSON objects, arrays and strings, and numbers or booleans written exactly
       as JSON writes them, come back as values; other text as ``str`` (so text ``"1234"`` is 1234).
    3. ``double`` / ``long`` (8 bytes, Java's Double/LongSerializer): a double when it is finite with a
       magnitude in [1e-9, 1e18); else a long. Such doubles read as longs of magnitude over 4.4e18, beyond
       counters, ids and epoch timestamps in s/ms/µs/ns, which all stay longs.
    4. ``float`` / ``int`` (4 bytes, Java's Float/IntegerSerializer): a float when it is in [1e-6, 1e9) in
       magnitude and is the nearest single of a decimal with at most 6 significant digits (returned as that
       decimal, as Java prints it); else an int. Such floats read as ints of magnitude over 897,988,541.
    5. ``bytes``: anything else, as ``RawBytes`` (shown as a ``0x…`` hex preview). Decoding never fails.

    Known ambiguities, read with an explicit serde instead: printable 4/8-byte numbers read as text (int
    1633837924 is ``"abcd"``); an 8-byte long from 2**32 to 2**56 whose bytes 1-4 are a registered schema id
    is tried as that schema first; Kafka Streams' windowed keys (key bytes + 8-byte timestamps, ambiguous by
    nature) are not detected (use ``"windowed:string"``...); 2-byte shorts and 1-byte booleans read as bytes.
    Auto is for reading: ``serialize`` refuses, and app sources refuse it (``refuse_auto_source``).
    """

    def __init__(self, decoders: Mapping[str, Serde] | None = None, schema_type: Any = None) -> None:
        # schema type (AVRO/PROTOBUF/JSON) -> a serde bound to the registry; schema_type(id) -> type or None
        self._decoders = dict(decoders or {})
        self._schema_type = schema_type

    def serialize(self, topic: str, data: Any) -> bytes | None:
        raise SerializationError(
            f"the 'auto' serde only reads (it guesses each record's format); to write to topic {topic!r} "
            "choose a format: 'json', 'string', 'long', 'avro'..."
        )

    def deserialize(self, topic: str, data: bytes | None) -> Any:
        return self.detect(topic, data)[1]

    def detect(self, topic: str, data: bytes | bytearray | memoryview | None) -> tuple[str, Any]:
        """``(format, value)`` of one record's key or value, by the rules of the class docstring."""
        if data is None:
            return "null", None
        raw = bytes(data)
        if len(raw) >= 5 and raw[0] == 0 and self._schema_type is not None:
            found = self._registry_value(topic, raw)
            if found is not None:
                return found
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            text = None
        if text is not None and not _CONTROL.search(text):
            value = _TEXT.deserialize(topic, raw)
            return ("string" if value == text else "json"), value
        if len(raw) == 8:
            double = _plain_double(raw)
            return ("long", struct.unpack(">q", raw)[0]) if double is None else ("double", double)
        if len(raw) == 4:
            single = _short_float(raw)
            return ("int", struct.unpack(">i", raw)[0]) if single is None else ("float", single)
        return "bytes", RawBytes(raw)

    def _registry_value(self, topic: str, raw: bytes) -> tuple[str, Any] | None:
        """The record decoded through the registry, or None when it is not a wire-format record it knows."""
        return None

    def __repr__(self) -> str:
        return "AutoSerde()"


def refuse_auto_source(topic: str, key_serde: Serde | None, value_serde: Serde | None) -> None:
    """Raises when an app source reads ``topic`` with the ``auto`` serde: an app needs one format per topic."""
    for what, serde in (("key_serde", key_serde), ("value_serde", value_serde)):
        if isinstance(serde, AutoSerde):
            raise TopologyError(
                f"source topic {topic!r}: {what}='auto' is for exploring (read_topic, %kstream tail), not apps. "
                "An app needs one format per topic: a guess per record reads records written differently as "
                "the same key (b'abc' and b'\"abc\"' both as 'abc'), which Kafka put in different partitions, "
                "so they would land in different stores. Give the topic's serde: 'string', 'json', 'avro'..."
            )
