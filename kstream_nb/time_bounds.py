"""Points in time as users write them: ``datetime``, epoch milliseconds, ISO-8601 strings, ``"-1h"``.

One rule for every time-addressed call (``read_topic(start=, end=)``, ``reset_app(to=)``, ``%kstream tail
--since``, ``%%kstream --from``, the Spark source's and backtest's bounds): a naive ``datetime`` (or an ISO
string without an offset) is UTC, an int is epoch milliseconds, and ``"-10m"`` means now minus ten minutes
(units of ``durations.to_millis``).
"""

from __future__ import annotations

import time
from datetime import date, datetime
from typing import Any

import numpy as np
import pandas as pd

from kstream_nb.durations import to_millis

TimeBound = datetime | date | int | str


def now_ms() -> int:
    """Wall-clock time in epoch milliseconds."""
    return time.time_ns() // 1_000_000


def to_epoch_ms(bound: Any, what: str = "time", now: int | None = None) -> int:
    """``bound`` as epoch milliseconds; raises ValueError naming ``what`` when it is none of the forms.

    Ints, floats and digit strings are epoch ms; datetimes (``pd.Timestamp``, ``np.datetime64`` too) and ISO-8601
    strings are instants, naive ones in UTC; ``"-1h"`` counts back from ``now`` (epoch ms, default the clock).
    """
    if isinstance(bound, bool):
        raise ValueError(f"{what} must be a time, got {bound!r}")
    if isinstance(bound, int | float | np.integer | np.floating):
        return int(bound)
    if isinstance(bound, str):
        text = bound.strip()
        if text.lstrip("-").isdigit():
            return int(text)
        if text.lower() == "now":
            return now_ms() if now is None else now
        try:
            if text.startswith("-"):
                return (now_ms() if now is None else now) - to_millis(text[1:], what)
            return _instant_ms(datetime.fromisoformat(text))  # strict ISO: pandas reads "10m" as 00:10 in year 1
        except ValueError:
            raise ValueError(
                f"{what}: cannot read {bound!r} as a time; use a datetime (naive = UTC), epoch milliseconds, an "
                "ISO-8601 string such as '2026-11-26T10:00:00Z', or now minus a duration such as '-10m', '-1h'"
            ) from None
    if isinstance(bound, datetime | date | np.datetime64):
        return _instant_ms(bound)
    raise ValueError(
        f"{what} must be a datetime, epoch milliseconds, an ISO-8601 string or e.g. '-1h', got {bound!r}"
    )


def _instant_ms(moment: datetime | date | np.datetime64) -> int:
    """Exact epoch milliseconds of a datetime-like (naive: UTC)."""
    stamp = pd.Timestamp(moment)
    if stamp is pd.NaT:
        raise ValueError("not a time (NaT)")
    if stamp.tzinfo is None:
        stamp = stamp.tz_localize("UTC")
    return int(stamp.value // 1_000_000)
