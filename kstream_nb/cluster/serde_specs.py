"""Serde specs: what a ``key_serde=`` / ``value_serde=`` argument may be, resolved to a ``Serde``."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kstream_nb.cluster.auto_serde import AutoSerde
from kstream_nb.cluster.registry_serdes import AvroSerde, JsonSchemaSerde, ProtobufSerde
from kstream_nb.cluster.serdes import (
    BytesSerde,
    DoubleSerde,
    FloatSerde,
    FunctionSerde,
    IntegerSerde,
    JsonSerde,
    LongSerde,
    Serde,
    ShortSerde,
    StringOrJsonSerde,
    StringSerde,
)
from kstream_nb.cluster.windowed_serdes import (
    WRAPPER_SPECS,
    SessionWindowedSerde,
    TimeWindowedSerde,
    ValueAndTimestampSerde,
    wrapper_from_spec,
)
from kstream_nb.durations import Duration

_BY_NAME: dict[str, type[Serde]] = {
    "json": JsonSerde,
    "string_or_json": StringOrJsonSerde,
    "string": StringSerde,
    "str": StringSerde,
    "bytes": BytesSerde,
    "short": ShortSerde,
    "int": IntegerSerde,
    "integer": IntegerSerde,
    "long": LongSerde,
    "float": FloatSerde,
    "double": DoubleSerde,
    "auto": AutoSerde,
    # Schema Registry formats: by name they read any record (its schema id is looked up); writing needs the
    # writer's schema: Serdes.avro(schema), Serdes.protobuf(message_class), Serdes.json_schema(schema)
    "avro": AvroSerde,
    "protobuf": ProtobufSerde,
    "jsonschema": JsonSchemaSerde,
}

SerdeSpec = Serde | type[Serde] | str


def serde_from(spec: SerdeSpec) -> Serde:
    """Resolves a Serde instance, a Serde class, or a name like ``"json"``/``"long"`` to a Serde."""
    if isinstance(spec, Serde):
        return spec
    if isinstance(spec, type) and issubclass(spec, Serde) and spec is not FunctionSerde:
        return spec()
    if isinstance(spec, str) and spec.strip().lower() in _BY_NAME:
        return _BY_NAME[spec.strip().lower()]()
    wrapped = wrapper_from_spec(spec, serde_from) if isinstance(spec, str) else None
    if wrapped is not None:
        return wrapped
    raise ValueError(
        f"unknown serde {spec!r}: use a Serde instance or class, Serde.of(ser, deser), or one of "
        + ", ".join(repr(name) for name in _BY_NAME)
        + "; Kafka Streams' formats around one of those: "
        + ", ".join(f"'{w}:<serde>'" for w in WRAPPER_SPECS)
    )


class Serdes:
    """Factory of the built-in serdes, mirroring Java's ``Serdes`` (``Serdes.long()``, ...)."""

    @staticmethod
    def json() -> Serde:
        return JsonSerde()

    @staticmethod
    def string() -> Serde:
        return StringSerde()

    @staticmethod
    def string_or_json() -> Serde:
        return StringOrJsonSerde()

    @staticmethod
    def bytes() -> Serde:
        return BytesSerde()

    @staticmethod
    def byte_array() -> Serde:
        return BytesSerde()

    @staticmethod
    def short() -> Serde:
        return ShortSerde()

    @staticmethod
    def integer() -> Serde:
        return IntegerSerde()

    @staticmethod
    def long() -> Serde:
        return LongSerde()

    @staticmethod
    def float() -> Serde:
        return FloatSerde()

    @staticmethod
    def double() -> Serde:
        return DoubleSerde()

    @staticmethod
    def auto() -> Serde:
        """Guesses each record's format, for reading only (``AutoSerde``)."""
        return AutoSerde()

    @staticmethod
    def avro(
        schema: str | Mapping[str, Any] | None = None, subject_name_strategy: str = "topic", **options: Any
    ) -> Serde:
        """Avro with Schema Registry: ``schema`` is the writer's (options: ``reader_schema``, ...)."""
        return AvroSerde(schema, subject_name_strategy, **options)

    @staticmethod
    def protobuf(
        message_class: type[Any] | None = None, subject_name_strategy: str = "topic", **options: Any
    ) -> Serde:
        """Protobuf with Schema Registry: ``message_class`` is the writer's (options: ``as_messages``, ...)."""
        return ProtobufSerde(message_class, subject_name_strategy, **options)

    @staticmethod
    def json_schema(
        schema: str | Mapping[str, Any] | None = None, subject_name_strategy: str = "topic", **options: Any
    ) -> Serde:
        """JSON Schema with Schema Registry: ``schema`` is the writer's."""
        return JsonSchemaSerde(schema, subject_name_strategy, **options)

    @staticmethod
    def time_windowed(inner: SerdeSpec, window_size: Duration | None = None) -> TimeWindowedSerde:
        """Kafka's ``WindowedSerdes.timeWindowedSerdeFrom(inner, size)``: ``Windowed`` keys as the key's bytes plus
        the 8-byte window start (spec ``"windowed(10s):string"``). Reading gives ``end = start + window_size``;
        without a size the end is unknown and reads as 2**63 - 1 (Java's Long.MAX_VALUE): ``"windowed:string"``.
        ``.for_changelog()`` reads a window store changelog's keys (spec ``"windowed-changelog(10s):string"``)."""
        return TimeWindowedSerde(serde_from(inner), window_size)

    @staticmethod
    def session_windowed(inner: SerdeSpec) -> SessionWindowedSerde:
        """Kafka's ``WindowedSerdes.sessionWindowedSerdeFrom(inner)``: ``Windowed`` keys as the key's bytes, the
        8-byte session end, then the start (spec ``"session-windowed:string"``; also session changelog keys)."""
        return SessionWindowedSerde(serde_from(inner))

    @staticmethod
    def value_and_timestamp(inner: SerdeSpec) -> ValueAndTimestampSerde:
        """Kafka's ``ValueAndTimestampSerde``: a ``ValueAndTimestamp`` as the 8-byte timestamp, then the value's
        bytes (spec ``"timestamped:json"``): the values of Kafka Streams' timestamped stores. Their changelog
        topics carry the plain value (the timestamp is the record's): read those with the plain serde."""
        return ValueAndTimestampSerde(serde_from(inner))

    @staticmethod
    def of(serialize: Callable[[Any], Any], deserialize: Callable[[Any], Any]) -> Serde:
        return FunctionSerde(serialize, deserialize)
