"""Window definitions (tumbling/hopping, sliding, session, join) and windowed keys.

Time windows are ``[start, end)``; sliding and session windows are ``[start, end]`` (both inclusive),
as in Kafka Streams. A window is closed once the largest timestamp it can hold plus grace is behind
stream time; records for closed windows are dropped.
"""

from __future__ import annotations

from kstream_nb.cluster.windowed_serdes import Windowed
from kstream_nb.durations import Duration, to_millis

__all__ = ["JoinWindows", "SessionWindows", "SlidingWindows", "TimeWindows", "Windowed"]


class TimeWindows:
    """Tumbling windows of ``size`` (``advance_by`` makes them hopping); ``grace`` admits late records."""

    def __init__(self, size_ms: int, advance_ms: int | None = None, grace_ms: int = 0) -> None:
        if size_ms <= 0:
            raise ValueError(f"window size must be > 0 ms, got {size_ms}")
        advance = size_ms if advance_ms is None else advance_ms
        if not 0 < advance <= size_ms:
            raise ValueError(f"advance must be > 0 and <= size ({size_ms} ms), got {advance}")
        self.size_ms = size_ms
        self.advance_ms = advance
        self.grace_ms = grace_ms

    @classmethod
    def of(cls, size: Duration) -> TimeWindows:
        """Tumbling windows of ``size`` with no grace (add ``.grace(...)``)."""
        return cls(to_millis(size, "window size"))

    of_size_with_no_grace = of

    @classmethod
    def of_size_and_grace(cls, size: Duration, grace: Duration) -> TimeWindows:
        return cls(to_millis(size, "window size"), grace_ms=to_millis(grace, "grace"))

    def advance_by(self, advance: Duration) -> TimeWindows:
        """Hopping windows: a new window starts every ``advance``."""
        return TimeWindows(self.size_ms, to_millis(advance, "advance"), self.grace_ms)

    def grace(self, grace: Duration) -> TimeWindows:
        """How long after a window ends late records are still added to it."""
        return TimeWindows(self.size_ms, self.advance_ms, to_millis(grace, "grace"))

    def window_starts(self, timestamp: int) -> range:
        """Starts of every window containing ``timestamp`` (ascending; no negative starts)."""
        first = (max(0, timestamp - self.size_ms + self.advance_ms) // self.advance_ms) * self.advance_ms
        return range(first, timestamp + 1, self.advance_ms)

    @property
    def retention_ms(self) -> int:
        return self.size_ms + self.grace_ms

    def __repr__(self) -> str:
        hop = f".advance_by({self.advance_ms})" if self.advance_ms != self.size_ms else ""
        return f"TimeWindows.of({self.size_ms}){hop}.grace({self.grace_ms})"


class SlidingWindows:
    """Aggregation windows of ``time_difference``: ``[t - d, t]`` ending at each record, inclusive."""

    def __init__(self, time_difference_ms: int, grace_ms: int = 0) -> None:
        if time_difference_ms <= 0:
            raise ValueError(f"time difference must be > 0 ms, got {time_difference_ms}")
        self.time_difference_ms = time_difference_ms
        self.grace_ms = grace_ms

    @classmethod
    def of(cls, time_difference: Duration) -> SlidingWindows:
        return cls(to_millis(time_difference, "time difference"))

    of_time_difference_with_no_grace = of

    @classmethod
    def of_time_difference_and_grace(cls, time_difference: Duration, grace: Duration) -> SlidingWindows:
        return cls(to_millis(time_difference, "time difference"), to_millis(grace, "grace"))

    def grace(self, grace: Duration) -> SlidingWindows:
        return SlidingWindows(self.time_difference_ms, to_millis(grace, "grace"))

    @property
    def retention_ms(self) -> int:
        return 2 * self.time_difference_ms + self.grace_ms + 1

    def __repr__(self) -> str:
        return f"SlidingWindows.of({self.time_difference_ms}).grace({self.grace_ms})"


class SessionWindows:
    """Sessions: records of a key closer than ``gap`` apart share a session; sessions merge."""

    def __init__(self, gap_ms: int, grace_ms: int = 0) -> None:
        if gap_ms <= 0:
            raise ValueError(f"inactivity gap must be > 0 ms, got {gap_ms}")
        self.gap_ms = gap_ms
        self.grace_ms = grace_ms

    @classmethod
    def with_gap(cls, gap: Duration) -> SessionWindows:
        return cls(to_millis(gap, "inactivity gap"))

    of_inactivity_gap_with_no_grace = with_gap

    @classmethod
    def of_inactivity_gap_and_grace(cls, gap: Duration, grace: Duration) -> SessionWindows:
        return cls(to_millis(gap, "inactivity gap"), to_millis(grace, "grace"))

    def grace(self, grace: Duration) -> SessionWindows:
        return SessionWindows(self.gap_ms, to_millis(grace, "grace"))

    @property
    def retention_ms(self) -> int:
        return self.gap_ms + self.grace_ms

    def __repr__(self) -> str:
        return f"SessionWindows.with_gap({self.gap_ms}).grace({self.grace_ms})"


class JoinWindows:
    """Stream-stream join window: a left record at t joins right records in ``[t - before, t + after]``."""

    def __init__(self, before_ms: int, after_ms: int, grace_ms: int = 0, eager_null_results: bool = False) -> None:
        if before_ms + after_ms < 0:
            raise ValueError("join window size (before + after) must not be negative")
        self.before_ms = before_ms
        self.after_ms = after_ms
        self.grace_ms = grace_ms
        #: Kafka's deprecated ``JoinWindows.of()``: unmatched left/outer records are null-padded at once.
        self.eager_null_results = eager_null_results

    @classmethod
    def of(cls, time_difference: Duration) -> JoinWindows:
        """Symmetric window ``[t - d, t + d]`` with no grace (``of_time_difference_with_no_grace``)."""
        d = to_millis(time_difference, "time difference")
        return cls(d, d)

    of_time_difference_with_no_grace = of

    @classmethod
    def of_time_difference_and_grace(cls, time_difference: Duration, grace: Duration) -> JoinWindows:
        d = to_millis(time_difference, "time difference")
        return cls(d, d, to_millis(grace, "grace"))

    def before(self, before: Duration) -> JoinWindows:
        return JoinWindows(to_millis(before, "before"), self.after_ms, self.grace_ms, self.eager_null_results)

    def after(self, after: Duration) -> JoinWindows:
        return JoinWindows(self.before_ms, to_millis(after, "after"), self.grace_ms, self.eager_null_results)

    def grace(self, grace: Duration) -> JoinWindows:
        return JoinWindows(self.before_ms, self.after_ms, to_millis(grace, "grace"), self.eager_null_results)

    @property
    def retention_ms(self) -> int:
        return self.before_ms + self.after_ms + self.grace_ms + 1

    def __repr__(self) -> str:
        return f"JoinWindows(before={self.before_ms}, after={self.after_ms}, grace={self.grace_ms})"
