"""``select_key``/``group_by`` by a column expression (``KStreamExprSelectKey``) as Spark columns.

The new key is the expression over the value as the stateless steps left it, with the expression
translation the filters use; a null value reads as all fields null (live, the expression runs on ``None``;
``assign`` leaves a null value null). It is kept typed in ``_newkey``, so that a repartition's null-key drop
sees it and the sink writes it with its own key serde (a ``str`` as UTF-8 with ``string_or_json``, other
keys as JSON: a Python int and float differ there, hence an expression whose type depends on the record is
not compiled), with the partition murmur2 of those bytes.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from kstream_nb.cluster.serdes import Serde
from kstream_nb.spark.compiled.codec import KEY_TYPE, recode_keys, scalar_udf, written_keys
from kstream_nb.spark.compiled.planner import STATELESS, DropNullKeys, NotCompilable, SelectKey, Step
from kstream_nb.spark.compiled.stateless import ValueFields, apply_stateless
from kstream_nb.spark.expressions import result_type, to_spark

NEW_KEY = "_newkey"


def apply_steps(frame: Any, steps: list[Step], fields: ValueFields) -> Any:
    """``frame`` through a branch's stateless steps in order, a ``select_key`` setting ``_newkey`` (and the
    null-key drops after it reading that)."""
    from pyspark.sql import functions as F

    rekeyed = False
    run: list[Step] = []
    for step in steps:
        if not isinstance(step, STATELESS):
            continue
        if isinstance(step, SelectKey) or (rekeyed and isinstance(step, DropNullKeys)):
            frame = apply_stateless(frame, run, fields)
            run = []
            if isinstance(step, SelectKey):
                frame = frame.withColumn(NEW_KEY, key_column(step, fields))
                rekeyed = True
            else:
                frame = frame.where(F.col(NEW_KEY).isNotNull())
        else:
            run.append(step)
    return apply_stateless(frame, run, fields)


def key_column(step: SelectKey, fields: ValueFields) -> Any:
    """The new key as a typed Spark column; a null value evaluates the expression with every field null."""
    F = fields.F
    kind = result_type(step.expr, fields.dtype)
    if kind is None:
        raise NotCompilable(
            f"node {step.node!r}: select_key by {step.expr!r}: the type of its keys depends on the record"
        )

    def null_field(name: str) -> Any:
        return F.lit(None).cast(fields.dtype(name) or "string")

    on_null = to_spark(step.expr, F, null_field, fields.dtype)
    on_value = to_spark(step.expr, F, fields.column, fields.dtype)
    return F.when(F.col("value").isNull(), on_null).otherwise(on_value).cast(kind)


def sink_keys(
    frame: Any, decode: Serde, encode: Serde, topics: tuple[str, str], partitions: int, text: bool
) -> Any:
    """The sink's ``k`` column (``codec.KEY_TYPE``): a re-keyed branch's ``_newkey`` written by ``encode``,
    else the record's key bytes rewritten (``codec.recode_keys``)."""
    from pyspark.sql import functions as F

    if NEW_KEY in frame.columns:
        return encode_keys(encode, topics[1], partitions, text)(F.col(NEW_KEY))
    return recode_keys(decode, encode, topics, partitions, text)(F.col("key"))


def encode_keys(encode: Serde, topic: str, partitions: int, text: bool) -> Any:
    """A UDF of typed keys -> (the bytes ``encode`` writes, murmur2's partition among ``partitions`` (null for a
    null key: round robin, decided in Spark), the key as JSON text), once per distinct key of a batch."""

    def run(keys: pa.Array) -> pa.Array:
        return written_keys(keys, lambda key: key, encode, topic, partitions, text)

    return scalar_udf(run, KEY_TYPE)
