"""Window and session stores in memory, with a change-logging layer for each.

A window store maps (key, window start) to a value; with ``retain_duplicates`` (stream-stream joins)
every put is kept. A session store maps (key, session start, session end) to a value. Windows older
than the retention period behind the observed stream time are dropped.
"""

from __future__ import annotations

import heapq
import struct
from collections.abc import Callable
from typing import Any

import pandas as pd

from kstream_nb.cluster.serdes import Serde
from kstream_nb.state.store import StateStore, StateStoreContext, ValueAndTimestamp, sort_keys

_TS = struct.Struct(">q")
_SEQ = struct.Struct(">i")


class _Store(StateStore):
    def __init__(self, name: str, retention_ms: int) -> None:
        self._name = name
        self.retention_ms = retention_ms
        self.observed_stream_time = -1
        self._open = False
        self.context: StateStoreContext | None = None

    @property
    def name(self) -> str:
        return self._name

    @property
    def persistent(self) -> bool:
        return False

    @property
    def is_open(self) -> bool:
        return self._open

    def init(self, context: StateStoreContext, root: StateStore | None = None) -> None:
        self.context = context
        self._open = True
        context.register(root or self, self._restore_unsupported, None)

    def _restore_unsupported(self, batch: list[tuple[Any, ...]]) -> None:
        raise RuntimeError(f"store {self._name!r} has no changelog to restore from")

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self._open = False

    def _observe(self, timestamp: int) -> None:
        if timestamp > self.observed_stream_time:
            self.observed_stream_time = timestamp


class InMemoryWindowStore(_Store):
    """(key, window start) -> value; ``fetch`` by key and time range; expires by retention."""

    def __init__(self, name: str, retention_ms: int, window_size_ms: int, retain_duplicates: bool = False) -> None:
        super().__init__(name, retention_ms)
        self.window_size_ms = window_size_ms
        self.retain_duplicates = retain_duplicates
        self._data: dict[Any, dict[int, Any]] = {}
        self._seq = 0
        #: time index for expiry: window start -> keys holding it, and a heap of starts
        self._by_start: dict[int, set[Any]] = {}
        self._starts: list[int] = []

    def put(self, key: Any, value: Any, window_start: int) -> None:
        """Stores a value for the window (None deletes it unless duplicates are retained)."""
        self._observe(window_start)
        if window_start <= self.observed_stream_time - self.retention_ms:
            return
        windows = self._data.get(key)
        if value is None:
            if not self.retain_duplicates and windows is not None:
                windows.pop(window_start, None)
                if not windows:
                    del self._data[key]
            return
        if windows is None:
            windows = self._data[key] = {}
        if self.retain_duplicates:
            self._seq += 1
            windows.setdefault(window_start, []).append(value)
        else:
            windows[window_start] = value
        keys = self._by_start.get(window_start)
        if keys is None:
            keys = self._by_start[window_start] = set()
            heapq.heappush(self._starts, window_start)
        keys.add(key)
        self._expire()

    def _expire(self) -> None:
        """Drops windows whose start is retention behind the observed stream time (cost: what expires)."""
        limit = self.observed_stream_time - self.retention_ms
        starts = self._starts
        while starts and starts[0] <= limit:
            start = heapq.heappop(starts)
            for key in self._by_start.pop(start, ()):
                windows = self._data.get(key)
                if windows is not None:
                    windows.pop(start, None)
                    if not windows:
                        del self._data[key]

    def fetch(self, key: Any, window_start: int) -> Any:
        windows = self._data.get(key)
        return None if windows is None else windows.get(window_start)

    def fetch_range(self, key: Any, time_from: int, time_to: int) -> list[tuple[int, Any]]:
        """(window start, value) for ``key`` with start in [time_from, time_to], by start (duplicates flat)."""
        windows = self._data.get(key)
        if not windows:
            return []
        out: list[tuple[int, Any]] = []
        for start in sorted(s for s in windows if time_from <= s <= time_to):
            value = windows[start]
            if self.retain_duplicates:
                out.extend((start, v) for v in value)
            else:
                out.append((start, value))
        return out

    def fetch_all(self, time_from: int | None = None, time_to: int | None = None) -> list[tuple[Any, int, Any]]:
        """(key, window start, value) for every window in the range, by key then start."""
        keys, _ = sort_keys(list(self._data))
        out: list[tuple[Any, int, Any]] = []
        for key in keys:
            windows = self._data.get(key) or {}
            for start in sorted(windows):
                if (time_from is None or start >= time_from) and (time_to is None or start <= time_to):
                    values = windows[start] if self.retain_duplicates else [windows[start]]
                    out.extend((key, start, v) for v in values)
        return out

    def all(self) -> list[tuple[Any, int, Any]]:
        return self.fetch_all()

    def approximate_num_entries(self) -> int:
        return sum(len(w) for w in list(self._data.values()))

    def to_pandas(self) -> pd.DataFrame:
        rows = [(k, s, s + self.window_size_ms, v) for k, s, v in self.all()]
        return pd.DataFrame(rows, columns=["key", "start", "end", "value"])

    def close(self) -> None:
        super().close()
        self._data = {}
        self._by_start, self._starts = {}, []


class ChangeLoggingWindowStore:
    """Logs each window put to the changelog: key = key bytes + 8-byte window start (+ 4-byte sequence)."""

    def __init__(
        self, inner: InMemoryWindowStore, key_serde: Serde, value_serde: Serde, timestamped: bool = True
    ) -> None:
        self.inner = inner
        self.key_serde = key_serde
        self.value_serde = value_serde
        #: values are ValueAndTimestamp: logged as the plain value with the timestamp on the record
        self.timestamped = timestamped
        self._topic = ""
        self._context: StateStoreContext | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def init(self, context: StateStoreContext, root: StateStore | None = None) -> None:
        self._context = context
        self._topic = context.changelog_topic(self.inner.name)
        self.inner.context = context
        self.inner._open = True
        context.register(root or self, self._restore, self._topic)  # type: ignore[arg-type]

    def put(self, key: Any, value: Any, window_start: int) -> None:
        self.inner.put(key, value, window_start)
        ctx = self._context
        assert ctx is not None
        suffix = _TS.pack(window_start) + (_SEQ.pack(self.inner._seq) if self.inner.retain_duplicates else b"")
        key_bytes = (self.key_serde.serialize(self._topic, key) or b"") + suffix
        timestamp = ctx.timestamp
        if self.timestamped and value is not None:
            value, timestamp = value.value, value.timestamp
        value_bytes = self.value_serde.serialize(self._topic, value)
        ctx.log_change(self._topic, ctx.partition, key_bytes, value_bytes, timestamp)

    def _restore(self, batch: list[tuple[Any, ...]]) -> None:
        cut = 12 if self.inner.retain_duplicates else 8
        for key_bytes, value_bytes, *rest in batch:
            if key_bytes is None:
                continue
            start = _TS.unpack_from(key_bytes, len(key_bytes) - cut)[0]
            key = self.key_serde.deserialize(self._topic, key_bytes[:-cut])
            value = self.value_serde.deserialize(self._topic, value_bytes)
            if self.timestamped and value is not None:
                value = ValueAndTimestamp(value, rest[0])
            self.inner.put(key, value, start)


class InMemorySessionStore(_Store):
    """(key, session start, session end) -> value; finds sessions overlapping a time range."""

    def __init__(self, name: str, retention_ms: int) -> None:
        super().__init__(name, retention_ms)
        self._data: dict[Any, dict[tuple[int, int], Any]] = {}
        #: time index for expiry: session end -> (key, start) pairs, and a heap of ends
        self._by_end: dict[int, set[tuple[Any, int]]] = {}
        self._ends: list[int] = []

    def put(self, key: Any, start: int, end: int, value: Any) -> None:
        """Stores a session's aggregate (None removes the session)."""
        self._observe(end)
        sessions = self._data.get(key)
        if value is None:
            if sessions is not None:
                sessions.pop((start, end), None)
                if not sessions:
                    del self._data[key]
            return
        if end <= self.observed_stream_time - self.retention_ms:
            return
        if sessions is None:
            sessions = self._data[key] = {}
        sessions[(start, end)] = value
        entries = self._by_end.get(end)
        if entries is None:
            entries = self._by_end[end] = set()
            heapq.heappush(self._ends, end)
        entries.add((key, start))
        self._expire()

    def remove(self, key: Any, start: int, end: int) -> None:
        self.put(key, start, end, None)

    def _expire(self) -> None:
        """Drops sessions whose end is retention behind the observed stream time (cost: what expires)."""
        limit = self.observed_stream_time - self.retention_ms
        ends = self._ends
        while ends and ends[0] <= limit:
            end = heapq.heappop(ends)
            for key, start in self._by_end.pop(end, ()):
                sessions = self._data.get(key)
                if sessions is not None:
                    sessions.pop((start, end), None)
                    if not sessions:
                        del self._data[key]

    def find_sessions(self, key: Any, earliest_end: int, latest_start: int) -> list[tuple[int, int, Any]]:
        """Sessions of ``key`` with end >= earliest_end and start <= latest_start, by start."""
        sessions = self._data.get(key) or {}
        return [(s, e, v) for (s, e), v in sorted(sessions.items()) if e >= earliest_end and s <= latest_start]

    def fetch_session(self, key: Any, start: int, end: int) -> Any:
        return (self._data.get(key) or {}).get((start, end))

    def all(self) -> list[tuple[Any, int, int, Any]]:
        keys, _ = sort_keys(list(self._data))
        return [(k, s, e, v) for k in keys for (s, e), v in sorted((self._data.get(k) or {}).items())]

    def approximate_num_entries(self) -> int:
        return sum(len(s) for s in list(self._data.values()))

    def to_pandas(self) -> pd.DataFrame:
        return pd.DataFrame(self.all(), columns=["key", "start", "end", "value"])

    def close(self) -> None:
        super().close()
        self._data = {}
        self._by_end, self._ends = {}, []


class ChangeLoggingSessionStore:
    """Logs each session put/remove: key = key bytes + 8-byte end + 8-byte start (Kafka's session schema)."""

    def __init__(self, inner: InMemorySessionStore, key_serde: Serde, value_serde: Serde) -> None:
        self.inner = inner
        self.key_serde = key_serde
        self.value_serde = value_serde
        self._topic = ""
        self._context: StateStoreContext | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def init(self, context: StateStoreContext, root: StateStore | None = None) -> None:
        self._context = context
        self._topic = context.changelog_topic(self.inner.name)
        self.inner.context = context
        self.inner._open = True
        context.register(root or self, self._restore, self._topic)  # type: ignore[arg-type]

    def put(self, key: Any, start: int, end: int, value: Any) -> None:
        self.inner.put(key, start, end, value)
        ctx = self._context
        assert ctx is not None
        key_bytes = (self.key_serde.serialize(self._topic, key) or b"") + _TS.pack(end) + _TS.pack(start)
        ctx.log_change(self._topic, ctx.partition, key_bytes, self.value_serde.serialize(self._topic, value),
                       ctx.timestamp)  # fmt: skip

    def remove(self, key: Any, start: int, end: int) -> None:
        self.put(key, start, end, None)

    def _restore(self, batch: list[tuple[Any, ...]]) -> None:
        for key_bytes, value_bytes, *_ in batch:
            if key_bytes is None:
                continue
            end, start = (
                _TS.unpack_from(key_bytes, len(key_bytes) - 16)[0],
                _TS.unpack_from(key_bytes, len(key_bytes) - 8)[0],
            )
            key = self.key_serde.deserialize(self._topic, key_bytes[:-16])
            self.inner.put(key, start, end, self.value_serde.deserialize(self._topic, value_bytes))


class WindowStoreBuilder:
    """Builds a window or session store stack for each task (change-logging unless disabled)."""

    def __init__(self, name: str, make: Callable[[], InMemoryWindowStore | InMemorySessionStore],
                 key_serde: Any = None, value_serde: Any = None, timestamped: bool = True) -> None:  # fmt: skip
        self.name = name
        self.timestamped = timestamped
        self._make = make
        self.key_serde = key_serde
        self.value_serde = value_serde
        self.logging_enabled = True
        self.log_config: dict[str, str] = {}
        self.caching_enabled = False

    def with_logging_disabled(self) -> WindowStoreBuilder:
        self.logging_enabled = False
        return self

    def build(self, default_key_serde: Any = None, default_value_serde: Any = None) -> Any:
        from kstream_nb.cluster.serdes import serde_from

        store = self._make()
        if not self.logging_enabled:
            return store
        key_serde = serde_from(self.key_serde if self.key_serde is not None else default_key_serde or "json")
        value = serde_from(self.value_serde if self.value_serde is not None else default_value_serde or "json")
        if isinstance(store, InMemorySessionStore):
            return ChangeLoggingSessionStore(store, key_serde, value)
        return ChangeLoggingWindowStore(store, key_serde, value, self.timestamped)
