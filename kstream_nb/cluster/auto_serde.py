"""``AutoSerde`` (spec ``"auto"``): guesses each record's format, for exploring topics written by others."""

from __future__ import annotations

import io
import json
import math
import re
import struct
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kstream_nb.cluster.serdes import Serde, StringOrJsonSerde
from kstream_nb.errors import SerializationError, TopologyError

if TYPE_CHECKING:  # the registry modules are imported when a registry is bound (``configure``)
    from kstream_nb.cluster.registry_serdes import RegistrySerde

#: control characters that plain text does not contain (tab, newline and carriage return are allowed)
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
#: the magnitudes read as a double / float rather than a long / int (see ``AutoSerde``)
_DOUBLE_RANGE = (1e-9, 1e18)
_FLOAT_RANGE = (1e-6, 1e9)
#: most significant digits of a 4-byte float read as a float: what people type (``1.5``, ``98.6``, ``0.001``)
_FLOAT_DIGITS = 6
_PREVIEW_BYTES = 32
_TEXT = StringOrJsonSerde()
#: the format ``detect`` names for a registry's schema type
_FORMATS = {"AVRO": "avro", "PROTOBUF": "protobuf", "JSON": "jsonschema"}


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
    significant digits whose nearest single it is, when that decimal's magnitude is in ``_FLOAT_RANGE``."""
    (value,) = struct.unpack(">f", data)
    if not math.isfinite(value):
        return None
    for digits in range(1, _FLOAT_DIGITS + 1):
        decimal = float(f"{value:.{digits - 1}e}")
        if struct.pack(">f", decimal) == data:
            return decimal if _FLOAT_RANGE[0] <= abs(decimal) < _FLOAT_RANGE[1] else None
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
       magnitude in [1e-9, 1e18); else a long. Such doubles read as longs of magnitude over 4.3e18, beyond
       counters, ids and epoch timestamps in s/ms/µs/ns, which all stay longs.
    4. ``float`` / ``int`` (4 bytes, Java's Float/IntegerSerializer): a float when it is the nearest single
       of a decimal with at most 6 significant digits and a magnitude in [1e-6, 1e9) (returned as that
       decimal, as Java prints it); else an int. Such floats read as ints of magnitude over 831,000,000.
    5. ``bytes``: anything else, as ``RawBytes`` (shown as a ``0x…`` hex preview). Decoding never fails.

    Known ambiguities, read with an explicit serde instead: printable 4/8-byte numbers read as text (int
    1633837924 is ``"abcd"``); an 8-byte long from 2**32 to 2**56 (an epoch-ms timestamp...) whose bytes 1-4
    are a registered schema id reads as that schema when its 3 bytes decode with it (for Avro: exactly);
    Kafka Streams' windowed keys (key bytes + 8-byte timestamps, ambiguous by nature) are not detected (use
    ``"windowed:string"``...); 2-byte shorts and 1-byte booleans read as bytes.
    Auto is for reading: ``serialize`` refuses, and app sources refuse it (``refuse_auto_source``).
    """

    def __init__(self, decoders: Mapping[str, RegistrySerde] | None = None) -> None:
        # the registry's schema types (AVRO, PROTOBUF, JSON) -> their serdes, bound to it by ``configure``
        self._decoders = dict(decoders or {})
        first = next(iter(self._decoders.values()), None)
        self._registry: Any = None if first is None else first.registry
        self._types: dict[int, str | None] = {}  # schema id -> its type; None: the registry has no such id

    def configure(self, configs: Mapping[str, Any], is_key: bool) -> AutoSerde:
        """A copy bound to the registry of the app or call (the embedded one of a ``memory://`` cluster); with
        none, wire-format records read as bytes."""
        from kstream_nb.cluster.registry_serdes import AvroSerde, JsonSchemaSerde, ProtobufSerde, RegistrySerde
        from kstream_nb.cluster.schema_registry import SchemaRegistryError

        serdes: dict[str, RegistrySerde] = {
            "AVRO": AvroSerde(),
            "PROTOBUF": ProtobufSerde(),
            "JSON": JsonSchemaSerde(),
        }
        try:
            bound = {kind: serde.configure(configs, is_key) for kind, serde in serdes.items()}
        except SchemaRegistryError:
            return AutoSerde()
        return AutoSerde({kind: serde for kind, serde in bound.items() if isinstance(serde, RegistrySerde)})

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
        if len(raw) >= 5 and raw[0] == 0 and self._registry is not None:
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
        """The wire-format record decoded with its schema's serde; None when the registry does not know the
        id or the payload does not match the schema (an unreachable registry raises, naming its URL)."""
        from kstream_nb.cluster.schema_registry import SchemaRegistryError

        schema_id = int.from_bytes(raw[1:5], "big")
        kind = self._schema_type(schema_id)
        decoder = None if kind is None else self._decoders.get(kind)
        if kind is None or decoder is None:
            return None
        try:
            value = decoder.deserialize(topic, raw)
        except SchemaRegistryError as exc:
            if "cannot be reached" in str(exc):
                raise
            return None
        except SerializationError:
            return None
        if len(raw) == 8 and kind == "AVRO" and not self._avro_exact(schema_id, value, raw[5:]):
            return None  # bytes left over: a long whose bytes 1-4 happen to be a schema id
        return _FORMATS[kind], value

    def _schema_type(self, schema_id: int) -> str | None:
        """AVRO, PROTOBUF or JSON for a schema id the registry knows, else None (answers are kept)."""
        if schema_id in self._types:
            return self._types[schema_id]
        from confluent_kafka.schema_registry import SchemaRegistryError as RegistryAnswer

        from kstream_nb.cluster.schema_registry import SchemaRegistryError, registry_url

        url = registry_url(self._registry)
        try:
            kind: str | None = self._registry.get_schema(schema_id).schema_type or "AVRO"
        except RegistryAnswer as exc:
            if exc.http_status_code != 404:
                raise SchemaRegistryError(
                    f"auto serde: the Schema Registry at {url} answered {exc} for schema id {schema_id}", url
                ) from exc
            kind = None
        except Exception as exc:  # httpx's connection errors and timeouts
            raise SchemaRegistryError(
                f"auto serde: the Schema Registry at {url} cannot be reached to look up schema id {schema_id}: "
                f"{exc}",
                url,
            ) from exc
        self._types[schema_id] = kind
        return kind

    def _avro_exact(self, schema_id: int, value: Any, payload: bytes) -> bool:
        """Whether ``value`` written with its schema gives ``payload`` back: the record used all its bytes."""
        import fastavro

        schema = fastavro.parse_schema(json.loads(self._registry.get_schema(schema_id).schema_str))
        out = io.BytesIO()
        try:
            fastavro.schemaless_writer(out, schema, value)
        except (ValueError, TypeError, AttributeError):
            return False
        return out.getvalue() == payload

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
