"""JSON values as Spark structs with the types the runtime's ``orjson.loads`` gives their fields.

One pass over the stage's values finds each read field's JSON type (``schema_of_variant`` of the value
parsed as a variant): integers read as ``bigint``, numbers with a fraction or exponent as ``double``, strings,
booleans. The stage then reads the fields with those types from the values parsed once more.
Data the compiled path cannot read as the runtime does takes the replay path, naming the field and the
reason: invalid JSON (the deserialization handler decides live), non-object values, a field that mixes
types (ints and floats keep their own type in Python), nested objects or lists, integers beyond 64 bits.
(The parsed variant keeps a number's digits: ``10.0`` is DECIMAL(2,0), ``10`` BIGINT.)
"""

from __future__ import annotations

from typing import Any

from kstream_nb.spark.compiled.planner import NotCompilable

_INTEGERS = {"TINYINT", "SMALLINT", "INT", "BIGINT"}


def with_parsed(frame: Any) -> Any:
    """``frame`` with ``_pv``: its JSON values parsed as variants, for ``value_schema`` to read (null for a
    null or invalid value); worth it when the frame is read again (checkpointed) for other reasons."""
    from pyspark.sql import functions as F

    return frame.withColumn("_pv", F.try_parse_json(F.col("value").cast("string")))


def value_schema(frame: Any, fields: set[str]) -> dict[str, str]:
    """Spark type per field of the values of ``frame`` (``value``: binary JSON; ``_pv``, if there, the values
    parsed by ``with_parsed``); fields never set (always missing or null) read as ``string`` nulls."""
    from pyspark.sql import functions as F

    parsed = F.col("_pv") if "_pv" in frame.columns else F.try_parse_json(F.col("value").cast("string"))
    checks = [
        F.sum(F.when(F.col("value").isNotNull() & parsed.isNull(), 1).otherwise(0)).alias("_invalid"),
        F.sum(
            F.when(parsed.isNotNull() & ~F.schema_of_variant(parsed).startswith("OBJECT"), 1).otherwise(0)
        ).alias("_not_object"),
    ]
    names = sorted(fields)
    for i, name in enumerate(names):
        checks.append(
            F.collect_set(F.schema_of_variant(F.try_variant_get(parsed, _path(name), "variant"))).alias(f"_f{i}")
        )
    row = frame.agg(*checks).collect()[0]
    if row["_invalid"]:
        raise NotCompilable(f"{row['_invalid']} value(s) are not valid JSON (the deserialization handler decides)")
    if row["_not_object"]:
        raise NotCompilable(f"{row['_not_object']} value(s) are not JSON objects")
    return {name: _spark_type(name, set(row[f"_f{i}"]) - {"VOID"}) for i, name in enumerate(names)}


def _spark_type(name: str, kinds: set[str]) -> str:
    mapped = set()
    for kind in kinds:
        if kind in _INTEGERS:
            mapped.add("bigint")
        elif kind in ("DOUBLE", "FLOAT") or (kind.startswith("DECIMAL(") and _fraction_or_small(kind)):
            mapped.add("double")
        elif kind in ("STRING", "BOOLEAN"):
            mapped.add(kind.lower())
        else:
            raise NotCompilable(f"field {name!r} holds {kind} values (not compiled)")
    if len(mapped) > 1:
        raise NotCompilable(f"field {name!r} mixes {sorted(mapped)} values (each keeps its type live)")
    return mapped.pop() if mapped else "string"


def _fraction_or_small(decimal: str) -> bool:
    """Whether a variant DECIMAL(p,s) is a JSON number with a fraction: a scale, or (``10.0`` parses as
    DECIMAL(2,0)) fewer than 19 digits, since an integer token that fits 64 bits parses as an integer type."""
    precision, scale = (int(x) for x in decimal[len("DECIMAL(") : -1].split(","))
    return scale > 0 or precision < 19


def _path(name: str) -> str:
    return "$['" + name.replace("\\", "\\\\").replace("'", "\\'") + "']"


def parse_values(frame: Any, schema: dict[str, str]) -> Any:
    """``frame`` with ``v``: the value as a struct of the read fields (null for a null value), read from the
    values parsed as variants (``_pv``, added if not there): faster in Spark than ``from_json``."""
    from pyspark.sql import functions as F

    if not schema:
        return frame.withColumn("v", F.lit(None).cast("struct<_none:string>"))
    if "_pv" not in frame.columns:
        frame = with_parsed(frame)
    fields = [F.variant_get(F.col("_pv"), _path(name), kind).alias(name) for name, kind in schema.items()]
    return frame.withColumn("v", F.when(F.col("_pv").isNotNull(), F.struct(*fields)))
