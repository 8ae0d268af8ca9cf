"""The RocksDB key-value store (through ``rocksdict``), under ``<state_dir>/<application_id>/<task_id>/rocksdb/``.

Keys and values are stored as bytes with the store's serdes, so scans follow RocksDB's byte order (as
in Kafka Streams). Timestamped stores keep Kafka's value layout: 8-byte big-endian timestamp, then the
value. The data survives restarts: with the task's checkpoint, only the changelog's tail is replayed.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from rocksdict import Options, Rdict

from kstream_nb.cluster.serde_specs import serde_from
from kstream_nb.cluster.serdes import Serde
from kstream_nb.errors import IllegalStateError
from kstream_nb.state.store import (
    KeyValue,
    KeyValueStore,
    StateStore,
    StateStoreContext,
    ValueAndTimestamp,
    rocksdb_dir,
)

_TS = struct.Struct(">q")


def encode_value(serde: Serde, store: str, value: Any, timestamped: bool) -> bytes:
    """A stored value's bytes: with ``timestamped``, Kafka's layout (8-byte big-endian timestamp, value)."""
    if timestamped:
        return _TS.pack(value.timestamp) + (serde.serialize(store, value.value) or b"")
    return serde.serialize(store, value) or b""


def decode_value(serde: Serde, store: str, data: bytes, timestamped: bool) -> Any:
    """The value of stored bytes (a ``ValueAndTimestamp`` with ``timestamped``)."""
    if timestamped:
        return ValueAndTimestamp(serde.deserialize(store, data[8:]), _TS.unpack_from(data)[0])
    return serde.deserialize(store, data)


class RocksDBStore:
    """What the RocksDB key-value and versioned stores share: one database under the task's state directory,
    opened by ``init``; keys and values as bytes through the serdes the builder gives (``use_serdes``)."""

    _name: str

    def _setup_db(self) -> None:
        self._db: Rdict | None = None
        self._key_serde: Serde = serde_from("string_or_json")
        self._value_serde: Serde = serde_from("json")
        self.path: Path | None = None

    @property
    def is_open(self) -> bool:
        return self._db is not None

    def _open_database(self, context: StateStoreContext, root: StateStore) -> None:
        """Opens (creates) the database and registers ``root`` (restored only through a changelog layer)."""
        if context.state_dir is None:
            raise IllegalStateError(f"RocksDB store {self._name!r} needs a state_dir")
        self.path = rocksdb_dir(context.state_dir, context.application_id, context.task_id) / self._name
        options = Options(raw_mode=True)
        options.create_if_missing(True)
        self._db = Rdict(str(self.path), options=options)
        context.register(root, self._restore_without_changelog, None)

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

    def flush(self) -> None:
        if self._db is not None:
            self._db.flush()

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None


class RocksDBKeyValueStore(RocksDBStore, KeyValueStore):
    """A persistent key-value store; ``use_serdes`` must be called (by the builder) before ``init``."""

    persistent = True

    def __init__(self, name: str) -> None:
        self._name = name
        self._setup_db()
        self._timestamped = False

    def use_serdes(self, key_serde: Serde, value_serde: Serde, timestamped: bool) -> None:
        """How keys and values become bytes (the builder's serdes; timestamped = ValueAndTimestamp values)."""
        self._key_serde, self._value_serde, self._timestamped = key_serde, value_serde, timestamped

    @property
    def name(self) -> str:
        return self._name

    def init(self, context: StateStoreContext, root: StateStore | None = None) -> None:
        self._open_database(context, root if root is not None else self)

    def _encode(self, value: Any) -> bytes:
        return encode_value(self._value_serde, self._name, value, self._timestamped)

    def _decode(self, data: bytes) -> Any:
        return decode_value(self._value_serde, self._name, data, self._timestamped)

    def get(self, key: Any) -> Any:
        data = self._open_db().get(self._key(key))
        return None if data is None else self._decode(data)

    def put(self, key: Any, value: Any) -> None:
        if value is None:
            self.delete(key)
        else:
            self._open_db()[self._key(key)] = self._encode(value)

    def put_all(self, entries: Iterable[tuple[Any, Any]]) -> None:
        for key, value in entries:
            self.put(key, value)

    def delete(self, key: Any) -> Any:
        db = self._open_db()
        raw = self._key(key)
        old = db.get(raw)
        if old is not None:
            del db[raw]
        return None if old is None else self._decode(old)

    def _scan(self, from_key: Any, to_key: Any) -> list[KeyValue]:
        db = self._open_db()
        start = None if from_key is None else self._key(from_key)
        end = None if to_key is None else self._key(to_key)
        out = []
        items = db.items() if start is None else db.items(from_key=start)
        for k, v in items:
            assert isinstance(k, bytes) and isinstance(v, bytes)
            if end is not None and k > end:
                break
            out.append(KeyValue(self._key_serde.deserialize(self._name, k), self._decode(v)))
        return out

    def range(self, from_key: Any = None, to_key: Any = None) -> list[KeyValue]:
        """Entries with key bytes in [from_key, to_key] (RocksDB's byte order)."""
        return self._scan(from_key, to_key)

    def reverse_range(self, from_key: Any = None, to_key: Any = None) -> list[KeyValue]:
        return list(reversed(self._scan(from_key, to_key)))

    def approximate_num_entries(self) -> int:
        """RocksDB's estimate of the number of keys."""
        return int(self._open_db().property_int_value("rocksdb.estimate-num-keys") or 0)

    def __repr__(self) -> str:
        return f"RocksDBKeyValueStore({self._name!r}, path={self.path})"
