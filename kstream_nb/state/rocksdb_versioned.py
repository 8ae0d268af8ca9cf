"""The RocksDB versioned key-value store (Kafka's ``RocksDBVersionedStore``), through ``rocksdict``.

Layout, under ``<state_dir>/<application_id>/<task_id>/rocksdb/<store>``: ``0x00 + key`` holds the latest
version (8-byte big-endian timestamp, then the value's bytes), as Kafka's "latest value store" does, so
``get(key)`` is one lookup; ``0x01 + key`` holds the older versions (and a last tombstone), each as an 8-byte
timestamp, a 4-byte length (-1 for a tombstone) and the value's bytes. Versions that no read can reach any
more are pruned when their key is written, and in a sweep of all keys once per segment interval of stream time
(where Kafka drops whole segments). As in Kafka, the observed stream time is not kept on disk: after a restart
it is rebuilt from the changelog records restored.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rocksdict import Options, Rdict

from kstream_nb.cluster.serdes import Serde, serde_from
from kstream_nb.errors import IllegalStateError
from kstream_nb.state.store import KeyValue, StateStore, StateStoreContext, task_state_dir
from kstream_nb.state.versioned import (
    Version,
    VersionedRecord,
    VersionedStoreBackend,
    prune,
)

_LATEST, _HISTORY = b"\x00", b"\x01"
_TS = struct.Struct(">q")
_ENTRY = struct.Struct(">qi")


def _items(db: Rdict, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
    """The raw entries whose keys start with ``prefix`` (a raw-mode Rdict holds bytes only)."""
    for raw, data in db.items(from_key=prefix):
        assert isinstance(raw, bytes) and isinstance(data, bytes)
        if not raw.startswith(prefix):
            return
        yield raw, data


def encode_history(versions: list[Version]) -> bytes:
    """Versions with bytes values (None = tombstone) as one blob."""
    parts = []
    for timestamp, value in versions:
        parts.append(_ENTRY.pack(timestamp, -1 if value is None else len(value)))
        if value is not None:
            parts.append(value)
    return b"".join(parts)


def decode_history(data: bytes) -> list[Version]:
    """The versions of an ``encode_history`` blob."""
    out: list[Version] = []
    pos, end = 0, len(data)
    while pos < end:
        timestamp, length = _ENTRY.unpack_from(data, pos)
        pos += _ENTRY.size
        if length < 0:
            out.append((timestamp, None))
        else:
            out.append((timestamp, data[pos : pos + length]))
            pos += length
    return out


class RocksDBVersionedKeyValueStore(VersionedStoreBackend):
    """A persistent versioned store; versions are kept as bytes (the builder's serdes, ``use_serdes``)."""

    persistent = True

    def __init__(self, name: str, history_retention_ms: int, segment_interval_ms: int) -> None:
        super().__init__(name, history_retention_ms, segment_interval_ms)
        self._db: Rdict | None = None
        self._key_serde: Serde = serde_from("json")
        self._value_serde: Serde = serde_from("json")
        self.path: Path | None = None

    def use_serdes(self, key_serde: Serde, value_serde: Serde) -> None:
        """How keys and values become bytes (set by the store builder before ``init``)."""
        self._key_serde, self._value_serde = key_serde, value_serde

    @property
    def is_open(self) -> bool:
        return self._db is not None

    def init(self, context: StateStoreContext, root: StateStore | None = None) -> None:
        if context.state_dir is None:
            raise IllegalStateError(f"RocksDB store {self._name!r} needs a state_dir")
        self._context = context
        self.path = (
            task_state_dir(context.state_dir, context.application_id, context.task_id) / "rocksdb" / self._name
        )
        self.path.parent.mkdir(parents=True, exist_ok=True)
        options = Options(raw_mode=True)
        options.create_if_missing(True)
        self._db = Rdict(str(self.path), options=options)
        context.register(root if root is not None else self, self._restore_without_changelog, None)

    def _restore_without_changelog(self, batch: list[tuple[Any, ...]]) -> None:
        raise IllegalStateError(f"store {self._name!r} has logging disabled: there is no changelog to restore")

    def _open_db(self) -> Rdict:
        if self._db is None:
            raise IllegalStateError(f"RocksDB store {self._name!r} is not open")
        return self._db

    def _key(self, key: Any) -> bytes:
        data = self._key_serde.serialize(self._name, key)
        if data is None:
            raise ValueError(f"store {self._name!r}: keys must not be None")
        return data

    def _value(self, data: bytes) -> Any:
        return self._value_serde.deserialize(self._name, data)

    # ---- the version list of a key, with bytes values ------------------------------------------

    def _put(self, key: Any, value: Any, timestamp: int, count_expired: bool) -> int:
        raw = None if value is None else (self._value_serde.serialize(self._name, value) or b"")
        return super()._put(key, raw, timestamp, count_expired)

    def _load(self, key: Any) -> list[Version]:
        db, raw = self._open_db(), self._key(key)
        history = db.get(_HISTORY + raw)
        versions = [] if history is None else decode_history(history)
        latest = db.get(_LATEST + raw)
        if latest is not None:
            versions.append((_TS.unpack_from(latest)[0], latest[_TS.size :]))
        return versions

    def _save(self, key: Any, versions: list[Version]) -> None:
        db, raw = self._open_db(), self._key(key)
        if versions and versions[-1][1] is not None:
            timestamp, value = versions[-1]
            db[_LATEST + raw] = _TS.pack(timestamp) + value
            older = versions[:-1]
        else:
            if db.get(_LATEST + raw) is not None:
                del db[_LATEST + raw]
            older = versions
        if older:
            db[_HISTORY + raw] = encode_history(older)
        elif db.get(_HISTORY + raw) is not None:
            del db[_HISTORY + raw]

    def get(self, key: Any, as_of_timestamp: int | None = None) -> VersionedRecord | None:
        found = super().get(key, as_of_timestamp)
        return None if found is None else found._replace(value=self._value(found.value))

    def _latest(self, key: Any) -> VersionedRecord | None:
        latest = self._open_db().get(_LATEST + self._key(key))
        if latest is None:
            return None
        return VersionedRecord(latest[_TS.size :], _TS.unpack_from(latest)[0])

    def _sweep(self, horizon: int) -> None:
        db = self._open_db()
        for raw, data in list(_items(db, _HISTORY)):
            versions = decode_history(data)
            older = len(versions)
            latest = db.get(_LATEST + raw[1:])
            if latest is not None:  # the latest version's timestamp ends the last older version
                versions.append((_TS.unpack_from(latest)[0], latest[_TS.size :]))
            prune(versions, horizon)
            if latest is not None:
                versions.pop()
            if not versions:
                del db[raw]
            elif len(versions) != older:
                db[raw] = encode_history(versions)

    def _latest_entries(self) -> list[KeyValue]:
        db = self._open_db()
        out = []
        for raw, data in _items(db, _LATEST):
            record = VersionedRecord(self._value(data[_TS.size :]), _TS.unpack_from(data)[0])
            out.append(KeyValue(self._key_serde.deserialize(self._name, raw[1:]), record))
        return out

    def flush(self) -> None:
        if self._db is not None:
            self._db.flush()

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    def __repr__(self) -> str:
        return f"RocksDBVersionedKeyValueStore({self._name!r}, path={self.path})"
