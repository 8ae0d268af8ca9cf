"""RocksDB window and session stores (rocksdict), under ``<state_dir>/<application_id>/<task_id>/rocksdb/<store>``.

Entries are bytes in Kafka Streams' layouts: a window entry's key is the serialized key, the 8-byte
big-endian window start and, with ``retain_duplicates``, a 4-byte sequence number; a session entry's
key is the serialized key, the 8-byte end and the 8-byte start. Timestamped window values are the
8-byte timestamp then the value. Entries live in time segments of ``max(retention / 2, 60s)`` (window
start, session end), one column family each, so expiry drops whole column families and costs what
expires; reads skip the entries of the oldest, partly expired segment. The changelog's keys are the
same bytes, so restoring writes them without decoding.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

from rocksdict import Options, Rdict

from kstream_nb.cluster.serde_specs import serde_from
from kstream_nb.cluster.serdes import Serde
from kstream_nb.errors import IllegalStateError
from kstream_nb.state.dsl_window_store import DslSessionStore, DslWindowStore
from kstream_nb.state.rocksdb import decode_value, encode_value
from kstream_nb.state.store import (
    KeyValue,
    StateStore,
    StateStoreContext,
    rocksdb_dir,
    sort_entries,
)
from kstream_nb.state.window_store import InMemorySessionStore, InMemoryWindowStore, SessionStore, WindowStore

_TS = struct.Struct(">q")
_SEQ = struct.Struct(">i")
_END_START = struct.Struct(">qq")
_SEGMENT_PREFIX = "segment-"
_META_STREAM_TIME = b"observed-stream-time"
_META_SEQ = b"seq"
_MIN_SEGMENT_INTERVAL_MS = 60_000


def _options() -> Options:
    options = Options(raw_mode=True)
    options.create_if_missing(True)
    options.create_missing_column_families(True)
    return options


def _items(segment: Rdict, from_key: bytes | None = None) -> Iterator[tuple[bytes, bytes]]:
    """The segment's (key, value) bytes in key order, from ``from_key`` (raw mode: always bytes)."""
    items = segment.items() if from_key is None else segment.items(from_key=from_key)
    return cast(Iterator[tuple[bytes, bytes]], items)


class Segments:
    """Time segments of one RocksDB database: one column family per ``interval_ms`` of time.

    The default column family holds the store's metadata (observed stream time, sequence number).
    """

    def __init__(self, path: Path, interval_ms: int) -> None:
        self.path = path
        self.interval_ms = interval_ms
        path.parent.mkdir(parents=True, exist_ok=True)
        names = Rdict.list_cf(str(path), _options()) if (path / "CURRENT").exists() else ["default"]
        families = {n: _options() for n in names if n.startswith(_SEGMENT_PREFIX)}
        self.db: Rdict | None = Rdict(str(path), options=_options(), column_families=families or None)
        self._by_id: dict[int, Rdict] = {}
        for name in families:
            self._by_id[int(name[len(_SEGMENT_PREFIX) :]) // interval_ms] = self.db.get_column_family(name)
        self._dirty: set[int] = set()
        self._flushed_meta: dict[bytes, int] = {}

    def _open_db(self) -> Rdict:
        if self.db is None:
            raise IllegalStateError(f"RocksDB store at {self.path} is closed")
        return self.db

    def segment_id(self, timestamp: int) -> int:
        return timestamp // self.interval_ms

    def get(self, segment_id: int) -> Rdict | None:
        """The segment's column family, or None when it holds nothing."""
        return self._by_id.get(segment_id)

    def get_or_create(self, segment_id: int) -> Rdict:
        """The segment's column family, created when missing; marks it written."""
        segment = self._by_id.get(segment_id)
        if segment is None:
            name = f"{_SEGMENT_PREFIX}{segment_id * self.interval_ms}"
            segment = self._by_id[segment_id] = self._open_db().create_column_family(name, _options())
        self._dirty.add(segment_id)
        return segment

    def between(self, first_id: int, last_id: int) -> list[tuple[int, Rdict]]:
        """Existing segments with ``first_id <= id <= last_id``, oldest first."""
        return sorted((i, s) for i, s in list(self._by_id.items()) if first_id <= i <= last_id)

    def all(self) -> list[tuple[int, Rdict]]:
        return sorted(list(self._by_id.items()))

    def drop_before(self, segment_id: int) -> None:
        """Drops every segment older than ``segment_id`` (whole column families: cost is what expires)."""
        for old in [i for i in self._by_id if i < segment_id]:
            del self._by_id[old]
            self._dirty.discard(old)
            self._open_db().drop_column_family(f"{_SEGMENT_PREFIX}{old * self.interval_ms}")

    def read_meta(self, key: bytes, default: int) -> int:
        """A metadata value as last flushed, or ``default``."""
        data = self._open_db().get(key)
        value = default if data is None else int(_TS.unpack(data)[0])
        self._flushed_meta[key] = value
        return value

    def flush(self, meta: dict[bytes, int]) -> None:
        """Writes changed metadata and flushes the memtables written since the last flush (on commit)."""
        db = self._open_db()
        changed = {k: v for k, v in meta.items() if self._flushed_meta.get(k) != v}
        for key, value in changed.items():
            db[key] = _TS.pack(value)
        self._flushed_meta.update(changed)
        for segment_id in self._dirty:
            segment = self._by_id.get(segment_id)
            if segment is not None:
                segment.flush()
        self._dirty.clear()
        if changed:
            db.flush()

    def close(self, meta: dict[bytes, int]) -> None:
        if self.db is None:
            return
        self.flush(meta)
        self._by_id.clear()  # column family handles keep the database (and its lock) alive
        self.db.close()
        self.db = None


class _RocksDBTimeStore:
    """What both RocksDB stores share: the database path, serdes and the metadata kept across restarts."""

    _name: str
    retention_ms: int
    observed_stream_time: int
    context: StateStoreContext | None
    _open: bool

    def _setup(self, retention_ms: int) -> None:
        self.segment_interval_ms = max(retention_ms // 2, _MIN_SEGMENT_INTERVAL_MS)
        self.segments: Segments | None = None
        self.path: Path | None = None
        self._key_serde: Serde = serde_from("string_or_json")
        self._value_serde: Serde = serde_from("json")
        self._timestamped = False
        self._live_from = -(2**63)
        #: reads see start (session end) >= stream time - retention + this (0: Kafka's time-ordered store)
        self.visible_offset = 1

    def use_serdes(self, key_serde: Serde, value_serde: Serde, timestamped: bool) -> None:
        """How keys and values become bytes (the builder's serdes; timestamped = ValueAndTimestamp values)."""
        self._key_serde, self._value_serde, self._timestamped = key_serde, value_serde, timestamped

    @property
    def persistent(self) -> bool:
        return True

    def _open_segments(self, context: StateStoreContext) -> Segments:
        if context.state_dir is None:
            raise IllegalStateError(f"RocksDB store {self._name!r} needs a state_dir")
        self.path = rocksdb_dir(context.state_dir, context.application_id, context.task_id) / self._name
        self.segments = Segments(self.path, self.segment_interval_ms)
        self.observed_stream_time = self.segments.read_meta(_META_STREAM_TIME, -1)
        self._live_from = -(2**63)
        self._drop_expired()
        return self.segments

    def _db(self) -> Segments:
        if self.segments is None:
            raise IllegalStateError(f"RocksDB store {self._name!r} is not open")
        return self.segments

    def _restore_without_changelog(self, batch: list[tuple[Any, ...]]) -> None:
        raise IllegalStateError(f"store {self._name!r} has logging disabled: there is no changelog to restore")

    def _key(self, key: Any) -> bytes:
        data = self._key_serde.serialize(self._name, key)
        if data is None:
            raise ValueError(f"store {self._name!r}: keys must not be None")
        return data

    def _visible_from(self) -> int:
        """The oldest window start (session end) reads return."""
        return self.observed_stream_time - self.retention_ms + self.visible_offset

    def _live(self, timestamp: int) -> bool:
        """Whether the segment of ``timestamp`` is live (Kafka: not older than the one of stream time -
        retention): a put there is kept, though reads may no longer see it."""
        return timestamp // self.segment_interval_ms >= (self.observed_stream_time - self.retention_ms) // (
            self.segment_interval_ms
        )

    def _drop_expired(self) -> None:
        """Drops the segments older than the one of stream time - retention (only when that moves)."""
        live_from = (self.observed_stream_time - self.retention_ms) // self.segment_interval_ms
        if live_from > self._live_from:
            self._live_from = live_from
            self._db().drop_before(live_from)

    def _meta(self) -> dict[bytes, int]:
        return {_META_STREAM_TIME: self.observed_stream_time}

    def flush(self) -> None:
        if self.segments is not None:
            self.segments.flush(self._meta())

    def close(self) -> None:
        if self.segments is not None:
            self.segments.close(self._meta())
            self.segments = None
        self._open = False

    def _count(self, suffix: int) -> int:
        """Entries not yet past retention, counted (RocksDB's estimate counts overwrites twice)."""
        limit = self.observed_stream_time - self.retention_ms
        total = 0
        for _, segment in self._db().all():
            keys = cast(Iterator[bytes], segment.keys())
            for raw in keys:
                if _TS.unpack_from(raw, len(raw) - suffix)[0] > limit:
                    total += 1
        return total


class RocksDBWindowStore(_RocksDBTimeStore, WindowStore):
    """A persistent window store; ``use_serdes`` is called by the builder before ``init``."""

    def __init__(self, name: str, retention_ms: int, window_size_ms: int, retain_duplicates: bool = False) -> None:
        WindowStore.__init__(self, name, retention_ms)
        self._setup(retention_ms)
        self.window_size_ms = window_size_ms
        self.retain_duplicates = retain_duplicates
        self.seq = 0
        #: bytes after the serialized key: window start (+ sequence number)
        self._suffix = 12 if retain_duplicates else 8

    def init(self, context: StateStoreContext, root: StateStore | None = None) -> None:
        segments = self._open_segments(context)
        self.seq = segments.read_meta(_META_SEQ, 0)
        self.context = context
        self._open = True
        context.register(root if root is not None else self, self._restore_without_changelog, None)

    def _meta(self) -> dict[bytes, int]:
        return {_META_STREAM_TIME: self.observed_stream_time, _META_SEQ: self.seq}

    def _encode(self, value: Any) -> bytes:
        return encode_value(self._value_serde, self._name, value, self._timestamped)

    def _decode(self, data: bytes) -> Any:
        return decode_value(self._value_serde, self._name, data, self._timestamped)

    def put(self, key: Any, value: Any, window_start: int) -> None:
        self._observe(window_start)
        if not self._live(window_start):
            return
        segments = self._db()
        raw = self._key(key) + _TS.pack(window_start)
        segment_id = segments.segment_id(window_start)
        if value is None:
            if not self.retain_duplicates:
                segment = segments.get(segment_id)
                if segment is not None:
                    del segment[raw]
        else:
            if self.retain_duplicates:
                self.seq = (self.seq + 1) & 0x7FFFFFFF
                raw += _SEQ.pack(self.seq)
            segments.get_or_create(segment_id)[raw] = self._encode(value)
        self._drop_expired()

    def restore_raw(self, batch: list[tuple[Any, ...]]) -> None:
        """Applies changelog records ``(key bytes, value bytes, timestamp)`` as they are (no decoding)."""
        segments = self._db()
        suffix = self._suffix
        for raw, data, *rest in batch:
            if raw is None:
                continue
            start = _TS.unpack_from(raw, len(raw) - suffix)[0]
            self._observe(start)
            if not self._live(start):
                continue
            segment_id = segments.segment_id(start)
            if data is None:
                segment = segments.get(segment_id)
                if segment is not None and not self.retain_duplicates:
                    del segment[raw]
                continue
            if self.retain_duplicates:
                self.seq = max(self.seq, _SEQ.unpack_from(raw, len(raw) - 4)[0])
            segments.get_or_create(segment_id)[raw] = _TS.pack(rest[0]) + data if self._timestamped else data
        self._drop_expired()

    def _scan(self, raw_key: bytes, time_from: int, time_to: int) -> Iterator[tuple[int, bytes]]:
        """(window start, value bytes) of one key with start in [time_from, time_to], by start then seq."""
        time_from = max(time_from, self._visible_from())
        if time_from > time_to:
            return
        segments = self._db()
        size = len(raw_key) + self._suffix
        interval = self.segment_interval_ms
        tail = b"\xff\xff\xff\xff" if self.retain_duplicates else b""
        for segment_id, segment in segments.between(segments.segment_id(time_from), segments.segment_id(time_to)):
            low = max(time_from, segment_id * interval)
            high = raw_key + _TS.pack(min(time_to, (segment_id + 1) * interval - 1)) + tail
            for raw, data in _items(segment, raw_key + _TS.pack(low)):
                if raw > high:
                    break
                if len(raw) == size:  # else a longer key that starts with these bytes
                    yield _TS.unpack_from(raw, len(raw_key))[0], data

    def fetch(self, key: Any, window_start: int) -> Any:
        if self.retain_duplicates:
            values = [self._decode(d) for _, d in self._scan(self._key(key), window_start, window_start)]
            return values or None
        if window_start < self._visible_from():
            return None
        segments = self._db()
        segment = segments.get(segments.segment_id(window_start))
        data = None if segment is None else segment.get(self._key(key) + _TS.pack(window_start))
        return None if data is None else self._decode(data)

    def fetch_range(self, key: Any, time_from: int, time_to: int) -> list[tuple[int, Any]]:
        return [(start, self._decode(data)) for start, data in self._scan(self._key(key), time_from, time_to)]

    def fetch_all(self, time_from: int | None = None, time_to: int | None = None) -> list[tuple[Any, int, Any]]:
        """(key, window start, value) in the range, by key (natural order, as in memory) then start."""
        low = self._visible_from()
        if time_from is not None:
            low = max(low, time_from)
        segments = self._db()
        chosen = segments.all() if time_to is None else segments.between(-(2**62), segments.segment_id(time_to))
        suffix = self._suffix
        by_key: dict[bytes, list[tuple[int, int, bytes]]] = {}
        for segment_id, segment in chosen:
            if (segment_id + 1) * self.segment_interval_ms - 1 < low:
                continue
            for raw, data in _items(segment):
                start = _TS.unpack_from(raw, len(raw) - suffix)[0]
                if start >= low and (time_to is None or start <= time_to):
                    seq = _SEQ.unpack_from(raw, len(raw) - 4)[0] if self.retain_duplicates else 0
                    by_key.setdefault(raw[: len(raw) - suffix], []).append((start, seq, data))
        keys = sort_entries([KeyValue(self._key_serde.deserialize(self._name, k), k) for k in by_key])
        out: list[tuple[Any, int, Any]] = []
        for key, raw_key in keys:
            out.extend((key, start, self._decode(data)) for start, _, data in sorted(by_key[raw_key]))
        return out

    def approximate_num_entries(self) -> int:
        return self._count(self._suffix)

    def __repr__(self) -> str:
        return f"RocksDBWindowStore({self._name!r}, path={self.path})"


class RocksDBSessionStore(_RocksDBTimeStore, SessionStore):
    """A persistent session store; ``use_serdes`` is called by the builder before ``init``."""

    def __init__(self, name: str, retention_ms: int) -> None:
        SessionStore.__init__(self, name, retention_ms)
        self._setup(retention_ms)

    def use_serdes(self, key_serde: Serde, value_serde: Serde, timestamped: bool = False) -> None:
        """How keys and values become bytes; session values are plain aggregates (never timestamped)."""
        self._key_serde, self._value_serde, self._timestamped = key_serde, value_serde, False

    def init(self, context: StateStoreContext, root: StateStore | None = None) -> None:
        self._open_segments(context)
        self.context = context
        self._open = True
        context.register(root if root is not None else self, self._restore_without_changelog, None)

    def _decode(self, data: bytes) -> Any:
        return self._value_serde.deserialize(self._name, data)

    def put(self, key: Any, start: int, end: int, value: Any) -> None:
        self._observe(end)
        segments = self._db()
        raw = self._key(key) + _END_START.pack(end, start)
        segment_id = segments.segment_id(end)
        if value is None:
            segment = segments.get(segment_id)
            if segment is not None:
                del segment[raw]
        elif self._live(end):
            segments.get_or_create(segment_id)[raw] = self._value_serde.serialize(self._name, value) or b""
        self._drop_expired()

    def restore_raw(self, batch: list[tuple[Any, ...]]) -> None:
        """Applies changelog records ``(key bytes, value bytes, ...)`` as they are (no decoding)."""
        segments = self._db()
        for raw, data, *_ in batch:
            if raw is None:
                continue
            end = _TS.unpack_from(raw, len(raw) - 16)[0]
            self._observe(end)
            segment_id = segments.segment_id(end)
            if data is None:
                segment = segments.get(segment_id)
                if segment is not None:
                    del segment[raw]
            elif self._live(end):
                segments.get_or_create(segment_id)[raw] = data
        self._drop_expired()

    def find_sessions(self, key: Any, earliest_end: int, latest_start: int) -> list[tuple[int, int, Any]]:
        raw_key = self._key(key)
        low = max(earliest_end, self._visible_from())
        segments = self._db()
        size = len(raw_key) + 16
        interval = self.segment_interval_ms
        found: list[tuple[int, int, bytes]] = []
        for segment_id, segment in segments.between(segments.segment_id(low), 2**62):
            high = raw_key + _TS.pack((segment_id + 1) * interval - 1) + b"\xff" * 8
            for raw, data in _items(segment, raw_key + _TS.pack(max(low, segment_id * interval))):
                if raw > high:
                    break
                if len(raw) == size:  # else a longer key that starts with these bytes
                    end, start = _END_START.unpack_from(raw, len(raw_key))
                    if start <= latest_start:
                        found.append((start, end, data))
        found.sort(key=lambda f: (f[0], f[1]))
        return [(s, e, self._decode(d)) for s, e, d in found]

    def fetch_session(self, key: Any, start: int, end: int) -> Any:
        if end < self._visible_from():
            return None
        segments = self._db()
        segment = segments.get(segments.segment_id(end))
        data = None if segment is None else segment.get(self._key(key) + _END_START.pack(end, start))
        return None if data is None else self._decode(data)

    def all(self) -> list[tuple[Any, int, int, Any]]:
        """(key, start, end, value) of every session, by key (natural order, as in memory) then start."""
        return self._sessions(self._visible_from())

    def all_kept(self) -> list[tuple[Any, int, int, Any]]:
        """Every kept session, also those past the retention (what emit-on-close sessions emit)."""
        return self._sessions(-(2**63))

    def _sessions(self, low: int) -> list[tuple[Any, int, int, Any]]:
        by_key: dict[bytes, list[tuple[int, int, bytes]]] = {}
        for _, segment in self._db().all():
            for raw, data in _items(segment):
                end, start = _END_START.unpack_from(raw, len(raw) - 16)
                if end >= low:
                    by_key.setdefault(raw[: len(raw) - 16], []).append((start, end, data))
        keys = sort_entries([KeyValue(self._key_serde.deserialize(self._name, k), k) for k in by_key])
        out: list[tuple[Any, int, int, Any]] = []
        for key, raw_key in keys:
            out.extend((key, s, e, self._decode(d)) for s, e, d in sorted(by_key[raw_key], key=lambda f: f[:2]))
        return out

    def approximate_num_entries(self) -> int:
        return self._count(16)

    def __repr__(self) -> str:
        return f"RocksDBSessionStore({self._name!r}, path={self.path})"


def persistent_equivalent(store: WindowStore | SessionStore) -> WindowStore | SessionStore:
    """The RocksDB store with the same name, retention and window settings as an in-memory one (for the DSL
    stores of ``kstream_nb.state.dsl_window_store``: their retention, and reads as theirs)."""
    if isinstance(store, DslWindowStore):
        window = RocksDBWindowStore(store.name, store.read_retention_ms, store.window_size_ms)
        window.visible_offset = 0 if store.emit_final else 1
        return window
    if isinstance(store, DslSessionStore):
        return RocksDBSessionStore(store.name, store.read_retention_ms)
    if isinstance(store, InMemoryWindowStore):
        return RocksDBWindowStore(store.name, store.retention_ms, store.window_size_ms, store.retain_duplicates)
    if isinstance(store, InMemorySessionStore):
        return RocksDBSessionStore(store.name, store.retention_ms)
    return store
