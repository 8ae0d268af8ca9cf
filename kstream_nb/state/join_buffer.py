"""The buffer a left/outer stream-stream join keeps unmatched records in, with the join's stream time.

It also keeps Kafka's ``TimeTracker.minTime`` as Kafka does (``KStreamKStreamJoin``): lowered by every record
put in, reset by each scan to the timestamp of the last entry the scan looked at (so it may be above or below
the oldest waiting record); a scan only starts when ``min_time + after + grace`` is behind stream time.
"""

from __future__ import annotations

from typing import Any

from kstream_nb.state.store import StateStore, StateStoreContext, StoreBackend, json_order


class JoinBuffer(StoreBackend):
    """Unmatched records by (timestamp, side, key) — right side before left, as Kafka orders them."""

    def __init__(self, name: str) -> None:
        self._name = name
        self.stream_time = -1
        #: Kafka's tracked min time (None: Long.MAX_VALUE, nothing put since a scan of an empty buffer)
        self.min_time: int | None = None
        self._pending: dict[tuple[int, bool, Any], list[Any]] = {}
        self._open = False

    def init(self, context: StateStoreContext, root: StateStore | None = None) -> None:
        self._open = True
        context.register(root or self, self._no_restore, None)

    def _no_restore(self, batch: list[tuple[bytes | None, bytes | None]]) -> None:
        raise RuntimeError(f"join buffer {self._name!r} has no changelog")

    def close(self) -> None:
        self._open = False
        self._pending = {}
        self.min_time = None

    def advance_stream_time(self, ts: int) -> None:
        if ts > self.stream_time:
            self.stream_time = ts

    def add(self, ts: int, left_side: bool, key: Any, value: Any) -> None:
        self._pending.setdefault((ts, left_side, _hashable(key)), []).append((key, value))
        if self.min_time is None or ts < self.min_time:
            self.min_time = ts

    def remove(self, ts: int, left_side: bool, key: Any) -> None:
        self._pending.pop((ts, left_side, _hashable(key)), None)

    def scan_due(self, after_ms: int, grace_ms: int) -> bool:
        """Whether a scan may emit something: the tracked min time + ``after_ms`` (the processing side's) + grace
        is behind stream time."""
        return self.min_time is not None and self.min_time + after_ms + grace_ms < self.stream_time

    def expired(self, after_ms: int, before_ms: int, grace_ms: int) -> list[tuple[int, bool, Any, Any]]:
        """Removes and returns, in (timestamp, right before left, key) order, the records whose window closed.

        As Kafka's scan: it stops at the first entry after it has seen an open record of each side; the min
        time becomes the timestamp of the last entry looked at.
        """
        out: list[tuple[int, bool, Any, Any]] = []
        self.min_time = None
        left_open = right_open = False
        for entry in sorted(self._pending, key=lambda e: (e[0], e[1], json_order(e[2]))):
            ts, left_side, _ = entry
            self.min_time = ts
            if left_open and right_open:
                break
            if ts + (after_ms if left_side else before_ms) + grace_ms >= self.stream_time:
                if left_side:
                    left_open = True
                else:
                    right_open = True
                continue  # still open; Kafka keeps scanning (a later record of the other side may be closed)
            out.extend((ts, left_side, key, value) for key, value in self._pending.pop(entry))
        return out

    def __len__(self) -> int:
        return sum(len(v) for v in self._pending.values())


def _hashable(key: Any) -> Any:
    try:
        hash(key)
        return key
    except TypeError:
        return json_order(key)
