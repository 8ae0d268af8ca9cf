"""Window and session stores: their interfaces, the in-memory backend, change-logging, and the builder.

A window store maps (key, window start) to a value; with ``retain_duplicates`` (stream-stream joins)
every put is kept. A session store maps (key, session start, session end) to a value. Windows older
than the retention period behind the observed stream time are dropped. The RocksDB backend lives in
``kstream_nb.state.rocksdb_window``; ``WindowStoreBuilder`` picks it for ``default_dsl_store="rocksdb"``.
"""

from __future__ import annotations

import heapq
import struct
from abc import abstractmethod
from typing import Any

import pandas as pd

from kstream_nb.cluster.serdes import Serde
from kstream_nb.state.changelogging import ChangeHolder, ChangelogRegistration, StoreMeter
from kstream_nb.state.store import StateStore, StateStoreContext, StoreBackend, ValueAndTimestamp, sort_keys

_TS = struct.Struct(">q")
_SEQ = struct.Struct(">i")


class WindowedStore(StoreBackend):
    """What window and session stores share: a name, a retention period and the observed stream time."""

    def __init__(self, name: str, retention_ms: int) -> None:
        self._name = name
        self.retention_ms = retention_ms
        self.observed_stream_time = -1
        self._open = False
        self.context: StateStoreContext | None = None

    def init(self, context: StateStoreContext, root: StateStore | None = None) -> None:
        self.context = context
        self._open = True
        context.register(root or self, self._restore_unsupported, None)

    def _restore_unsupported(self, batch: list[tuple[Any, ...]]) -> None:
        raise RuntimeError(f"store {self._name!r} has no changelog to restore from")

    def close(self) -> None:
        self._open = False

    def _observe(self, timestamp: int) -> None:
        if timestamp > self.observed_stream_time:
            self.observed_stream_time = timestamp


class WindowStore(WindowedStore):
    """(key, window start) -> value, as Kafka Streams' ``WindowStore``."""

    window_size_ms: int
    retain_duplicates: bool
    #: sequence number of the last duplicate put (what the changelog key carries)
    seq: int

    @abstractmethod
    def put(self, key: Any, value: Any, window_start: int) -> None:
        """Stores a value for the window (None deletes it unless duplicates are retained)."""

    @abstractmethod
    def fetch(self, key: Any, window_start: int) -> Any:
        """The window's value (the list of values with ``retain_duplicates``), or None."""

    @abstractmethod
    def fetch_range(self, key: Any, time_from: int, time_to: int) -> list[tuple[int, Any]]:
        """(window start, value) for ``key`` with start in [time_from, time_to], by start (duplicates flat)."""

    @abstractmethod
    def fetch_all(self, time_from: int | None = None, time_to: int | None = None) -> list[tuple[Any, int, Any]]:
        """(key, window start, value) for every window in the range, by key then start."""

    def all(self) -> list[tuple[Any, int, Any]]:
        """Every window, by key then start."""
        return self.fetch_all()

    @abstractmethod
    def approximate_num_entries(self) -> int:
        """How many windows (values, with duplicates) the store holds."""

    def to_pandas(self) -> pd.DataFrame:
        """The windows as a DataFrame with ``key``, ``start``, ``end`` and ``value`` columns."""
        rows = [(k, s, s + self.window_size_ms, v) for k, s, v in self.all()]
        return pd.DataFrame(rows, columns=["key", "start", "end", "value"])


class SessionStore(WindowedStore):
    """(key, session start, session end) -> value, as Kafka Streams' ``SessionStore``."""

    @abstractmethod
    def put(self, key: Any, start: int, end: int, value: Any) -> None:
        """Stores a session's aggregate (None removes the session)."""

    def remove(self, key: Any, start: int, end: int) -> None:
        """Removes the session."""
        self.put(key, start, end, None)

    @abstractmethod
    def find_sessions(self, key: Any, earliest_end: int, latest_start: int) -> list[tuple[int, int, Any]]:
        """Sessions of ``key`` with end >= earliest_end and start <= latest_start, by start."""

    @abstractmethod
    def fetch_session(self, key: Any, start: int, end: int) -> Any:
        """The session's aggregate, or None."""

    @abstractmethod
    def all(self) -> list[tuple[Any, int, int, Any]]:
        """(key, start, end, value) of every session, by key then start."""

    @abstractmethod
    def approximate_num_entries(self) -> int:
        """How many sessions the store holds."""

    def to_pandas(self) -> pd.DataFrame:
        """The sessions as a DataFrame with ``key``, ``start``, ``end`` and ``value`` columns."""
        return pd.DataFrame(self.all(), columns=["key", "start", "end", "value"])


class InMemoryWindowStore(WindowStore):
    """(key, window start) -> value in dicts; ``fetch`` by key and time range; expires by retention."""

    def __init__(self, name: str, retention_ms: int, window_size_ms: int, retain_duplicates: bool = False) -> None:
        super().__init__(name, retention_ms)
        self.window_size_ms = window_size_ms
        self.retain_duplicates = retain_duplicates
        self._data: dict[Any, dict[int, Any]] = {}
        self.seq = 0
        #: time index for expiry: window start -> keys holding it, and a heap of starts
        self._by_start: dict[int, set[Any]] = {}
        self._starts: list[int] = []

    def put(self, key: Any, value: Any, window_start: int) -> None:
        self._observe(window_start)
        if window_start <= self.observed_stream_time - self.retention_ms:
            return
        windows = self._data.get(key)
        if value is None:
            if not self.retain_duplicates and windows is not None:
                windows.pop(window_start, None)
                if not windows:
                    del self._data[key]
            self._expire()
            return
        if windows is None:
            windows = self._data[key] = {}
        if self.retain_duplicates:
            self.seq = (self.seq + 1) & 0x7FFFFFFF
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
        keys, _ = sort_keys(list(self._data))
        out: list[tuple[Any, int, Any]] = []
        for key in keys:
            windows = self._data.get(key) or {}
            for start in sorted(windows):
                if (time_from is None or start >= time_from) and (time_to is None or start <= time_to):
                    values = windows[start] if self.retain_duplicates else [windows[start]]
                    out.extend((key, start, v) for v in values)
        return out

    def approximate_num_entries(self) -> int:
        if self.retain_duplicates:
            return sum(len(v) for w in list(self._data.values()) for v in list(w.values()))
        return sum(len(w) for w in list(self._data.values()))

    def close(self) -> None:
        super().close()
        self._data = {}
        self._by_start, self._starts = {}, []


class InMemorySessionStore(SessionStore):
    """(key, session start, session end) -> value in dicts; finds sessions overlapping a time range."""

    def __init__(self, name: str, retention_ms: int) -> None:
        super().__init__(name, retention_ms)
        self._data: dict[Any, dict[tuple[int, int], Any]] = {}
        #: time index for expiry: session end -> (key, start) pairs, and a heap of ends
        self._by_end: dict[int, set[tuple[Any, int]]] = {}
        self._ends: list[int] = []

    def put(self, key: Any, start: int, end: int, value: Any) -> None:
        self._observe(end)
        sessions = self._data.get(key)
        if value is None:
            if sessions is not None:
                sessions.pop((start, end), None)
                if not sessions:
                    del self._data[key]
            self._expire()
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
        sessions = self._data.get(key) or {}
        return [(s, e, v) for (s, e), v in sorted(sessions.items()) if e >= earliest_end and s <= latest_start]

    def fetch_session(self, key: Any, start: int, end: int) -> Any:
        return (self._data.get(key) or {}).get((start, end))

    def all(self) -> list[tuple[Any, int, int, Any]]:
        keys, _ = sort_keys(list(self._data))
        return [(k, s, e, v) for k in keys for (s, e), v in sorted((self._data.get(k) or {}).items())]

    def approximate_num_entries(self) -> int:
        return sum(len(s) for s in list(self._data.values()))

    def close(self) -> None:
        super().close()
        self._data = {}
        self._by_end, self._ends = {}, []


class WrappedWindowedStore:
    """A layer of a window or session store stack (metering, caching, change-logging): what it does not
    define itself, the store below answers."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def init(self, context: StateStoreContext, root: StateStore | None = None) -> None:
        self.inner.init(context, root if root is not None else self)


class _ChangeLoggingLayer(ChangeHolder, WrappedWindowedStore):
    """What the window and session change-logging layers share: serdes, changelog topic, the changes held
    for the next flush (see ``kstream_nb.state.changelogging``), and restoring (RocksDB stores take the
    changelog bytes as they are: the same key layout)."""

    def __init__(self, inner: Any, key_serde: Serde, value_serde: Serde) -> None:
        WrappedWindowedStore.__init__(self, inner)
        ChangeHolder.__init__(self)
        self.key_serde = key_serde
        self.value_serde = value_serde
        self._topic = ""
        self._context: StateStoreContext | None = None

    def init(self, context: StateStoreContext, root: StateStore | None = None) -> None:
        self._context = context
        self._topic = context.changelog_topic(self.inner.name)
        self._write = context.changelog_writer(self._topic)
        self._keys_by_bytes = self.inner.persistent  # (see kstream_nb.state.changelogging)
        self.inner.init(ChangelogRegistration(context, self._restore, self._topic), root or self)

    def _restore(self, batch: list[tuple[Any, ...]]) -> None:
        restore_raw = getattr(self.inner, "restore_raw", None)
        if restore_raw is not None:
            restore_raw(batch)
        else:
            self._restore_decoded(batch)

    def _restore_decoded(self, batch: list[tuple[Any, ...]]) -> None:
        raise NotImplementedError


class ChangeLoggingWindowStore(_ChangeLoggingLayer):
    """Logs each window put to the changelog: key = key bytes + 8-byte window start (+ 4-byte sequence)."""

    def __init__(self, inner: WindowStore, key_serde: Serde, value_serde: Serde, timestamped: bool = True) -> None:
        super().__init__(inner, key_serde, value_serde)
        #: values are ValueAndTimestamp: logged as the plain value with the timestamp on the record
        self.timestamped = timestamped

    def fetch(self, key: Any, window_start: int) -> Any:
        """Read through (defined here, not left to ``__getattr__``: every flushed window reads its old value)."""
        return self.inner.fetch(key, window_start)

    def init(self, context: StateStoreContext, root: StateStore | None = None) -> None:
        super().init(context, root)
        self._serialize_key = self.key_serde.serializer(self._topic, compact=False)  # joined with the suffix
        self._serialize_value = self.value_serde.serializer(self._topic)

    def put(self, key: Any, value: Any, window_start: int) -> None:
        inner = self.inner
        inner.put(key, value, window_start)
        ctx = self._context
        assert ctx is not None
        if inner.retain_duplicates:  # every put is a changelog key of its own: nothing to hold
            self._write_change(key, value, _TS.pack(window_start) + _SEQ.pack(inner.seq), ctx.timestamp)
        else:
            ident = self._serialize_key(key) if self._keys_by_bytes else key
            self._hold((ident, window_start), (key, value, _TS.pack(window_start), ctx.timestamp))

    def _write_change(self, key: Any, value: Any, suffix: bytes, timestamp: int) -> None:
        if self.timestamped and value is not None:
            value, timestamp = value.value, value.timestamp
        self._write((self._serialize_key(key) or b"") + suffix, self._serialize_value(value), timestamp)

    def _restore_decoded(self, batch: list[tuple[Any, ...]]) -> None:
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


class ChangeLoggingSessionStore(_ChangeLoggingLayer):
    """Logs each session put/remove: key = key bytes + 8-byte end + 8-byte start (Kafka's session schema)."""

    def put(self, key: Any, start: int, end: int, value: Any) -> None:
        self.inner.put(key, start, end, value)
        ctx = self._context
        assert ctx is not None
        ident = self.key_serde.serialize(self._topic, key) if self._keys_by_bytes else key
        self._hold((ident, start, end), (key, start, end, value, ctx.timestamp))

    def _write_change(self, key: Any, start: int, end: int, value: Any, timestamp: int) -> None:
        key_bytes = (self.key_serde.serialize(self._topic, key) or b"") + _TS.pack(end) + _TS.pack(start)
        self._write(key_bytes, self.value_serde.serialize(self._topic, value), timestamp)

    def remove(self, key: Any, start: int, end: int) -> None:
        self.put(key, start, end, None)

    def _restore_decoded(self, batch: list[tuple[Any, ...]]) -> None:
        for key_bytes, value_bytes, *_ in batch:
            if key_bytes is None:
                continue
            end, start = (
                _TS.unpack_from(key_bytes, len(key_bytes) - 16)[0],
                _TS.unpack_from(key_bytes, len(key_bytes) - 8)[0],
            )
            key = self.key_serde.deserialize(self._topic, key_bytes[:-16])
            self.inner.put(key, start, end, self.value_serde.deserialize(self._topic, value_bytes))


class _MeteredWindowedStore(WrappedWindowedStore, StoreMeter):
    """The outermost layer of a window or session store stack: counts operations for ``metrics()``."""

    def __init__(self, inner: Any, metrics_scope: str) -> None:
        WrappedWindowedStore.__init__(self, inner)
        StoreMeter.__init__(self, metrics_scope)

    def all(self) -> list[Any]:
        return self._scan(self.inner.all)


class MeteredWindowStore(_MeteredWindowedStore):
    """Metering over a window store stack."""

    def put(self, key: Any, value: Any, window_start: int) -> None:
        self._puts += 1
        self.inner.put(key, value, window_start)

    def fetch(self, key: Any, window_start: int) -> Any:
        self._gets += 1
        return self.inner.fetch(key, window_start)

    def fetch_range(self, key: Any, time_from: int, time_to: int) -> list[tuple[int, Any]]:
        return self._scan(self.inner.fetch_range, key, time_from, time_to)

    def fetch_all(self, time_from: int | None = None, time_to: int | None = None) -> list[tuple[Any, int, Any]]:
        return self._scan(self.inner.fetch_all, time_from, time_to)


class MeteredSessionStore(_MeteredWindowedStore):
    """Metering over a session store stack."""

    def put(self, key: Any, start: int, end: int, value: Any) -> None:
        self._puts += 1
        self.inner.put(key, start, end, value)

    def remove(self, key: Any, start: int, end: int) -> None:
        self._deletes += 1
        self.inner.remove(key, start, end)

    def fetch_session(self, key: Any, start: int, end: int) -> Any:
        self._gets += 1
        return self.inner.fetch_session(key, start, end)

    def find_sessions(self, key: Any, earliest_end: int, latest_start: int) -> list[tuple[int, int, Any]]:
        return self._scan(self.inner.find_sessions, key, earliest_end, latest_start)
