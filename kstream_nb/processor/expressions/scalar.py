"""Null semantics and operators on one value: what an expression does to a single record's fields.

A missing field, None and NaN are null; arithmetic with null is null; comparisons with null are False,
except ``!=`` which is True; logical operators treat null as False.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = [
    "ARITH_OPS",
    "BINARY_OPS",
    "CMP_OPS",
    "UNARY_OPS",
    "RecordFn",
    "isnull",
    "not_a_dict",
    "truthy",
]

RecordFn = Callable[[Any], Any]


def isnull(x: Any) -> bool:
    """True for None and NaN."""
    return x is None or (isinstance(x, float) and x != x)


def truthy(x: Any) -> bool:
    """Python truth, with null False."""
    return not isnull(x) and bool(x)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def not_a_dict(what: str, value: Any) -> TypeError:
    """The error for a record value that is not a dict."""
    return TypeError(
        f"{what} needs a dict (JSON object) record value, got {type(value).__name__}: {_short(value)}"
    )


def _zero_div(fn: Callable[[Any, Any], Any], a: Any, b: Any) -> Any:
    with np.errstate(all="ignore"):
        return float(fn(np.float64(a), np.float64(b)))


def _arith(fn: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    def scalar(a: Any, b: Any) -> Any:
        if a is None or b is None or isnull(a) or isnull(b):
            return None
        try:
            return fn(a, b)
        except ZeroDivisionError:
            return _zero_div(fn, a, b)

    return scalar


def _pow(a: Any, b: Any) -> Any:
    if isnull(a) or isnull(b):
        return None
    try:
        result = a**b
    except (ZeroDivisionError, OverflowError):  # 0 ** -1, 10.0 ** 400: inf as numpy gives in a batch
        return _zero_div(operator.pow, a, b)
    return float("nan") if isinstance(result, complex) else result


def _compare(fn: Callable[[Any, Any], Any], if_null: bool) -> Callable[[Any, Any], Any]:
    def scalar(a: Any, b: Any) -> Any:
        if a is None or b is None or isnull(a) or isnull(b):
            return if_null
        return fn(a, b)

    return scalar


ARITH_OPS: dict[str, Callable[[Any, Any], Any]] = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": operator.truediv,
    "//": operator.floordiv,
    "%": operator.mod,
    "**": operator.pow,
}
CMP_OPS: dict[str, Callable[[Any, Any], Any]] = {
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}
# every binary operator on two values, with the null semantics above
BINARY_OPS: dict[str, Callable[[Any, Any], Any]] = {
    **{op: _arith(fn) for op, fn in ARITH_OPS.items() if op != "**"},
    "**": _pow,
    **{op: _compare(fn, op == "!=") for op, fn in CMP_OPS.items()},
    "&": lambda a, b: truthy(a) & truthy(b),
    "|": lambda a, b: truthy(a) | truthy(b),
    "^": lambda a, b: truthy(a) ^ truthy(b),
}
UNARY_OPS: dict[str, Callable[[Any], Any]] = {
    "-": lambda x: None if isnull(x) else -x,
    "abs": lambda x: None if isnull(x) else abs(x),
    "~": lambda x: not truthy(x),
}
