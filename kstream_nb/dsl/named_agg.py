"""Pandas-style named aggregations for grouped and windowed streams: ``g.agg(total=("amount", "sum"))``."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

FUNCTIONS = ("sum", "count", "min", "max", "mean", "first", "last")


def _check(specs: Mapping[str, Any]) -> dict[str, tuple[str, str]]:
    if not specs:
        raise TypeError('agg needs at least one name=(field, function), e.g. total=("amount", "sum")')
    checked = {}
    for name, spec in specs.items():
        if not (isinstance(spec, tuple) and len(spec) == 2 and isinstance(spec[0], str)):
            raise TypeError(f"agg {name}=...: expected a (field, function) pair, got {spec!r}")
        if spec[1] not in FUNCTIONS:
            raise ValueError(f"agg {name}=...: unknown function {spec[1]!r}; use one of {', '.join(FUNCTIONS)}")
        checked[name] = spec
    return checked


def named_aggregation(
    specs: Mapping[str, Any],
) -> tuple[
    Callable[[], dict[str, Any]], Callable[[Any, Any, dict[str, Any]], dict[str, Any]], Callable[[Any], Any]
]:
    """Initializer, aggregator and finisher for the named specs (nulls are skipped, as pandas does).

    The running state keeps ``[sum, n]`` for means; the finisher turns it into the plain dict users see.
    """
    checked = _check(specs)

    def initializer() -> dict[str, Any]:
        return {name: [0, 0] if fn == "mean" else (0 if fn in ("sum", "count") else None)
                for name, (_, fn) in checked.items()}  # fmt: skip

    def aggregator(key: Any, value: Any, state: dict[str, Any]) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise TypeError(f"agg needs dict values, got {type(value).__name__} {value!r}")
        new = dict(state)
        for name, (field, fn) in checked.items():
            x = value.get(field)
            if x is None or x != x:
                continue
            current = new[name]
            if fn == "sum":
                new[name] = current + x
            elif fn == "count":
                new[name] = current + 1
            elif fn == "min":
                new[name] = x if current is None or x < current else current
            elif fn == "max":
                new[name] = x if current is None or x > current else current
            elif fn == "mean":
                new[name] = [current[0] + x, current[1] + 1]
            elif fn == "first":
                new[name] = x if current is None else current
            else:
                new[name] = x
        return new

    means = [name for name, (_, fn) in checked.items() if fn == "mean"]

    def finish(state: Any) -> Any:
        if not means or state is None:
            return state
        out = dict(state)
        for name in means:
            total, n = out[name]
            out[name] = total / n if n else None
        return out

    return initializer, aggregator, finish


def named_merger(specs: Mapping[str, Any]) -> Callable[[Any, Any, Any], dict[str, Any]]:
    """Merges two sessions' running states (``a`` the earlier session): sums add, extremes compare, means
    add their ``[sum, n]``, ``first`` keeps the earlier session's and ``last`` the later one's."""
    checked = _check(specs)

    def merger(key: Any, a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
        out = {}
        for name, (_, fn) in checked.items():
            x, y = a[name], b[name]
            if fn in ("sum", "count"):
                out[name] = x + y
            elif fn == "mean":
                out[name] = [x[0] + y[0], x[1] + y[1]]
            elif x is None or y is None:
                out[name] = y if x is None else x
            elif fn == "min":
                out[name] = min(x, y)
            elif fn == "max":
                out[name] = max(x, y)
            else:
                out[name] = x if fn == "first" else y
        return out

    return merger
