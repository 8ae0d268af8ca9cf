"""The expression tree: ``Expr`` nodes (``Col``, ``Lit``, ``BinOp``, ``UnaryOp``, ``Call``) and their operators.

Nodes are immutable data; each evaluates on a batch (``eval_batch``, with ``columnar``) or compiles once
into closures over one dict value (``compile_record``, with ``scalar``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, fields
from typing import Any

import numpy as np
import pandas as pd

from kstream_nb.processor.expressions.columnar import binary_batch, broadcast, null_series, unary_batch
from kstream_nb.processor.expressions.functions import CASTS, FUNCS
from kstream_nb.processor.expressions.scalar import BINARY_OPS, UNARY_OPS, RecordFn, isnull, not_a_dict

__all__ = ["BinOp", "Call", "Col", "Expr", "Lit", "StrAccessor", "UnaryOp", "as_expr", "col", "lit"]


class Expr:
    """A column expression over dict values; build with ``col``, ``lit``, operators and methods."""

    __slots__ = ("_record_fn",)

    def _batch(self, df: pd.DataFrame) -> Any:
        raise NotImplementedError

    def _compile(self) -> RecordFn:
        raise NotImplementedError

    def eval_batch(self, df: pd.DataFrame) -> pd.Series:
        """Evaluate on a batch whose columns are the value fields; returns a Series aligned to ``df``."""
        result = self._batch(df)
        return result if isinstance(result, pd.Series) else broadcast(result, df.index)

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
        if name not in CASTS:
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
    if isnull(a):
        return isnull(b)
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
        return df[self.name] if self.name in df.columns else null_series(df.index)

    def _compile(self) -> RecordFn:
        name = self.name

        def get(value: Any) -> Any:
            try:
                return value.get(name)
            except AttributeError:
                if value is None:
                    return None
                raise not_a_dict(f"col({name!r})", value) from None

        return get


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


@dataclass(frozen=True, eq=False, repr=False, slots=True)
class BinOp(Expr):
    """``left op right`` for arithmetic (+ - * / // % **), comparisons and logical & | ^."""

    op: str
    left: Expr
    right: Expr

    def __post_init__(self) -> None:
        if self.op not in BINARY_OPS:
            raise ValueError(f"unknown binary operator {self.op!r}; expected one of {sorted(BINARY_OPS)}")

    def __repr__(self) -> str:
        return f"({_operand_repr(self.left)} {self.op} {_operand_repr(self.right)})"

    def _compile(self) -> RecordFn:
        fn = BINARY_OPS[self.op]
        left, right = self.left.compile_record(), self.right.compile_record()
        if isinstance(self.right, Lit):
            b = self.right.value
            return lambda v: fn(left(v), b)
        if isinstance(self.left, Lit):
            a = self.left.value
            return lambda v: fn(a, right(v))
        return lambda v: fn(left(v), right(v))

    def _batch(self, df: pd.DataFrame) -> Any:
        return binary_batch(self.op, self.left._batch(df), self.right._batch(df), df.index)


@dataclass(frozen=True, eq=False, repr=False, slots=True)
class UnaryOp(Expr):
    """Negation ``-x``, absolute value ``abs(x)`` or logical not ``~x`` (null counts as False)."""

    op: str
    operand: Expr

    def __post_init__(self) -> None:
        if self.op not in UNARY_OPS:
            raise ValueError(f"unknown unary operator {self.op!r}; expected one of {sorted(UNARY_OPS)}")

    def __repr__(self) -> str:
        inner = _operand_repr(self.operand)
        return f"abs({inner})" if self.op == "abs" else f"({self.op}{inner})"

    def _compile(self) -> RecordFn:
        fn, inner = UNARY_OPS[self.op], self.operand.compile_record()
        return lambda v: fn(inner(v))

    def _batch(self, df: pd.DataFrame) -> Any:
        return unary_batch(self.op, self.operand._batch(df))


@dataclass(frozen=True, eq=False, repr=False, slots=True)
class Call(Expr):
    """A named function (``isin``, ``fillna``, ``str.lower``, ...) of expressions, with fixed params."""

    fn: str
    args: tuple[Expr, ...]
    params: tuple[Any, ...] = ()

    def __post_init__(self) -> None:
        if self.fn not in FUNCS:
            raise ValueError(f"unknown function {self.fn!r}; expected one of {sorted(FUNCS)}")

    def __repr__(self) -> str:
        spec = FUNCS[self.fn]
        shown = [_operand_repr(a) for a in self.args[1:]] + spec.show_params(self.params)
        return f"{self.args[0]!r}.{spec.method}({', '.join(shown)})"

    def _compile(self) -> RecordFn:
        fn = FUNCS[self.fn].record(*self.params)
        fs = [a.compile_record() for a in self.args]
        if len(fs) == 1:
            f0 = fs[0]
            return lambda v: fn(f0(v))
        if len(fs) == 2:
            f0, f1 = fs
            return lambda v: fn(f0(v), f1(v))
        return lambda v: fn(*[f(v) for f in fs])

    def _batch(self, df: pd.DataFrame) -> Any:
        spec = FUNCS[self.fn]
        values = [a._batch(df) for a in self.args]
        if not any(isinstance(v, pd.Series) for v in values):
            return spec.record(*self.params)(*values)
        return spec.batch(df.index, self.params, *values)


def col(name: str) -> Col:
    """The field ``name`` of the dict value."""
    return Col(name)


def lit(value: Any) -> Lit:
    """A constant expression."""
    return Lit(value)


def as_expr(value: Any) -> Expr:
    """``value`` itself if it is an expression, else ``lit(value)``."""
    return value if isinstance(value, Expr) else Lit(value)
