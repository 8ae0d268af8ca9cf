"""The RocksDB versioned key-value store (Kafka's ``RocksDBVersionedStore``), through ``rocksdict``.

Layout, under ``<state_dir>/<application_id>/<task_id>/rocksdb/<store>``: ``0x00 + key`` holds the latest
version (8-byte big-endian timestamp, then the value's bytes), as Kafka's "latest value store" does, so
``get(key)`` is one lookup; ``0x01 + key`` holds the key's rows of older versions (``versioned_rows``): per
row its segment id, next timestamp and versions (8-byte timestamp, 4-byte length or -1 for a tombstone, bytes).
Rows of expired segments are dropped from every key when the oldest live segment moves on. As in Kafka, the
observed stream time is not kept on disk: after a restart it is rebuilt from the changelog records restored.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Any

from rocksdict import Rdict

from kstream_nb.cluster.serdes import Serde
from kstream_nb.state.rocksdb import RocksDBStore
from kstream_nb.state.store import KeyValue, StateStore, StateStoreContext
from kstream_nb.state.versioned import VersionedStoreBackend
from kstream_nb.state.versioned_rows import KeyVersions, Row, VersionedRecord

_LATEST, _ROWS = b"\x00", b"\x01"
_TS = struct.Struct(">q")
_ROW = struct.Struct(">qqi")
_VERSION = struct.Struct(">qi")


def _items(db: Rdict, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
    """The raw entries whose keys start with ``prefix`` (a raw-mode Rdict holds bytes only)."""
    for raw, data in db.items(from_key=prefix):
        assert isinstance(raw, bytes) and isinstance(data, bytes)
        if not raw.startswith(prefix):
            return
        yield raw, data


def encode_rows(rows: dict[int, Row]) -> bytes:
    """A key's rows (versions with bytes values, None = tombstone) as one blob."""
    parts = []
    for sid, row in sorted(rows.items()):
        parts.append(_ROW.pack(sid, row.next_ts, len(row.versions)))
        for timestamp, value in row.versions:
            parts.append(_VERSION.pack(timestamp, -1 if value is None else len(value)))
            if value is not None:
                parts.append(value)
    return b"".join(parts)


def decode_rows(data: bytes) -> dict[int, Row]:
    """The rows of an ``encode_rows`` blob."""
    rows: dict[int, Row] = {}
    pos, end = 0, len(data)
    while pos < end:
        sid, next_ts, count = _ROW.unpack_from(data, pos)
        pos += _ROW.size
        versions: list[tuple[int, Any]] = []
        for _ in range(count):
            timestamp, length = _VERSION.unpack_from(data, pos)
            pos += _VERSION.size
            if length < 0:
                versions.append((timestamp, None))
            else:
                versions.append((timestamp, data[pos : pos + length]))
                pos += length
        row = Row(None, 0, next_ts)
        row.versions = versions
        rows[sid] = row
    return rows


class RocksDBVersionedKeyValueStore(RocksDBStore, VersionedStoreBackend):
    """A persistent versioned store; versions are kept as bytes (the builder's serdes, ``use_serdes``)."""

    persistent = True

    def __init__(self, name: str, history_retention_ms: int, segment_interval_ms: int) -> None:
        super().__init__(name, history_retention_ms, segment_interval_ms)
        self._setup_db()

    def use_serdes(self, key_serde: Serde, value_serde: Serde) -> None:
        """How keys and values become bytes (set by the store builder before ``init``)."""
        self._key_serde, self._value_serde = key_serde, value_serde

    def init(self, context: StateStoreContext, root: StateStore | None = None) -> None:
        self._context = context
        self._open_database(context, root if root is not None else self)

    def _value(self, data: bytes) -> Any:
        return self._value_serde.deserialize(self._name, data)

    # ---- a key's versions, with bytes values -------------------------------------------------

    def _put(self, key: Any, value: Any, timestamp: int, stream_time: int) -> int:
        raw = None if value is None else (self._value_serde.serialize(self._name, value) or b"")
        return super()._put(key, raw, timestamp, stream_time)

    def _load(self, key: Any) -> KeyVersions:
        db, raw = self._open_db(), self._key(key)
        latest = db.get(_LATEST + raw)
        rows = db.get(_ROWS + raw)
        return KeyVersions(
            None if latest is None else (_TS.unpack_from(latest)[0], latest[_TS.size :]),
            None if rows is None else decode_rows(rows),
        )

    def _save(self, key: Any, versions: KeyVersions) -> None:
        self._write(self._key(key), versions)

    def _write(self, raw: bytes, versions: KeyVersions) -> None:
        db = self._open_db()
        if versions.latest is not None:
            db[_LATEST + raw] = _TS.pack(versions.latest[0]) + versions.latest[1]
        elif db.get(_LATEST + raw) is not None:
            del db[_LATEST + raw]
        if versions.rows:
            db[_ROWS + raw] = encode_rows(versions.rows)
        elif db.get(_ROWS + raw) is not None:
            del db[_ROWS + raw]

    def get(self, key: Any, as_of_timestamp: int | None = None) -> VersionedRecord | None:
        found = super().get(key, as_of_timestamp)
        return None if found is None else found._replace(value=self._value(found.value))

    def _latest(self, key: Any) -> VersionedRecord | None:
        latest = self._open_db().get(_LATEST + self._key(key))
        if latest is None:
            return None
        return VersionedRecord(latest[_TS.size :], _TS.unpack_from(latest)[0])

    def _expire(self, min_live_segment: int) -> None:
        db = self._open_db()
        for raw, data in list(_items(db, _ROWS)):
            rows = decode_rows(data)
            if any(sid < min_live_segment for sid in rows):
                kept = {sid: row for sid, row in rows.items() if sid >= min_live_segment}
                if kept:
                    db[raw] = encode_rows(kept)
                else:
                    del db[raw]

    def _latest_entries(self) -> list[KeyValue]:
        db = self._open_db()
        out = []
        for raw, data in _items(db, _LATEST):
            record = VersionedRecord(self._value(data[_TS.size :]), _TS.unpack_from(data)[0])
            out.append(KeyValue(self._key_serde.deserialize(self._name, raw[1:]), record))
        return out

    def __repr__(self) -> str:
        return f"RocksDBVersionedKeyValueStore({self._name!r}, path={self.path})"
