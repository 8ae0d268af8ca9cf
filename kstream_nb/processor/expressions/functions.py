"""The function vocabulary of expressions (``isin``, ``fillna``, ``where``, ``round``, ``astype``, ``str.*``).

Each function has a per-record form and a batch form that give the same results; ``Call`` nodes name
them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from kstream_nb.processor.expressions.columnar import choose, elementwise, isna, null_series, truth
from kstream_nb.processor.expressions.scalar import isnull, truthy

__all__ = ["CASTS", "FUNCS", "Func"]


@dataclass(frozen=True)
class Func:
    """One function: ``record(*params)`` gives the per-value function, ``batch(index, params, *series)``
    evaluates a batch, ``show_params`` renders the params in the expression's repr."""

    method: str
    record: Callable[..., Callable[..., Any]]
    batch: Callable[..., Any]
    show_params: Callable[[tuple[Any, ...]], list[str]] = lambda params: [repr(p) for p in params]


def _isin_record(values: tuple[Any, ...]) -> Callable[[Any], bool]:
    has_null = any(isnull(v) for v in values)
    items = [v for v in values if not isnull(v)]
    try:
        lookup: Any = frozenset(items)
    except TypeError:
        lookup = items

    def isin(x: Any) -> bool:
        if isnull(x):
            return has_null
        try:
            return x in lookup
        except TypeError:
            return x in items

    return isin


def _isin_batch(index: pd.Index, params: tuple[Any, ...], x: pd.Series) -> pd.Series:
    values = params[0]
    result = x.isin([v for v in values if not isnull(v)])
    if any(isnull(v) for v in values):
        result = result | x.isna()
    return result


def _round_record(decimals: int) -> Callable[[Any], Any]:
    def rnd(x: Any) -> Any:
        return None if isnull(x) else np.round(x, decimals).item()

    return rnd


def _round_batch(index: pd.Index, params: tuple[Any, ...], x: pd.Series) -> pd.Series:
    if x.dtype.kind in "iuf":
        return x.round(params[0])
    return elementwise(_round_record(params[0]), (x,), index)


CASTS: dict[str, Callable[[Any], Any]] = {"int": int, "float": float, "str": str, "bool": bool}


def _cast_record(name: str) -> Callable[[Any], Any]:
    cast = CASTS[name]
    return lambda x: None if isnull(x) else cast(x)


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
            return elementwise(_cast_record(name), (x,), index)
        if not null.any():
            return pd.Series(arr.astype(np.int64) if name == "int" else arr != 0, index=index)
        if name == "int":
            return pd.Series(np.trunc(arr), index=index)
    return elementwise(_cast_record(name), (x,), index)


def _guarded(fn: Callable[[Any], Any], default: Any) -> Callable[[Any], Any]:
    def call(x: Any) -> Any:
        if isnull(x):
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
                return elementwise(record(*params), (x,), index)
        return pd.Series(np.zeros(len(index), dtype=bool), index=index) if test else null_series(index)

    return batch


def _strf(
    method: str,
    record: Callable[..., Callable[[Any], Any]],
    accessor: Callable[..., pd.Series],
    test: bool = False,
) -> Func:
    return Func(method, record, _str_func(record, accessor, test))


FUNCS: dict[str, Func] = {
    "isnull": Func(
        "isnull",
        lambda: isnull,
        lambda index, params, x: x.isna(),
    ),
    "notnull": Func(
        "notnull",
        lambda: lambda x: not isnull(x),
        lambda index, params, x: x.notna(),
    ),
    "isin": Func(
        "isin",
        _isin_record,
        _isin_batch,
        lambda params: [repr(list(params[0]))],
    ),
    "fillna": Func(
        "fillna",
        lambda: lambda x, other: other if isnull(x) else x,
        lambda index, params, x, other: choose(isna(x, len(index)), x, other, index),
    ),
    "where": Func(
        "where",
        lambda: lambda x, cond, other: x if truthy(cond) else other,
        lambda index, params, x, cond, other: choose(~truth(cond, len(index)), x, other, index),
    ),
    "round": Func(
        "round",
        _round_record,
        _round_batch,
    ),
    "astype": Func(
        "astype",
        _cast_record,
        _cast_batch,
        lambda params: [params[0]],
    ),
    "str.lower": _strf(
        "str.lower",
        lambda: _guarded(str.lower, None),
        lambda s: s.lower(),
    ),
    "str.upper": _strf(
        "str.upper",
        lambda: _guarded(lambda x: x.upper(), None),
        lambda s: s.upper(),
    ),
    "str.strip": _strf(
        "str.strip",
        lambda: _guarded(lambda x: x.strip(None), None),
        lambda s: s.strip(),
    ),
    "str.len": _strf(
        "str.len",
        lambda: _guarded(len, None),
        lambda s: s.len(),
    ),
    "str.contains": _strf(
        "str.contains",
        lambda sub: _guarded(lambda x: sub in x, False),
        lambda s, sub: s.contains(sub, regex=False, na=False),
        test=True,
    ),
    "str.startswith": _strf(
        "str.startswith",
        lambda prefix: _guarded(lambda x: x.startswith(prefix), False),
        lambda s, prefix: s.startswith(prefix, na=False),
        test=True,
    ),
    "str.endswith": _strf(
        "str.endswith",
        lambda suffix: _guarded(lambda x: x.endswith(suffix), False),
        lambda s, suffix: s.endswith(suffix, na=False),
        test=True,
    ),
}
