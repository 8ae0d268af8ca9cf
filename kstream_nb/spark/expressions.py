"""Column expressions as Spark columns: a visitor over the expression tree (``kstream_nb.processor.expressions``).

The translation keeps the local null semantics: comparisons with null are False (``!=`` True), logical
operators treat null as False, ``//`` floors and ``%`` takes the divisor's sign as in Python, ``/`` by zero
gives inf or nan as numpy (Spark's ANSI mode would fail). Given the fields' Spark types (``dtype``), results
keep Python's types: ``int // int``, ``int % int`` and ``int ** non-negative int literal`` stay integers,
with a float operand they are floats (Spark's ``floor`` and ``pow`` answer bigint and double whatever the
operands). Integer ``//`` or ``%`` by zero fails the Spark job (live, numpy's float inf or nan).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from kstream_nb.processor.expressions.scalar import ARITH_OPS, CMP_OPS, isnull
from kstream_nb.processor.expressions.tree import BinOp, Call, Col, Expr, Lit, UnaryOp

__all__ = ["to_spark"]


def to_spark(
    expr: Expr,
    F: Any = None,
    column: Callable[[str], Any] | None = None,
    dtype: Callable[[str], str | None] | None = None,
) -> Any:
    """Translate to a ``pyspark.sql.Column``; ``F`` is the ``pyspark.sql.functions`` module (imported if
    not given); ``column(name)`` is a field's column (default ``F.col(name)``: fields as top-level columns);
    ``dtype(name)`` its Spark type ("bigint", "double", "string", "boolean"; None: unknown)."""
    if F is None:
        from pyspark.sql import functions as F
    return _translate(expr, _Fields(F, column or F.col, dtype or (lambda name: None)))


def result_type(expr: Expr, dtype: Callable[[str], str | None]) -> str | None:
    """The Spark type of ``expr``'s values as Python evaluates it, from its fields' types (None: unknown)."""
    if isinstance(expr, Col):
        return dtype(expr.name)
    if isinstance(expr, Lit):
        value = expr.value
        kinds = {bool: "boolean", int: "bigint", float: "double", str: "string"}
        return kinds.get(type(value))
    if isinstance(expr, UnaryOp):
        return "boolean" if expr.op == "~" else result_type(expr.operand, dtype)
    if isinstance(expr, BinOp):
        if expr.op not in ARITH_OPS:
            return "boolean"
        if expr.op == "/":
            return "double"
        a, b = result_type(expr.left, dtype), result_type(expr.right, dtype)
        if "double" in (a, b):
            return "double"
        if a == b == "bigint":
            right = expr.right
            if expr.op == "**" and not (isinstance(right, Lit) and right.value >= 0):
                return "double"
            return "bigint"
        return None
    if isinstance(expr, Call):
        fn = expr.fn
        if fn in ("isnull", "notnull", "isin", "str.contains", "str.startswith", "str.endswith"):
            return "boolean"
        if fn in ("str.lower", "str.upper", "str.strip"):
            return "string"
        if fn == "str.len":
            return "bigint"
        if fn == "astype":
            return _CASTS[expr.params[0]]
        # round keeps its operand's type; fillna(c, other) and where(c, cond, other) take c's or other's
        values = expr.args[:1] if fn == "round" else (expr.args[0], expr.args[-1])
        types = {result_type(v, dtype) for v in values}
        return types.pop() if len(types) == 1 else None  # an int here, a float there: as the row decides
    return None


class _Fields(NamedTuple):
    """The functions module, where a field's column comes from and its type, passed down the tree."""

    F: Any
    column: Callable[[str], Any]
    dtype: Callable[[str], str | None]


def _translate(expr: Expr, t: _Fields) -> Any:
    translate = _NODES.get(type(expr))
    if translate is None:
        raise NotImplementedError(f"no Spark translation of {type(expr).__name__}")
    return translate(expr, t)


def _truth(F: Any, c: Any) -> Any:
    return F.coalesce(c, F.lit(False))


def _col(expr: Col, t: _Fields) -> Any:
    return t.column(expr.name)


def _lit(expr: Lit, t: _Fields) -> Any:
    return t.F.lit(expr.value)


def _binop(expr: BinOp, t: _Fields) -> Any:
    F = t.F
    a, b, op = _translate(expr.left, t), _translate(expr.right, t), expr.op
    if op in ("&", "|", "^"):
        a, b = _truth(F, a), _truth(F, b)
        return a & b if op == "&" else a | b if op == "|" else a != b
    if op in CMP_OPS:
        return F.coalesce(CMP_OPS[op](a, b), F.lit(op == "!="))
    kind = result_type(expr, t.dtype)
    if op == "/":
        return _divide(F, a, b)
    if op == "//":
        return F.floor(_divide(F, a, b)).cast("double") if kind == "double" else F.floor(a / b)
    if op == "%":
        m = a % b
        m = F.when((m != 0) & ((m < 0) != (b < 0)), m + b).otherwise(m)
        return F.when(b == 0, F.lit(float("nan"))).otherwise(m) if kind == "double" else m
    if op == "**":
        return F.pow(a, b).cast("long") if kind == "bigint" else F.pow(a, b)
    return ARITH_OPS[op](a, b)


def _divide(F: Any, a: Any, b: Any) -> Any:
    """``a / b`` as a double, by zero as numpy: inf with the dividend's sign, nan for 0 / 0."""
    inf = float("inf")
    by_zero = F.when(a > 0, F.lit(inf)).when(a < 0, F.lit(-inf)).otherwise(F.lit(float("nan")))
    return F.when(b == 0, F.when(a.isNull(), F.lit(None).cast("double")).otherwise(by_zero)).otherwise(a / b)


def _unary(expr: UnaryOp, t: _Fields) -> Any:
    F = t.F
    x = _translate(expr.operand, t)
    if expr.op == "~":
        return ~_truth(F, x)
    return -x if expr.op == "-" else F.abs(x)


def _call(expr: Call, t: _Fields) -> Any:
    return _FUNCS[expr.fn](t.F, expr.params, *(_translate(a, t) for a in expr.args))


def _isin(F: Any, params: tuple[Any, ...], c: Any) -> Any:
    items = [v for v in params[0] if not isnull(v)]
    result = F.coalesce(c.isin(items), F.lit(False)) if items else F.lit(False)
    return result | c.isNull() if len(items) < len(params[0]) else result


_CASTS = {"int": "long", "float": "double", "str": "string", "bool": "boolean"}

# each function of kstream_nb.processor.expressions.functions: (F, params, *columns) -> column
_FUNCS: dict[str, Callable[..., Any]] = {
    "isnull": lambda F, params, c: c.isNull(),
    "notnull": lambda F, params, c: c.isNotNull(),
    "isin": _isin,
    "fillna": lambda F, params, c, other: F.coalesce(c, other),
    "where": lambda F, params, c, cond, other: F.when(_truth(F, cond), c).otherwise(other),
    "round": lambda F, params, c: F.bround(c, params[0]),
    "astype": lambda F, params, c: c.cast(_CASTS[params[0]]),
    "str.lower": lambda F, params, c: F.lower(c),
    "str.upper": lambda F, params, c: F.upper(c),
    "str.strip": lambda F, params, c: F.trim(c),
    "str.len": lambda F, params, c: F.length(c),
    "str.contains": lambda F, params, c: F.coalesce(c.contains(params[0]), F.lit(False)),
    "str.startswith": lambda F, params, c: F.coalesce(c.startswith(params[0]), F.lit(False)),
    "str.endswith": lambda F, params, c: F.coalesce(c.endswith(params[0]), F.lit(False)),
}

_NODES: dict[type, Callable[[Any, Any], Any]] = {
    Col: _col,
    Lit: _lit,
    BinOp: _binop,
    UnaryOp: _unary,
    Call: _call,
}
