"""Column expressions translated to Spark columns (``kstream_nb.spark.expressions``) give, on real Spark, what
the runtime's record-by-record evaluation gives on the same values: nulls, missing fields, integer and float
arithmetic, Python's floor division and modulo, string functions, ``isin``/``fillna``/``where``/``astype``."""

from __future__ import annotations

import math
from typing import Any

import pytest

from kstream_nb.processor.expressions.tree import Expr, col, lit
from kstream_nb.spark.expressions import to_spark

SCHEMA = "i bigint, j bigint, f double, s string"
TYPES = {"i": "bigint", "j": "bigint", "f": "double", "s": "string"}
ROWS: list[dict[str, Any]] = [
    {"i": 7, "j": 2, "f": 1.5, "s": "Apple"},
    {"i": -7, "j": 2, "f": -2.25, "s": "banana"},
    {"i": 7, "j": -2, "f": 0.0, "s": ""},
    {"i": None, "j": 3, "f": None, "s": None},
    {"i": 0, "j": -5, "f": 2.675, "s": "  Cherry "},
    {"j": 4, "s": "apple pie"},
    {"i": 12, "j": 5, "f": 9.99, "s": "KIWI"},
]

i, j, f, s = col("i"), col("j"), col("f"), col("s")
EXPRESSIONS: dict[str, Expr] = {
    "add": i + j,
    "sub_lit": i - 3,
    "mul_float": i * f,
    "truediv": i / j,
    "floordiv": i // j,
    "floordiv_float": f // j,
    "mod": i % j,
    "mod_float": f % j,
    "div_zero_float": f / 0.0,
    "neg_abs": abs(-i),
    "pow": j**2,
    "pow_negative": j**-1,
    "pow_float": f**2,
    "gt": i > j,
    "eq_null": i == j,
    "ne_null": i != 7,
    "le_float": f <= 1.5,
    "and_or": ((i > 0) & (f > 0)) | (s == "KIWI"),
    "xor": (i > 0) ^ (j > 0),
    "not": ~(i > 0),
    "isnull": i.isnull(),
    "notnull": f.notnull(),
    "isin": i.isin([7, 12, None]),
    "isin_no_null": s.isin(["Apple", "KIWI"]),
    "fillna": i.fillna(-1),
    "where": f.where(f > 0, lit(0.0)),
    "round": f.round(1),
    "astype_int": f.astype(int),
    "astype_str": i.astype(str),
    "lower": s.str.lower(),
    "upper": s.str.upper(),
    "strip": s.str.strip(),
    "len": s.str.len(),
    "contains": s.str.contains("an"),
    "startswith": s.str.startswith("app"),
    "endswith": s.str.endswith("E"),
}


@pytest.fixture(scope="module")
def frame(spark: Any) -> Any:
    rows = [tuple(r.get(c) for c in ("i", "j", "f", "s")) for r in ROWS]
    return spark.createDataFrame(rows, SCHEMA)


def test_every_expression_gives_the_runtimes_values(frame: Any) -> None:
    """One Spark job for all expressions: each column equals ``eval_record`` on every row."""
    got = frame.select(*(to_spark(e, dtype=TYPES.get).alias(name) for name, e in EXPRESSIONS.items())).collect()
    for name, expr in EXPRESSIONS.items():
        expected = [expr.eval_record(r) for r in ROWS]
        actual = [row[name] for row in got]
        assert [_plain(x) for x in actual] == [_plain(x) for x in expected], name


def test_fields_from_a_struct_column(frame: Any) -> None:
    """``column`` picks where a field comes from (the compiled backtest reads fields of the parsed value)."""
    from pyspark.sql import functions as F

    nested = frame.select(F.struct("i", "j", "f", "s").alias("v"))
    expr = (col("i") * 2 + col("j")).where(col("s").notnull(), lit(-1))
    got = [r[0] for r in nested.select(to_spark(expr, F, lambda name: F.col("v")[name])).collect()]
    assert got == [expr.eval_record(r) for r in ROWS]


def _plain(x: Any) -> Any:
    """Numbers compared by value and by type (an int and a float are written differently as JSON)."""
    if isinstance(x, float) and math.isnan(x):
        return "nan"
    if isinstance(x, bool) or x is None or isinstance(x, str):
        return x
    return (type(x).__name__, round(x, 12))
