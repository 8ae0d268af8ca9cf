"""Versioned key-value stores (Kafka Streams' KIP-889): every version of a key within a history retention.

Each key has versions ``(valid_from, value)`` in timestamp order; a version is valid from its timestamp up to the
next version's (a None value is a tombstone: the key has no value from then on). As in Kafka's
``RocksDBVersionedStore``:

* ``put(key, value, timestamp)`` returns the new version's ``valid_to`` (the next version's timestamp) or
  ``PUT_RETURN_CODE_VALID_TO_UNDEFINED`` when it is the latest; a write older than the observed stream time
  minus the history retention (which doubles as the grace period) is not put: ``PUT_RETURN_CODE_NOT_PUT``, and
  it counts as a dropped record; a write at the timestamp of an existing version replaces that version.
* ``get(key)`` is the latest version; ``get(key, as_of)`` the version valid at ``as_of``. When ``as_of`` is
  older than the observed stream time minus the history retention, only the latest version is answered (if it
  is valid at ``as_of``), never older history, even when it is still held.
* the observed stream time is the largest timestamp put (restores replay it from the changelog).

The version-list rules are shared by the in-memory backend here and the RocksDB one (``rocksdb_versioned``).
"""

from __future__ import annotations

from abc import abstractmethod
from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from operator import itemgetter
from typing import TYPE_CHECKING, Any, NamedTuple

from kstream_nb.errors import IllegalStateError
from kstream_nb.state.store import KeyValue, StateStore, StateStoreContext, sort_keys

if TYPE_CHECKING:
    import pandas as pd

#: ``put`` return code: the new version is the latest (it has no ``valid_to``)
PUT_RETURN_CODE_VALID_TO_UNDEFINED = -1
#: ``put`` return code: the write was older than the grace period (history retention) and was not put
PUT_RETURN_CODE_NOT_PUT = -(2**63)
#: Kafka's ``ConsumerRecord.NO_TIMESTAMP``: the observed stream time before the first write
NO_TIMESTAMP = -1

#: one version of a key: (valid_from timestamp, value or None for a tombstone)
Version = tuple[int, Any]
_valid_from = itemgetter(0)


class VersionedRecord(NamedTuple):
    """One version of a key: its value, the timestamp it is valid from and, unless it is the latest, the
    timestamp it is valid to (exclusive)."""

    value: Any
    timestamp: int
    valid_to: int | None = None


def put_version(versions: list[Version], timestamp: int, value: Any) -> int:
    """Inserts (or replaces, at an equal timestamp) a version; returns its valid_to or VALID_TO_UNDEFINED."""
    i = bisect_left(versions, timestamp, key=_valid_from)
    if i < len(versions) and versions[i][0] == timestamp:
        versions[i] = (timestamp, value)
    else:
        versions.insert(i, (timestamp, value))
    return versions[i + 1][0] if i + 1 < len(versions) else PUT_RETURN_CODE_VALID_TO_UNDEFINED


def version_as_of(versions: list[Version], as_of: int) -> VersionedRecord | None:
    """The version valid at ``as_of`` (None before the first version or under a tombstone)."""
    i = bisect_right(versions, as_of, key=_valid_from) - 1
    if i < 0:
        return None
    timestamp, value = versions[i]
    if value is None:
        return None
    return VersionedRecord(value, timestamp, versions[i + 1][0] if i + 1 < len(versions) else None)


def latest_version(versions: list[Version]) -> VersionedRecord | None:
    """The latest version, None when there is none or it is a tombstone."""
    if not versions or versions[-1][1] is None:
        return None
    timestamp, value = versions[-1]
    return VersionedRecord(value, timestamp)


def prune(versions: list[Version], horizon: int) -> bool:
    """Drops the versions no read or write can reach any more: those valid only before ``horizon`` (stream time
    minus history retention), and a last tombstone at or before it. Returns True when nothing is left."""
    i = 0
    while i + 1 < len(versions) and versions[i + 1][0] <= horizon:
        i += 1
    if i:
        del versions[:i]
    if len(versions) == 1 and versions[0][1] is None and versions[0][0] <= horizon:
        versions.clear()
    return not versions


class VersionedKeyValueStore(StateStore):
    """Kafka's ``VersionedKeyValueStore``: ``put``/``delete`` at a timestamp, ``get`` latest or as of a time.

    Reads of every key's latest version (``all``, ``range``, ``to_pandas``) serve interactive queries.
    """

    #: what processors test to take the versioned paths (Kafka's ``KeyValueStoreWrapper``)
    versioned = True
    history_retention_ms: int

    @abstractmethod
    def put(self, key: Any, value: Any, timestamp: int) -> int:
        """Adds a version (a None value deletes); returns its valid_to, VALID_TO_UNDEFINED or NOT_PUT."""

    @abstractmethod
    def delete(self, key: Any, timestamp: int) -> VersionedRecord | None:
        """Adds a tombstone at ``timestamp``; returns the version it replaced as of then (None if expired)."""

    @abstractmethod
    def get(self, key: Any, as_of_timestamp: int | None = None) -> VersionedRecord | None:
        """The latest version of ``key``, or the version valid at ``as_of_timestamp``."""

    @abstractmethod
    def restore_put(self, key: Any, value: Any, timestamp: int) -> None:
        """Applies one changelog record (as ``put``, without counting expired writes)."""

    @abstractmethod
    def all(self) -> list[KeyValue]:
        """Every key's latest version as ``KeyValue(key, VersionedRecord)``, in key order."""

    def range(self, from_key: Any = None, to_key: Any = None) -> list[KeyValue]:
        """Latest versions of the keys in ``[from_key, to_key]`` (None bounds are open)."""
        return [
            kv
            for kv in self.all()
            if (from_key is None or not kv.key < from_key) and (to_key is None or not to_key < kv.key)
        ]

    def approximate_num_entries(self) -> int:
        """How many keys have a latest version."""
        return len(self.all())

    def to_pandas(self) -> pd.DataFrame:
        """Latest versions as a DataFrame: ``key``, ``value``, ``timestamp``."""
        import pandas as pd

        rows = [(kv.key, kv.value.value, kv.value.timestamp) for kv in self.all()]
        return pd.DataFrame(rows, columns=["key", "value", "timestamp"])

    def __iter__(self) -> Iterator[KeyValue]:
        return iter(self.all())

    def __len__(self) -> int:
        return self.approximate_num_entries()


def is_versioned(store: Any) -> bool:
    """Whether ``store`` (any layer of a stack) is a versioned key-value store."""
    return getattr(store, "versioned", False) is True


class VersionedStoreBackend(VersionedKeyValueStore):
    """The rules of a versioned store over a backend that keeps each key's version list (``_load``/``_save``)."""

    def __init__(self, name: str, history_retention_ms: int, segment_interval_ms: int) -> None:
        self._name = name
        self.history_retention_ms = history_retention_ms
        self.segment_interval_ms = max(1, segment_interval_ms)
        #: the largest timestamp written (Kafka's observedStreamTime), NO_TIMESTAMP before any write
        self.observed_stream_time = NO_TIMESTAMP
        self._context: StateStoreContext | None = None
        self._swept_segment = NO_TIMESTAMP

    @property
    def name(self) -> str:
        return self._name

    @property
    def grace_period_ms(self) -> int:
        """How far behind the observed stream time a write is still accepted (= the history retention)."""
        return self.history_retention_ms

    # ---- what a backend provides ---------------------------------------------------------------

    @abstractmethod
    def _load(self, key: Any) -> list[Version]:
        """The key's versions in timestamp order (a list the caller may change and ``_save``)."""

    @abstractmethod
    def _save(self, key: Any, versions: list[Version]) -> None:
        """Stores the key's versions (an empty list removes the key)."""

    @abstractmethod
    def _latest(self, key: Any) -> VersionedRecord | None:
        """The key's latest version (fast path of ``get(key)``)."""

    @abstractmethod
    def _sweep(self, horizon: int) -> None:
        """Prunes every key's versions (called once per segment interval of stream time)."""

    @abstractmethod
    def _latest_entries(self) -> list[KeyValue]:
        """Every key with a latest version: ``KeyValue(key, VersionedRecord)`` in key order."""

    # ---- Kafka's VersionedKeyValueStore --------------------------------------------------------

    def put(self, key: Any, value: Any, timestamp: int) -> int:
        """Adds a version (a None value deletes); returns its valid_to, VALID_TO_UNDEFINED or NOT_PUT."""
        return self._put(key, value, timestamp, count_expired=True)

    def delete(self, key: Any, timestamp: int) -> VersionedRecord | None:
        """Adds a tombstone at ``timestamp``; returns the version it replaced as of then (None if expired)."""
        self._check_key(key)
        if timestamp < self.observed_stream_time - self.grace_period_ms:
            self._expired("delete", key, timestamp)
            return None
        existing = self.get(key, timestamp)
        self._put(key, None, timestamp, count_expired=True)
        return existing

    def get(self, key: Any, as_of_timestamp: int | None = None) -> VersionedRecord | None:
        """The latest version of ``key``, or the version valid at ``as_of_timestamp``."""
        self._check_key(key)
        if as_of_timestamp is None:
            return self._latest(key)
        if as_of_timestamp < self.observed_stream_time - self.history_retention_ms:
            latest = self._latest(key)  # the latest version never expires; older history reads as expired
            return latest if latest is not None and latest.timestamp <= as_of_timestamp else None
        return version_as_of(self._load(key), as_of_timestamp)

    def restore_put(self, key: Any, value: Any, timestamp: int) -> None:
        """Applies one changelog record (as ``put``, without counting expired writes)."""
        self._put(key, value, timestamp, count_expired=False)

    def _put(self, key: Any, value: Any, timestamp: int, count_expired: bool) -> int:
        self._check_key(key)
        if timestamp < self.observed_stream_time - self.grace_period_ms:
            if count_expired:
                self._expired("put", key, timestamp)
            return PUT_RETURN_CODE_NOT_PUT
        if timestamp > self.observed_stream_time:
            self.observed_stream_time = timestamp
            segment = timestamp // self.segment_interval_ms
            if segment != self._swept_segment:
                self._swept_segment = segment
                self._sweep(timestamp - self.history_retention_ms)
        versions = self._load(key)
        code = put_version(versions, timestamp, value)
        prune(versions, self.observed_stream_time - self.history_retention_ms)
        self._save(key, versions)
        return code

    def _check_key(self, key: Any) -> None:
        if key is None:
            raise ValueError(f"versioned store {self._name!r}: keys cannot be None")

    def _expired(self, operation: str, key: Any, timestamp: int) -> None:
        """A write older than the grace period: counted as a dropped record of the task (as Kafka does)."""
        dropped = getattr(self._context, "record_dropped", None)
        if dropped is not None:
            dropped(
                self._name,
                f"expired {operation} of key {key!r} at {timestamp} in versioned store (stream time "
                f"{self.observed_stream_time}, history retention {self.history_retention_ms} ms)",
            )

    def all(self) -> list[KeyValue]:
        return self._latest_entries()


class InMemoryVersionedKeyValueStore(VersionedStoreBackend):
    """Versions in a dict of lists. Not in Kafka's ``Stores`` (Kafka only has the RocksDB one): kstream_nb's
    in-memory backend, restored in full from the changelog, for the DSL's own versioned stores under
    ``default_dsl_store="in_memory"`` and ``Stores.in_memory_versioned_key_value_store``."""

    persistent = False

    def __init__(self, name: str, history_retention_ms: int, segment_interval_ms: int) -> None:
        super().__init__(name, history_retention_ms, segment_interval_ms)
        self._data: dict[Any, list[Version]] = {}
        self._open = False

    @property
    def is_open(self) -> bool:
        return self._open

    def init(self, context: StateStoreContext, root: StateStore | None = None) -> None:
        self._context = context
        context.register(root if root is not None else self, self._restore_without_changelog, None)
        self._open = True

    def _restore_without_changelog(self, batch: list[tuple[Any, ...]]) -> None:
        raise IllegalStateError(
            f"store {self._name!r} has no changelog (logging disabled), so it cannot be restored"
        )

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self._open = False
        self._data = {}

    def _load(self, key: Any) -> list[Version]:
        return list(self._data.get(key, ()))

    def _save(self, key: Any, versions: list[Version]) -> None:
        if versions:
            self._data[key] = versions
        else:
            self._data.pop(key, None)

    def _latest(self, key: Any) -> VersionedRecord | None:
        versions = self._data.get(key)
        return None if versions is None else latest_version(versions)

    def _sweep(self, horizon: int) -> None:
        for key, versions in list(self._data.items()):
            if prune(versions, horizon):
                del self._data[key]

    def _latest_entries(self) -> list[KeyValue]:
        while True:
            try:
                snapshot = list(self._data.items())  # another thread may be writing: copy, retry if it moved
                break
            except RuntimeError:
                continue
        latest = {key: record for key, versions in snapshot if (record := latest_version(versions)) is not None}
        keys, _ = sort_keys(latest)
        return [KeyValue(key, latest[key]) for key in keys]

    def __repr__(self) -> str:
        return f"InMemoryVersionedKeyValueStore({self._name!r}, keys={len(self._data)})"
