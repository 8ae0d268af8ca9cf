"""Versioned key-value stores (Kafka Streams' KIP-889): every version of a key within a history retention.

As Kafka's ``RocksDBVersionedStore`` (the rules of a key's versions are in ``versioned_rows``):

* ``put(key, value, timestamp)`` returns the new version's ``valid_to`` (the next version's timestamp) or
  ``PUT_RETURN_CODE_VALID_TO_UNDEFINED`` when it is the latest; a write older than the observed stream time
  minus the history retention (which doubles as the grace period) is not put: ``PUT_RETURN_CODE_NOT_PUT``, and
  it counts as a dropped record; a write at the timestamp of an existing version replaces that version.
* ``get(key)`` is the latest version; ``get(key, as_of)`` the version valid at ``as_of``. When ``as_of`` is
  older than the observed stream time minus the history retention, only the latest version is answered (if it
  is valid at ``as_of``), never older history, even when it is still held.
* the observed stream time is the largest timestamp put; a restore replays the changelog in batches, each
  with the stream time it ends at deciding which segments are still live (as Kafka's ``restoreBatch``).
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from kstream_nb.state.store import KeyValue, StateStore, StateStoreContext, StoreBackend, sort_keys
from kstream_nb.state.versioned_rows import (
    PUT_RETURN_CODE_NOT_PUT,
    PUT_RETURN_CODE_VALID_TO_UNDEFINED,
    KeyVersions,
    VersionedRecord,
    segment_id,
)

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "PUT_RETURN_CODE_NOT_PUT",
    "PUT_RETURN_CODE_VALID_TO_UNDEFINED",
    "InMemoryVersionedKeyValueStore",
    "VersionedKeyValueStore",
    "VersionedRecord",
    "VersionedStoreBackend",
    "is_versioned",
]

#: Kafka's ``ConsumerRecord.NO_TIMESTAMP``: the observed stream time before the first write
NO_TIMESTAMP = -1


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
    def restore_batch(self, records: list[tuple[Any, Any, int]]) -> None:
        """Applies changelog records ``(key, value or None, timestamp)`` (as puts, expired ones skipped)."""

    def restore_put(self, key: Any, value: Any, timestamp: int) -> None:
        """Applies one changelog record."""
        self.restore_batch([(key, value, timestamp)])

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
    """Kafka's versioned-store rules over a backend that keeps each key's ``KeyVersions`` (``_load``/``_save``)."""

    def __init__(self, name: str, history_retention_ms: int, segment_interval_ms: int) -> None:
        self._name = name
        self.history_retention_ms = history_retention_ms
        self.segment_interval_ms = max(1, segment_interval_ms)
        #: the largest timestamp written (Kafka's observedStreamTime), NO_TIMESTAMP before any write
        self.observed_stream_time = NO_TIMESTAMP
        self._context: StateStoreContext | None = None
        self._min_live_segment: int | None = None

    @property
    def name(self) -> str:
        return self._name

    @property
    def grace_period_ms(self) -> int:
        """How far behind the observed stream time a write is still accepted (= the history retention)."""
        return self.history_retention_ms

    # ---- what a backend provides ---------------------------------------------------------------

    @abstractmethod
    def _load(self, key: Any) -> KeyVersions:
        """The key's versions (an object the caller may change and ``_save``)."""

    @abstractmethod
    def _save(self, key: Any, versions: KeyVersions) -> None:
        """Stores the key's versions (empty ones remove the key)."""

    @abstractmethod
    def _latest(self, key: Any) -> VersionedRecord | None:
        """The key's latest version (fast path of ``get(key)``)."""

    @abstractmethod
    def _expire(self, min_live_segment: int) -> None:
        """Drops every key's rows of segments older than ``min_live_segment`` (Kafka drops whole segments)."""

    @abstractmethod
    def _latest_entries(self) -> list[KeyValue]:
        """Every key with a latest version: ``KeyValue(key, VersionedRecord)`` in key order."""

    # ---- Kafka's VersionedKeyValueStore --------------------------------------------------------

    def put(self, key: Any, value: Any, timestamp: int) -> int:
        """Adds a version (a None value deletes); returns its valid_to, VALID_TO_UNDEFINED or NOT_PUT."""
        self._check_key(key)
        if timestamp < self.observed_stream_time - self.grace_period_ms:
            self._expired("put", key, timestamp)
            return PUT_RETURN_CODE_NOT_PUT
        self._advance(timestamp)
        return self._put(key, value, timestamp, self.observed_stream_time)

    def delete(self, key: Any, timestamp: int) -> VersionedRecord | None:
        """Adds a tombstone at ``timestamp``; returns the version it replaced as of then (None if expired)."""
        self._check_key(key)
        if timestamp < self.observed_stream_time - self.grace_period_ms:
            self._expired("delete", key, timestamp)
            return None
        existing = self.get(key, timestamp)
        self._advance(timestamp)
        self._put(key, None, timestamp, self.observed_stream_time)
        return existing

    def get(self, key: Any, as_of_timestamp: int | None = None) -> VersionedRecord | None:
        """The latest version of ``key``, or the version valid at ``as_of_timestamp``."""
        self._check_key(key)
        if as_of_timestamp is None:
            return self._latest(key)
        if as_of_timestamp < self.observed_stream_time - self.history_retention_ms:
            latest = self._latest(key)  # the latest version never expires; older history reads as expired
            return latest if latest is not None and latest.timestamp <= as_of_timestamp else None
        return self._load(key).as_of(as_of_timestamp, self.segment_interval_ms)

    def restore_batch(self, records: list[tuple[Any, Any, int]]) -> None:
        """Applies changelog records ``(key, value or None, timestamp)``: each as a put (expired ones skipped,
        not counted), with segment liveness judged by the stream time at the end of the batch (Kafka's
        ``restoreBatch``, which saves work on versions that expire by then)."""
        end_of_batch = max([self.observed_stream_time, *(ts for _, _, ts in records)])
        for key, value, timestamp in records:
            if timestamp < self.observed_stream_time - self.grace_period_ms:
                continue
            self._advance(timestamp)
            self._put(key, value, timestamp, end_of_batch)

    def _advance(self, timestamp: int) -> None:
        if timestamp > self.observed_stream_time:
            self.observed_stream_time = timestamp

    def _put(self, key: Any, value: Any, timestamp: int, stream_time: int) -> int:
        retention, interval = self.history_retention_ms, self.segment_interval_ms
        min_live = segment_id(stream_time - retention, interval)
        if self._min_live_segment is None or min_live > self._min_live_segment:
            self._min_live_segment = min_live
            self._expire(min_live)
        versions = self._load(key)
        code = versions.put(timestamp, value, stream_time, retention, interval)
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


class InMemoryVersionedKeyValueStore(VersionedStoreBackend, StoreBackend):
    """Versions in a dict. Not in Kafka's ``Stores`` (Kafka only has the RocksDB one): kstream_nb's in-memory
    backend (``Stores.in_memory_versioned_key_value_store``), restored in full from the changelog."""

    def __init__(self, name: str, history_retention_ms: int, segment_interval_ms: int) -> None:
        super().__init__(name, history_retention_ms, segment_interval_ms)
        self._data: dict[Any, KeyVersions] = {}
        self._open = False

    def init(self, context: StateStoreContext, root: StateStore | None = None) -> None:
        self._context = context
        context.register(root if root is not None else self, self._restore_without_changelog, None)
        self._open = True

    def close(self) -> None:
        self._open = False
        self._data = {}

    def _load(self, key: Any) -> KeyVersions:
        found = self._data.get(key)
        return KeyVersions() if found is None else found.copy()  # readers on other threads keep a whole one

    def _save(self, key: Any, versions: KeyVersions) -> None:
        if versions:
            self._data[key] = versions
        else:
            self._data.pop(key, None)

    def _latest(self, key: Any) -> VersionedRecord | None:
        versions = self._data.get(key)
        return None if versions is None else versions.latest_record()

    def _expire(self, min_live_segment: int) -> None:
        for key, versions in list(self._data.items()):
            if any(sid < min_live_segment for sid in versions.rows):
                versions = versions.copy()
                versions.expire(min_live_segment)
                self._save(key, versions)

    def _latest_entries(self) -> list[KeyValue]:
        while True:
            try:
                snapshot = list(self._data.items())  # another thread may be writing: copy, retry if it moved
                break
            except RuntimeError:
                continue
        latest = {key: record for key, versions in snapshot if (record := versions.latest_record()) is not None}
        keys, _ = sort_keys(latest)
        return [KeyValue(key, latest[key]) for key in keys]

    def __repr__(self) -> str:
        return f"InMemoryVersionedKeyValueStore({self._name!r}, keys={len(self._data)})"
