"""Adapting user functions: whether a value mapper also takes the key."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any


def takes_key(fn: Callable[..., Any], op: str) -> bool:
    """True if ``fn`` takes (key, value), False if it takes (value); decided once, at build time."""
    if not callable(fn):
        raise TypeError(f"{op} needs a function, got {fn!r}")
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    positional = [
        p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
    ]
    if any(p.kind == p.VAR_POSITIONAL for p in params):
        return len(positional) == 0 or len(positional) >= 2
    if len(positional) > 2:
        raise TypeError(f"{op}: function takes {len(positional)} arguments; expected (value) or (key, value)")
    return len(positional) == 2


def check_callable(fn: Any, op: str) -> None:
    """Fails at build time, naming the operation, when a function argument is not callable."""
    if not callable(fn):
        raise TypeError(f"{op} needs a function, got {fn!r}")
