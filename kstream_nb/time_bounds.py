"""Points in time as users write them: ``datetime``, epoch milliseconds, ISO-8601 strings, ``"-1h"``.

One rule for every time-addressed call (``read_topic(start=, end=)``, ``reset_app(to=)``, ``%kstream tail
--since``, ``%%kstream --from``): a naive ``datetime`` (or an ISO string without an offset) is UTC, an int is
epoch milliseconds, and ``"-10m"`` means now minus ten minutes (units of ``durations.to_millis``).
"""

from __future__ import annotations

import time
from datetime import date, datetime, timezone

import numpy as np

from kstream_nb.durations import to_millis

TimeBound = datetime | date | int | str


def now_ms() -> int:
    """Wall-clock time in epoch milliseconds."""
    return time.time_ns() // 1_000_000


def to_epoch_ms(bound: TimeBound, what: str = "time", now: int | None = None) -> int:
    """``bound`` as epoch milliseconds; raises ValueError naming ``what`` when it is none of the forms.

    ``now`` (epoch ms, default the wall clock) is what a relative bound such as ``"-1h"`` counts back from.
    """
    if isinstance(bound, bool):
        raise ValueError(f"{what} must be a time, got {bound!r}")
    if isinstance(bound, int | np.integer):
        return int(bound)
    if isinstance(bound, datetime):
        moment = bound if bound.tzinfo is not None else bound.replace(tzinfo=timezone.utc)
        return _whole_ms(moment)
    if isinstance(bound, date):
        return _whole_ms(datetime(bound.year, bound.month, bound.day, tzinfo=timezone.utc))
    if isinstance(bound, str):
        text = bound.strip()
        if text.startswith("-"):
            base = now_ms() if now is None else now
            try:
                return base - to_millis(text[1:], what)
            except ValueError:
                pass
        elif text.lower() == "now":
            return now_ms() if now is None else now
        else:
            try:
                return to_epoch_ms(datetime.fromisoformat(text.replace("z", "Z")), what)
            except ValueError:
                pass
        raise ValueError(
            f"{what}: cannot read {bound!r} as a time; use a datetime (naive = UTC), epoch milliseconds, an "
            "ISO-8601 string such as '2026-11-26T10:00:00Z', or now minus a duration such as '-10m', '-1h'"
        )
    raise ValueError(
        f"{what} must be a datetime, epoch milliseconds, an ISO-8601 string or e.g. '-1h', got {bound!r}"
    )


def _whole_ms(moment: datetime) -> int:
    """Exact epoch milliseconds of an aware datetime (no float rounding)."""
    delta = moment - datetime(1970, 1, 1, tzinfo=timezone.utc)
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000
