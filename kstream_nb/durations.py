"""Durations as users write them: int milliseconds, ``timedelta``, or strings like ``"10s"``."""

from __future__ import annotations

import re
from datetime import timedelta

Duration = int | float | timedelta | str

_UNITS_MS = {"ms": 1, "s": 1_000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}
_PATTERN = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|min|m|h|d)\s*$")


def to_millis(duration: Duration, what: str = "duration") -> int:
    """Converts a duration to int milliseconds; raises ValueError naming ``what`` when it is invalid."""
    if isinstance(duration, bool):
        raise ValueError(f"{what} must be a duration, got {duration!r}")
    if isinstance(duration, timedelta):
        ms = int(duration.total_seconds() * 1000)
    elif isinstance(duration, (int, float)):
        ms = int(duration)
    elif isinstance(duration, str):
        match = _PATTERN.match(duration)
        if not match:
            raise ValueError(
                f"{what}: cannot parse {duration!r}; use int milliseconds, a timedelta, or e.g. '500ms', "
                "'10s', '5m', '1h', '1d'"
            )
        ms = int(float(match.group(1)) * _UNITS_MS[match.group(2)])
    else:
        raise ValueError(f"{what} must be int ms, timedelta or a string like '10s', got {duration!r}")
    if ms < 0:
        raise ValueError(f"{what} must not be negative, got {duration!r}")
    return ms
