"""Columnar evaluation: operators on a batch's pandas Series, with the same results as on one value.

Vectorised numpy/pandas where the dtypes allow it, else value by value with the operators of ``scalar``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from kstream_nb.processor.expressions.scalar import ARITH_OPS, BINARY_OPS, CMP_OPS, UNARY_OPS, isnull, truthy

__all__ = ["binary_batch", "broadcast", "choose", "elementwise", "isna", "null_series", "truth", "unary_batch"]

_LOGIC_NP: dict[str, Callable[[Any, Any], Any]] = {
    "&": np.logical_and,
    "|": np.logical_or,
    "^": np.logical_xor,
}


def null_series(index: pd.Index) -> pd.Series:
    """All null (NaN) on ``index``."""
    return pd.Series(np.full(len(index), np.nan), index=index)


def broadcast(value: Any, index: pd.Index) -> pd.Series:
    """A scalar repeated on ``index``."""
    if isnull(value):
        return null_series(index)
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


def elementwise(fn: Callable[..., Any], args: tuple[Any, ...], index: pd.Index) -> pd.Series:
    """``fn`` applied value by value to Series (and scalars) ``args``."""
    cols = [a.tolist() if isinstance(a, pd.Series) else itertools.repeat(a) for a in args]
    return pd.Series([fn(*xs) for xs in zip(*cols, strict=False)], index=index, dtype=object).infer_objects()


def isna(x: Any, n: int) -> np.ndarray:
    """Null mask of a Series or a scalar (``n`` rows)."""
    if isinstance(x, pd.Series):
        return x.isna().to_numpy()
    return np.full(n, isnull(x))


def truth(x: Any, n: int) -> np.ndarray:
    """Truth mask of a Series or a scalar (``n`` rows), null False."""
    if not isinstance(x, pd.Series):
        return np.full(n, truthy(x))
    if x.dtype == np.bool_:
        return x.to_numpy()
    kind = x.dtype.kind
    if kind in "iu":
        return x.to_numpy() != 0
    if kind == "f":
        arr = x.to_numpy()
        return (arr != 0) & ~np.isnan(arr)
    return np.fromiter((truthy(v) for v in x.tolist()), dtype=bool, count=n)


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
    mask = isna(a, len(result)) | isna(b, len(result))
    if not mask.any():
        return result
    arr = result.to_numpy(dtype=np.float64 if result.dtype.kind in "iuf" else object, copy=True)
    arr[mask] = np.nan if arr.dtype.kind == "f" else None
    return pd.Series(arr, index=result.index)


def choose(take_other: np.ndarray, x: Any, other: Any, index: pd.Index) -> pd.Series:
    """``other`` where ``take_other``, else ``x``."""
    if _numeric(x) and _numeric(other):
        xv = x.to_numpy() if isinstance(x, pd.Series) else x
        ov = other.to_numpy() if isinstance(other, pd.Series) else other
        return pd.Series(np.where(take_other, ov, xv), index=index)
    out = _objects(x, len(index))
    out[take_other] = _objects(other, len(index))[take_other]
    return pd.Series(out, index=index).infer_objects()


def binary_batch(op: str, a: Any, b: Any, index: pd.Index) -> Any:
    """``a op b`` on evaluated operands (Series or scalars) of a batch on ``index``."""
    if not isinstance(a, pd.Series) and not isinstance(b, pd.Series):
        return BINARY_OPS[op](a, b)
    if op in _LOGIC_NP:
        n = len(index)
        return pd.Series(_LOGIC_NP[op](truth(a, n), truth(b, n)), index=index)
    scalar_null = any(not isinstance(x, pd.Series) and isnull(x) for x in (a, b))
    if op in CMP_OPS:
        if scalar_null:
            return pd.Series(np.full(len(index), op == "!="), index=index)
        try:
            return CMP_OPS[op](a, b)
        except TypeError:
            return elementwise(BINARY_OPS[op], (a, b), index)
    if scalar_null:
        return null_series(index)
    a, b = _arith_operand(a), _arith_operand(b)
    if op == "**":
        a = _pow_base(a, b)
    try:
        with np.errstate(all="ignore"):
            result = ARITH_OPS[op](a, b)
    except TypeError:
        return elementwise(BINARY_OPS[op], (a, b), index)
    return _mask_nulls(result, a, b) if op == "**" else result


def unary_batch(op: str, x: Any) -> Any:
    """``op x`` on an evaluated operand (Series or scalar)."""
    if not isinstance(x, pd.Series):
        return UNARY_OPS[op](x)
    if op == "~":
        return pd.Series(~truth(x, len(x)), index=x.index)
    x = _arith_operand(x)
    try:
        return -x if op == "-" else x.abs()
    except TypeError:
        return elementwise(UNARY_OPS[op], (x,), x.index)
