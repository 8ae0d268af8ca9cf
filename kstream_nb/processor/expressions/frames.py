"""The column-expression operations of the pandas-style processors: filter, assign and project.

Each has a per-record form (the record path and fused chains) and a batch form (columnar batches) that
give the same results.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from kstream_nb.processor.expressions.columnar import broadcast, truth
from kstream_nb.processor.expressions.scalar import not_a_dict, truthy
from kstream_nb.processor.expressions.tree import Expr, as_expr

__all__ = [
    "assign_batch",
    "assign_record",
    "compile_predicate",
    "evaluate_predicate_batch",
    "project_batch",
    "project_record",
]


def evaluate_predicate_batch(expr: Expr, df: pd.DataFrame) -> np.ndarray:
    """Boolean mask of the rows where ``expr`` is true (null counts as False)."""
    return truth(as_expr(expr)._batch(df), len(df))


def compile_predicate(expr: Expr) -> Callable[[Any], bool]:
    """A per-record predicate: true where ``expr`` is true (null counts as False)."""
    fn = as_expr(expr).compile_record()
    return lambda value: truthy(fn(value))


def _assigned_batch(value: Any, df: pd.DataFrame) -> Any:
    if isinstance(value, Expr):
        return value.eval_batch(df)
    if callable(value):
        return value(df)
    return broadcast(value, df.index)


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
        raise not_a_dict(f"assign({', '.join(assignments)})", value)
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
        raise not_a_dict(f"[{', '.join(map(repr, names))}]", value) from None
