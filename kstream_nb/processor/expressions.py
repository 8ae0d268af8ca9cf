"""Column expressions over dict (JSON object) values, pandas style.

An expression is data: an immutable tree of ``Expr`` nodes built with ``col()``, ``lit()``, operators and
a few methods. The same tree evaluates a whole batch at a time on a DataFrame whose columns are the value
fields (``eval_batch``), record by record on one dict (``eval_record``, compiled once into closures), or
as a Spark column (``to_spark``). Both local modes give the same results.

Null semantics follow pandas: a missing field is null; arithmetic with null is null; comparisons with
null are False, except ``!=`` which is True (it is the negation of ``==``); ``&``, ``|``, ``^`` and ``~``
are logical and treat null as False.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, fields
from typing import Any

import numpy as np
import pandas as pd

__all__ = [
    "BinOp",
    "Call",
    "Col",
    "Expr",
    "Lit",
    "StrAccessor",
    "UnaryOp",
    "as_expr",
    "assign_batch",
    "assign_record",
    "col",
    "compile_predicate",
    "evaluate_predicate_batch",
    "lit",
    "project_batch",
    "project_record",
]

RecordFn = Callable[[Any], Any]


def _isnull(x: Any) -> bool:
    return x is None or (isinstance(x, float) and x != x)


def _truthy(x: Any) -> bool:
    return not _isnull(x) and bool(x)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _not_a_dict(what: str, value: Any) -> TypeError:
    return TypeError(
        f"{what} needs a dict (JSON object) record value, got {type(value).__name__}: {_short(value)}"
    )


class Expr:
    """A column expression over dict values; build with ``col``, ``lit``, operators and methods."""

    __slots__ = ("_record_fn",)

    def _batch(self, df: pd.DataFrame) -> Any:
        raise NotImplementedError

    def _compile(self) -> RecordFn:
        raise NotImplementedError

    def to_spark(self, F: Any) -> Any:
        """Translate to a ``pyspark.sql.Column``; ``F`` is the ``pyspark.sql.functions`` module."""
        raise NotImplementedError

    def eval_batch(self, df: pd.DataFrame) -> pd.Series:
        """Evaluate on a batch whose columns are the value fields; returns a Series aligned to ``df``."""
        result = self._batch(df)
        return result if isinstance(result, pd.Series) else _broadcast(result, df.index)

    def compile_record(self) -> RecordFn:
        """Compile once into a function of one dict value (cached on the expression)."""
        fn: RecordFn | None = getattr(self, "_record_fn", None)
        if fn is None:
            fn = self._compile()
            object.__setattr__(self, "_record_fn", fn)
        return fn

    def eval_record(self, value: Mapping[str, Any] | None) -> Any:
        """Evaluate on one dict value (``None`` reads as all fields null)."""
        return self.compile_record()(value)

    def _children(self) -> Iterator[Expr]:
        for f in fields(self):  # type: ignore[arg-type]
            v = getattr(self, f.name)
            if isinstance(v, Expr):
                yield v
            elif isinstance(v, tuple):
                yield from (x for x in v if isinstance(x, Expr))

    def columns(self) -> set[str]:
        """Names of the fields this expression reads."""
        return set().union(*(c.columns() for c in self._children()))

    def same_as(self, other: object) -> bool:
        """Structural equality (``==`` builds an expression instead)."""
        if type(self) is not type(other):
            return False
        return all(
            _same_value(getattr(self, f.name), getattr(other, f.name))
            for f in fields(self)  # type: ignore[arg-type]
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), tuple(getattr(self, f.name) for f in fields(self)))  # type: ignore[arg-type]

    def __bool__(self) -> bool:
        raise TypeError(
            f"the truth value of the expression {self!r} is ambiguous: use & | ~ instead of and/or/not, "
            "and parenthesise comparisons, e.g. (col('a') > 1) & (col('b') < 2)"
        )

    __hash__ = None  # type: ignore[assignment]

    def __add__(self, other: Any) -> BinOp:
        return BinOp("+", self, as_expr(other))

    def __radd__(self, other: Any) -> BinOp:
        return BinOp("+", as_expr(other), self)

    def __sub__(self, other: Any) -> BinOp:
        return BinOp("-", self, as_expr(other))

    def __rsub__(self, other: Any) -> BinOp:
        return BinOp("-", as_expr(other), self)

    def __mul__(self, other: Any) -> BinOp:
        return BinOp("*", self, as_expr(other))

    def __rmul__(self, other: Any) -> BinOp:
        return BinOp("*", as_expr(other), self)

    def __truediv__(self, other: Any) -> BinOp:
        return BinOp("/", self, as_expr(other))

    def __rtruediv__(self, other: Any) -> BinOp:
        return BinOp("/", as_expr(other), self)

    def __floordiv__(self, other: Any) -> BinOp:
        return BinOp("//", self, as_expr(other))

    def __rfloordiv__(self, other: Any) -> BinOp:
        return BinOp("//", as_expr(other), self)

    def __mod__(self, other: Any) -> BinOp:
        return BinOp("%", self, as_expr(other))

    def __rmod__(self, other: Any) -> BinOp:
        return BinOp("%", as_expr(other), self)

    def __pow__(self, other: Any) -> BinOp:
        return BinOp("**", self, as_expr(other))

    def __rpow__(self, other: Any) -> BinOp:
        return BinOp("**", as_expr(other), self)

    def __eq__(self, other: Any) -> BinOp:  # type: ignore[override]
        return BinOp("==", self, as_expr(other))

    def __ne__(self, other: Any) -> BinOp:  # type: ignore[override]
        return BinOp("!=", self, as_expr(other))

    def __lt__(self, other: Any) -> BinOp:
        return BinOp("<", self, as_expr(other))

    def __le__(self, other: Any) -> BinOp:
        return BinOp("<=", self, as_expr(other))

    def __gt__(self, other: Any) -> BinOp:
        return BinOp(">", self, as_expr(other))

    def __ge__(self, other: Any) -> BinOp:
        return BinOp(">=", self, as_expr(other))

    def __and__(self, other: Any) -> BinOp:
        return BinOp("&", self, as_expr(other))

    def __rand__(self, other: Any) -> BinOp:
        return BinOp("&", as_expr(other), self)

    def __or__(self, other: Any) -> BinOp:
        return BinOp("|", self, as_expr(other))

    def __ror__(self, other: Any) -> BinOp:
        return BinOp("|", as_expr(other), self)

    def __xor__(self, other: Any) -> BinOp:
        return BinOp("^", self, as_expr(other))

    def __rxor__(self, other: Any) -> BinOp:
        return BinOp("^", as_expr(other), self)

    def __neg__(self) -> UnaryOp:
        return UnaryOp("-", self)

    def __invert__(self) -> UnaryOp:
        return UnaryOp("~", self)

    def __abs__(self) -> UnaryOp:
        return UnaryOp("abs", self)

    def abs(self) -> UnaryOp:
        """Absolute value."""
        return UnaryOp("abs", self)

    def isin(self, values: Iterable[Any]) -> Call:
        """True where the value is one of ``values`` (null matches only if ``values`` holds a null)."""
        if isinstance(values, (str, bytes, Expr, Mapping)) or not isinstance(values, Iterable):
            raise TypeError(f"isin() needs a list-like of values, got {type(values).__name__}")
        return Call("isin", (self,), (tuple(values),))

    def isnull(self) -> Call:
        """True where the value is null (missing, None or NaN)."""
        return Call("isnull", (self,))

    def notnull(self) -> Call:
        """True where the value is not null."""
        return Call("notnull", (self,))

    isna = isnull
    notna = notnull

    def fillna(self, value: Any) -> Call:
        """Replace nulls by ``value`` (a scalar or an expression)."""
        return Call("fillna", (self, as_expr(value)))

    def where(self, cond: Any, other: Any = None) -> Call:
        """Keep the value where ``cond`` is true, else ``other`` (null by default)."""
        return Call("where", (self, as_expr(cond), as_expr(other)))

    def between(self, left: Any, right: Any, inclusive: str = "both") -> BinOp:
        """``left <= value <= right``; ``inclusive`` is "both", "neither", "left" or "right"."""
        if inclusive not in ("both", "neither", "left", "right"):
            raise ValueError(f"inclusive must be 'both', 'neither', 'left' or 'right', got {inclusive!r}")
        lo = self >= left if inclusive in ("both", "left") else self > left
        hi = self <= right if inclusive in ("both", "right") else self < right
        return lo & hi

    def round(self, decimals: int = 0) -> Call:
        """Round half to even to ``decimals`` places (numpy rounding, in both modes)."""
        return Call("round", (self,), (int(decimals),))

    def __round__(self, ndigits: int | None = None) -> Call:
        return self.round(ndigits or 0)

    def astype(self, dtype: type | str) -> Call:
        """Cast to ``int`` (truncates), ``float``, ``str`` or ``bool``; nulls stay null."""
        name = dtype if isinstance(dtype, str) else getattr(dtype, "__name__", "")
        if name not in _CASTS:
            raise TypeError(f"astype() supports int, float, str and bool, got {dtype!r}")
        return Call("astype", (self,), (name,))

    @property
    def str(self) -> StrAccessor:
        """String methods: lower, upper, strip, len, contains, startswith, endswith."""
        return StrAccessor(self)


class StrAccessor:
    """String methods of an expression; non-string values give null (or False for tests)."""

    __slots__ = ("_expr",)

    def __init__(self, expr: Expr) -> None:
        self._expr = expr

    def lower(self) -> Call:
        return Call("str.lower", (self._expr,))

    def upper(self) -> Call:
        return Call("str.upper", (self._expr,))

    def strip(self) -> Call:
        return Call("str.strip", (self._expr,))

    def len(self) -> Call:
        return Call("str.len", (self._expr,))

    def contains(self, sub: str) -> Call:
        """Plain substring test (not a regex)."""
        return Call("str.contains", (self._expr,), (str(sub),))

    def startswith(self, prefix: str) -> Call:
        return Call("str.startswith", (self._expr,), (str(prefix),))

    def endswith(self, suffix: str) -> Call:
        return Call("str.endswith", (self._expr,), (str(suffix),))


def _same_value(a: Any, b: Any) -> bool:
    if isinstance(a, Expr):
        return a.same_as(b)
    if isinstance(a, tuple):
        return isinstance(b, tuple) and len(a) == len(b) and all(map(_same_value, a, b))
    if type(a) is not type(b):
        return False
    if _isnull(a):
        return _isnull(b)
    return bool(a == b)


def _operand_repr(e: Expr) -> str:
    return repr(e.value) if isinstance(e, Lit) else repr(e)


@dataclass(frozen=True, eq=False, repr=False, slots=True)
class Col(Expr):
    """A field of the dict value; missing reads as null."""

    name: str

    def __post_init__(self) -> None:
        if not isinstance(self.name, str):
            raise TypeError(f"column names are strings, got {type(self.name).__name__}: {self.name!r}")

    def __repr__(self) -> str:
        return f"col({self.name!r})"

    def columns(self) -> set[str]:
        return {self.name}

    def _batch(self, df: pd.DataFrame) -> Any:
        return df[self.name] if self.name in df.columns else _null_series(df.index)

    def _compile(self) -> RecordFn:
        name = self.name

        def get(value: Any) -> Any:
            try:
                return value.get(name)
            except AttributeError:
                if value is None:
                    return None
                raise _not_a_dict(f"col({name!r})", value) from None

        return get

    def to_spark(self, F: Any) -> Any:
        return F.col(self.name)


@dataclass(frozen=True, eq=False, repr=False, slots=True)
class Lit(Expr):
    """A constant."""

    value: Any

    def __post_init__(self) -> None:
        if isinstance(self.value, Expr):
            raise TypeError("lit() of an expression; use the expression itself")
        if isinstance(self.value, (pd.Series, pd.DataFrame, np.ndarray)):
            raise TypeError(f"column expressions take scalars, not {type(self.value).__name__}")

    def __repr__(self) -> str:
        return f"lit({self.value!r})"

    def _batch(self, df: pd.DataFrame) -> Any:
        return self.value

    def _compile(self) -> RecordFn:
        value = self.value
        return lambda _: value

    def to_spark(self, F: Any) -> Any:
        return F.lit(self.value)


def _zero_div(fn: Callable[[Any, Any], Any], a: Any, b: Any) -> Any:
    with np.errstate(all="ignore"):
        return float(fn(np.float64(a), np.float64(b)))


def _arith(fn: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    def scalar(a: Any, b: Any) -> Any:
        if a is None or b is None or _isnull(a) or _isnull(b):
            return None
        try:
            return fn(a, b)
        except ZeroDivisionError:
            return _zero_div(fn, a, b)

    return scalar


def _pow(a: Any, b: Any) -> Any:
    if _isnull(a) or _isnull(b):
        return None
    try:
        result = a**b
    except (ZeroDivisionError, OverflowError):  # 0 ** -1, 10.0 ** 400: inf as numpy gives in a batch
        return _zero_div(operator.pow, a, b)
    return float("nan") if isinstance(result, complex) else result


def _compare(fn: Callable[[Any, Any], Any], if_null: bool) -> Callable[[Any, Any], Any]:
    def scalar(a: Any, b: Any) -> Any:
        if a is None or b is None or _isnull(a) or _isnull(b):
            return if_null
        return fn(a, b)

    return scalar


_ARITH_OPS: dict[str, Callable[[Any, Any], Any]] = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": operator.truediv,
    "//": operator.floordiv,
    "%": operator.mod,
    "**": operator.pow,
}
_CMP_OPS: dict[str, Callable[[Any, Any], Any]] = {
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}
_LOGIC_NP: dict[str, Callable[[Any, Any], Any]] = {
    "&": np.logical_and,
    "|": np.logical_or,
    "^": np.logical_xor,
}
_SCALAR: dict[str, Callable[[Any, Any], Any]] = {
    **{op: _arith(fn) for op, fn in _ARITH_OPS.items() if op != "**"},
    "**": _pow,
    **{op: _compare(fn, op == "!=") for op, fn in _CMP_OPS.items()},
    "&": lambda a, b: _truthy(a) & _truthy(b),
    "|": lambda a, b: _truthy(a) | _truthy(b),
    "^": lambda a, b: _truthy(a) ^ _truthy(b),
}


@dataclass(frozen=True, eq=False, repr=False, slots=True)
class BinOp(Expr):
    """``left op right`` for arithmetic (+ - * / // % **), comparisons and logical & | ^."""

    op: str
    left: Expr
    right: Expr

    def __post_init__(self) -> None:
        if self.op not in _SCALAR:
            raise ValueError(f"unknown binary operator {self.op!r}; expected one of {sorted(_SCALAR)}")

    def __repr__(self) -> str:
        return f"({_operand_repr(self.left)} {self.op} {_operand_repr(self.right)})"

    def _compile(self) -> RecordFn:
        fn = _SCALAR[self.op]
        left, right = self.left.compile_record(), self.right.compile_record()
        if isinstance(self.right, Lit):
            b = self.right.value
            return lambda v: fn(left(v), b)
        if isinstance(self.left, Lit):
            a = self.left.value
            return lambda v: fn(a, right(v))
        return lambda v: fn(left(v), right(v))

    def _batch(self, df: pd.DataFrame) -> Any:
        a, b = self.left._batch(df), self.right._batch(df)
        op, index = self.op, df.index
        if not isinstance(a, pd.Series) and not isinstance(b, pd.Series):
            return _SCALAR[op](a, b)
        if op in _LOGIC_NP:
            n = len(index)
            return pd.Series(_LOGIC_NP[op](_truth(a, n), _truth(b, n)), index=index)
        scalar_null = any(not isinstance(x, pd.Series) and _isnull(x) for x in (a, b))
        if op in _CMP_OPS:
            if scalar_null:
                return pd.Series(np.full(len(index), op == "!="), index=index)
            try:
                return _CMP_OPS[op](a, b)
            except TypeError:
                return _elementwise(_SCALAR[op], (a, b), index)
        if scalar_null:
            return _null_series(index)
        a, b = _arith_operand(a), _arith_operand(b)
        if op == "**":
            a = _pow_base(a, b)
        try:
            with np.errstate(all="ignore"):
                result = _ARITH_OPS[op](a, b)
        except TypeError:
            return _elementwise(_SCALAR[op], (a, b), index)
        return _mask_nulls(result, a, b) if op == "**" else result

    def to_spark(self, F: Any) -> Any:
        a, b, op = self.left.to_spark(F), self.right.to_spark(F), self.op
        if op in _LOGIC_NP:
            a, b = _spark_truth(F, a), _spark_truth(F, b)
            return a & b if op == "&" else a | b if op == "|" else a != b
        if op in _CMP_OPS:
            return F.coalesce(_CMP_OPS[op](a, b), F.lit(op == "!="))
        if op == "//":
            return F.floor(a / b)
        if op == "%":
            m = a % b
            return F.when((m != 0) & ((m < 0) != (b < 0)), m + b).otherwise(m)
        if op == "**":
            return F.pow(a, b)
        return _ARITH_OPS[op](a, b)


_UNARY: dict[str, Callable[[Any], Any]] = {
    "-": lambda x: None if _isnull(x) else -x,
    "abs": lambda x: None if _isnull(x) else abs(x),
    "~": lambda x: not _truthy(x),
}


@dataclass(frozen=True, eq=False, repr=False, slots=True)
class UnaryOp(Expr):
    """Negation ``-x``, absolute value ``abs(x)`` or logical not ``~x`` (null counts as False)."""

    op: str
    operand: Expr

    def __post_init__(self) -> None:
        if self.op not in _UNARY:
            raise ValueError(f"unknown unary operator {self.op!r}; expected one of {sorted(_UNARY)}")

    def __repr__(self) -> str:
        inner = _operand_repr(self.operand)
        return f"abs({inner})" if self.op == "abs" else f"({self.op}{inner})"

    def _compile(self) -> RecordFn:
        fn, inner = _UNARY[self.op], self.operand.compile_record()
        return lambda v: fn(inner(v))

    def _batch(self, df: pd.DataFrame) -> Any:
        x = self.operand._batch(df)
        if not isinstance(x, pd.Series):
            return _UNARY[self.op](x)
        if self.op == "~":
            return pd.Series(~_truth(x, len(x)), index=x.index)
        x = _arith_operand(x)
        try:
            return -x if self.op == "-" else x.abs()
        except TypeError:
            return _elementwise(_UNARY[self.op], (x,), x.index)

    def to_spark(self, F: Any) -> Any:
        x = self.operand.to_spark(F)
        if self.op == "~":
            return ~_spark_truth(F, x)
        return -x if self.op == "-" else F.abs(x)


@dataclass(frozen=True)
class _Func:
    method: str
    record: Callable[..., Callable[..., Any]]
    batch: Callable[..., Any]
    spark: Callable[..., Any]
    show_params: Callable[[tuple[Any, ...]], list[str]] = lambda params: [repr(p) for p in params]


@dataclass(frozen=True, eq=False, repr=False, slots=True)
class Call(Expr):
    """A named function (``isin``, ``fillna``, ``str.lower``, ...) of expressions, with fixed params."""

    fn: str
    args: tuple[Expr, ...]
    params: tuple[Any, ...] = ()

    def __post_init__(self) -> None:
        if self.fn not in _FUNCS:
            raise ValueError(f"unknown function {self.fn!r}; expected one of {sorted(_FUNCS)}")

    def __repr__(self) -> str:
        spec = _FUNCS[self.fn]
        shown = [_operand_repr(a) for a in self.args[1:]] + spec.show_params(self.params)
        return f"{self.args[0]!r}.{spec.method}({', '.join(shown)})"

    def _compile(self) -> RecordFn:
        fn = _FUNCS[self.fn].record(*self.params)
        fs = [a.compile_record() for a in self.args]
        if len(fs) == 1:
            f0 = fs[0]
            return lambda v: fn(f0(v))
        if len(fs) == 2:
            f0, f1 = fs
            return lambda v: fn(f0(v), f1(v))
        return lambda v: fn(*[f(v) for f in fs])

    def _batch(self, df: pd.DataFrame) -> Any:
        spec = _FUNCS[self.fn]
        values = [a._batch(df) for a in self.args]
        if not any(isinstance(v, pd.Series) for v in values):
            return spec.record(*self.params)(*values)
        return spec.batch(df.index, self.params, *values)

    def to_spark(self, F: Any) -> Any:
        return _FUNCS[self.fn].spark(F, self.params, *(a.to_spark(F) for a in self.args))


def _null_series(index: pd.Index) -> pd.Series:
    return pd.Series(np.full(len(index), np.nan), index=index)


def _broadcast(value: Any, index: pd.Index) -> pd.Series:
    if _isnull(value):
        return _null_series(index)
    if isinstance(value, (bool, int, float, str, np.generic)):
        return pd.Series(value, index=index)
    arr = np.empty(len(index), dtype=object)
    arr.fill(value)
    return pd.Series(arr, index=index)


def _objects(x: Any, n: int) -> np.ndarray:
    if isinstance(x, pd.Series):
        return x.to_numpy(dtype=object, copy=True)
    arr = np.empty(n, dtype=object)
    arr.fill(x)
    return arr


def _elementwise(fn: Callable[..., Any], args: tuple[Any, ...], index: pd.Index) -> pd.Series:
    cols = [a.tolist() if isinstance(a, pd.Series) else itertools.repeat(a) for a in args]
    return pd.Series([fn(*xs) for xs in zip(*cols, strict=False)], index=index, dtype=object).infer_objects()


def _isna(x: Any, n: int) -> np.ndarray:
    if isinstance(x, pd.Series):
        return x.isna().to_numpy()
    return np.full(n, _isnull(x))


def _truth(x: Any, n: int) -> np.ndarray:
    if not isinstance(x, pd.Series):
        return np.full(n, _truthy(x))
    if x.dtype == np.bool_:
        return x.to_numpy()
    kind = x.dtype.kind
    if kind in "iu":
        return x.to_numpy() != 0
    if kind == "f":
        arr = x.to_numpy()
        return (arr != 0) & ~np.isnan(arr)
    return np.fromiter((_truthy(v) for v in x.tolist()), dtype=bool, count=n)


def _numeric(x: Any) -> bool:
    if isinstance(x, pd.Series):
        return x.dtype.kind in "iuf"
    return isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, (bool, np.bool_))


def _arith_operand(x: Any) -> Any:
    return x.astype(np.int64) if isinstance(x, pd.Series) and x.dtype == np.bool_ else x


def _pow_base(a: Any, b: Any) -> Any:
    int_base = isinstance(a, int) or (isinstance(a, pd.Series) and a.dtype.kind in "iu")
    if isinstance(b, pd.Series):
        negative = b.dtype.kind == "i" and bool((b < 0).any())
    else:
        negative = isinstance(b, (int, np.integer)) and bool(b < 0)
    if int_base and negative:
        return a.astype(np.float64) if isinstance(a, pd.Series) else float(a)
    return a


def _mask_nulls(result: Any, a: Any, b: Any) -> Any:
    if not isinstance(result, pd.Series):
        return result
    mask = _isna(a, len(result)) | _isna(b, len(result))
    if not mask.any():
        return result
    arr = result.to_numpy(dtype=np.float64 if result.dtype.kind in "iuf" else object, copy=True)
    arr[mask] = np.nan if arr.dtype.kind == "f" else None
    return pd.Series(arr, index=result.index)


def _choose(take_other: np.ndarray, x: Any, other: Any, index: pd.Index) -> pd.Series:
    if _numeric(x) and _numeric(other):
        xv = x.to_numpy() if isinstance(x, pd.Series) else x
        ov = other.to_numpy() if isinstance(other, pd.Series) else other
        return pd.Series(np.where(take_other, ov, xv), index=index)
    out = _objects(x, len(index))
    out[take_other] = _objects(other, len(index))[take_other]
    return pd.Series(out, index=index).infer_objects()


def _spark_truth(F: Any, c: Any) -> Any:
    return F.coalesce(c, F.lit(False))


def _isin_record(values: tuple[Any, ...]) -> Callable[[Any], bool]:
    has_null = any(_isnull(v) for v in values)
    items = [v for v in values if not _isnull(v)]
    try:
        lookup: Any = frozenset(items)
    except TypeError:
        lookup = items

    def isin(x: Any) -> bool:
        if _isnull(x):
            return has_null
        try:
            return x in lookup
        except TypeError:
            return x in items

    return isin


def _isin_batch(index: pd.Index, params: tuple[Any, ...], x: pd.Series) -> pd.Series:
    values = params[0]
    result = x.isin([v for v in values if not _isnull(v)])
    if any(_isnull(v) for v in values):
        result = result | x.isna()
    return result


def _isin_spark(F: Any, params: tuple[Any, ...], c: Any) -> Any:
    items = [v for v in params[0] if not _isnull(v)]
    result = F.coalesce(c.isin(items), F.lit(False)) if items else F.lit(False)
    return result | c.isNull() if len(items) < len(params[0]) else result


def _round_record(decimals: int) -> Callable[[Any], Any]:
    def rnd(x: Any) -> Any:
        return None if _isnull(x) else np.round(x, decimals).item()

    return rnd


def _round_batch(index: pd.Index, params: tuple[Any, ...], x: pd.Series) -> pd.Series:
    if x.dtype.kind in "iuf":
        return x.round(params[0])
    return _elementwise(_round_record(params[0]), (x,), index)


_CASTS: dict[str, Callable[[Any], Any]] = {"int": int, "float": float, "str": str, "bool": bool}
_SPARK_CASTS = {"int": "long", "float": "double", "str": "string", "bool": "boolean"}


def _cast_record(name: str) -> Callable[[Any], Any]:
    cast = _CASTS[name]
    return lambda x: None if _isnull(x) else cast(x)


def _cast_batch(index: pd.Index, params: tuple[Any, ...], x: pd.Series) -> pd.Series:
    name, kind = params[0], x.dtype.kind
    if kind in "iub" and name in ("int", "float", "bool"):
        return x.astype({"int": np.int64, "float": np.float64, "bool": np.bool_}[name])
    if kind == "f" and name == "float":
        return x
    if kind == "f" and name in ("int", "bool"):
        arr = x.to_numpy()
        null = np.isnan(arr)
        if name == "int" and not (np.isfinite(arr) | null).all():
            return _elementwise(_cast_record(name), (x,), index)
        if not null.any():
            return pd.Series(arr.astype(np.int64) if name == "int" else arr != 0, index=index)
        if name == "int":
            return pd.Series(np.trunc(arr), index=index)
    return _elementwise(_cast_record(name), (x,), index)


def _guarded(fn: Callable[[Any], Any], default: Any) -> Callable[[Any], Any]:
    def call(x: Any) -> Any:
        if _isnull(x):
            return default
        try:
            return fn(x)
        except (TypeError, AttributeError):
            return default

    return call


def _str_func(
    record: Callable[..., Callable[[Any], Any]], accessor: Callable[..., pd.Series], test: bool
) -> Callable[..., pd.Series]:
    def batch(index: pd.Index, params: tuple[Any, ...], x: pd.Series) -> pd.Series:
        if x.dtype == object or isinstance(x.dtype, pd.StringDtype):
            try:
                return accessor(x.str, *params)
            except AttributeError:
                return _elementwise(record(*params), (x,), index)
        return pd.Series(np.zeros(len(index), dtype=bool), index=index) if test else _null_series(index)

    return batch


def _strf(
    method: str,
    record: Callable[..., Callable[[Any], Any]],
    accessor: Callable[..., pd.Series],
    spark: Callable[..., Any],
    test: bool = False,
) -> _Func:
    return _Func(method, record, _str_func(record, accessor, test), spark)


_FUNCS: dict[str, _Func] = {
    "isnull": _Func(
        "isnull",
        lambda: _isnull,
        lambda index, params, x: x.isna(),
        lambda F, params, c: c.isNull(),
    ),
    "notnull": _Func(
        "notnull",
        lambda: lambda x: not _isnull(x),
        lambda index, params, x: x.notna(),
        lambda F, params, c: c.isNotNull(),
    ),
    "isin": _Func(
        "isin",
        _isin_record,
        _isin_batch,
        _isin_spark,
        lambda params: [repr(list(params[0]))],
    ),
    "fillna": _Func(
        "fillna",
        lambda: lambda x, other: other if _isnull(x) else x,
        lambda index, params, x, other: _choose(_isna(x, len(index)), x, other, index),
        lambda F, params, c, other: F.coalesce(c, other),
    ),
    "where": _Func(
        "where",
        lambda: lambda x, cond, other: x if _truthy(cond) else other,
        lambda index, params, x, cond, other: _choose(~_truth(cond, len(index)), x, other, index),
        lambda F, params, c, cond, other: F.when(_spark_truth(F, cond), c).otherwise(other),
    ),
    "round": _Func(
        "round",
        _round_record,
        _round_batch,
        lambda F, params, c: F.bround(c, params[0]),
    ),
    "astype": _Func(
        "astype",
        _cast_record,
        _cast_batch,
        lambda F, params, c: c.cast(_SPARK_CASTS[params[0]]),
        lambda params: [params[0]],
    ),
    "str.lower": _strf(
        "str.lower",
        lambda: _guarded(str.lower, None),
        lambda s: s.lower(),
        lambda F, params, c: F.lower(c),
    ),
    "str.upper": _strf(
        "str.upper",
        lambda: _guarded(lambda x: x.upper(), None),
        lambda s: s.upper(),
        lambda F, params, c: F.upper(c),
    ),
    "str.strip": _strf(
        "str.strip",
        lambda: _guarded(lambda x: x.strip(None), None),
        lambda s: s.strip(),
        lambda F, params, c: F.trim(c),
    ),
    "str.len": _strf(
        "str.len",
        lambda: _guarded(len, None),
        lambda s: s.len(),
        lambda F, params, c: F.length(c),
    ),
    "str.contains": _strf(
        "str.contains",
        lambda sub: _guarded(lambda x: sub in x, False),
        lambda s, sub: s.contains(sub, regex=False, na=False),
        lambda F, params, c: F.coalesce(c.contains(params[0]), F.lit(False)),
        test=True,
    ),
    "str.startswith": _strf(
        "str.startswith",
        lambda prefix: _guarded(lambda x: x.startswith(prefix), False),
        lambda s, prefix: s.startswith(prefix, na=False),
        lambda F, params, c: F.coalesce(c.startswith(params[0]), F.lit(False)),
        test=True,
    ),
    "str.endswith": _strf(
        "str.endswith",
        lambda suffix: _guarded(lambda x: x.endswith(suffix), False),
        lambda s, suffix: s.endswith(suffix, na=False),
        lambda F, params, c: F.coalesce(c.endswith(params[0]), F.lit(False)),
        test=True,
    ),
}


def col(name: str) -> Col:
    """The field ``name`` of the dict value."""
    return Col(name)


def lit(value: Any) -> Lit:
    """A constant expression."""
    return Lit(value)


def as_expr(value: Any) -> Expr:
    """``value`` itself if it is an expression, else ``lit(value)``."""
    return value if isinstance(value, Expr) else Lit(value)


def evaluate_predicate_batch(expr: Expr, df: pd.DataFrame) -> np.ndarray:
    """Boolean mask of the rows where ``expr`` is true (null counts as False)."""
    return _truth(as_expr(expr)._batch(df), len(df))


def compile_predicate(expr: Expr) -> Callable[[Any], bool]:
    """A per-record predicate: true where ``expr`` is true (null counts as False)."""
    fn = as_expr(expr).compile_record()
    return lambda value: _truthy(fn(value))


def _assigned_batch(value: Any, df: pd.DataFrame) -> Any:
    if isinstance(value, Expr):
        return value.eval_batch(df)
    if callable(value):
        return value(df)
    return _broadcast(value, df.index)


def assign_batch(df: pd.DataFrame, assignments: Mapping[str, Any]) -> pd.DataFrame:
    """A new frame with columns set from expressions, scalars or callables of the frame, in order."""
    out = df.copy(deep=False)
    for name, value in assignments.items():
        out[name] = _assigned_batch(value, out)
    return out


def assign_record(value: Mapping[str, Any] | None, assignments: Mapping[str, Any]) -> dict[str, Any]:
    """A new dict with fields set from expressions, scalars or callables of the dict, in order.

    ``None`` reads as an empty record.
    """
    if value is None:
        out: dict[str, Any] = {}
    elif isinstance(value, Mapping):
        out = dict(value)
    else:
        raise _not_a_dict(f"assign({', '.join(assignments)})", value)
    for name, v in assignments.items():
        if isinstance(v, Expr):
            out[name] = v.compile_record()(out)
        elif callable(v):
            out[name] = v(out)
        else:
            out[name] = v
    return out


def project_batch(df: pd.DataFrame, names: Iterable[str]) -> pd.DataFrame:
    """A new frame with exactly the columns ``names`` (missing ones all null)."""
    return df.reindex(columns=list(names))


def project_record(value: Mapping[str, Any] | None, names: Iterable[str]) -> dict[str, Any]:
    """A new dict with exactly the fields ``names`` (missing ones None)."""
    if value is None:
        return dict.fromkeys(names)
    try:
        return {name: value.get(name) for name in names}
    except AttributeError:
        raise _not_a_dict(f"[{', '.join(map(repr, names))}]", value) from None
