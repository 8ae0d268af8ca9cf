"""Serde specs: what a ``key_serde=`` / ``value_serde=`` argument may be, resolved to a ``Serde``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kstream_nb.cluster.auto_serde import AutoSerde
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
    raise ValueError(
        f"unknown serde {spec!r}: use a Serde instance or class, Serde.of(ser, deser), or one of "
        + ", ".join(repr(name) for name in _BY_NAME)
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
    def of(serialize: Callable[[Any], Any], deserialize: Callable[[Any], Any]) -> Serde:
        return FunctionSerde(serialize, deserialize)
