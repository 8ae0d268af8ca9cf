"""State store interfaces: what a store is, what the runtime hands it, and what readers may ask of it.

Keys and values are decoded Python objects. Scans return keys in ascending natural Python order; when
the keys of a store are not mutually comparable (say ``1`` and ``"a"``, or dicts), they are ordered by
their JSON encoding (orjson, sorted dict keys) instead, so every store still has one total order.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator
from operator import itemgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

import orjson

from kstream_nb.cluster.windowed_serdes import ValueAndTimestamp as ValueAndTimestamp  # re-exported: state's name
from kstream_nb.errors import IllegalStateError

if TYPE_CHECKING:
    import pandas as pd

#: Applies a batch of changelog records ``(key bytes, value bytes, record timestamp)`` to a store.
RestoreCallback = Callable[[list[tuple[Any, ...]]], None]
#: writes one changelog record: key bytes, value bytes (None: a tombstone), timestamp
ChangelogWriter = Callable[[bytes | None, bytes | None, int], None]
KeyOrder = Callable[[Any], Any]


class KeyValue(NamedTuple):
    """One entry of a key-value store."""

    key: Any
    value: Any


class StateStoreContext(Protocol):
    """What the runtime hands a store at ``init``: where it runs and how it logs and restores changes."""

    application_id: str
    task_id: str
    partition: int
    state_dir: str | None

    def changelog_topic(self, store_name: str) -> str:
        """The store's changelog topic, ``<application_id>-<store>-changelog``."""
        ...

    def changelog_writer(self, topic: str) -> ChangelogWriter:
        """A function writing one change ``(key, value, timestamp)`` (``value`` None = tombstone) to this
        task's partition of the changelog ``topic``; bound once by each change-logging store."""
        ...

    def register(self, store: StateStore, restore: RestoreCallback, changelog_topic: str | None) -> None:
        """Registers a store so the runtime restores, flushes and closes it."""
        ...

    @property
    def timestamp(self) -> int:
        """Timestamp of the record being processed."""
        ...


class DelegatingStoreContext:
    """A ``StateStoreContext`` that passes everything to the task's; store layers override what they change
    for the layers below them (the changelog registration, the timestamp of a cache flush)."""

    def __init__(self, context: StateStoreContext) -> None:
        self._context = context
        self.application_id = context.application_id
        self.task_id = context.task_id
        self.partition = context.partition
        self.state_dir = context.state_dir

    def changelog_topic(self, store_name: str) -> str:
        return self._context.changelog_topic(store_name)

    def changelog_writer(self, topic: str) -> ChangelogWriter:
        return self._context.changelog_writer(topic)

    def register(self, store: StateStore, restore: RestoreCallback, changelog_topic: str | None) -> None:
        self._context.register(store, restore, changelog_topic)

    @property
    def timestamp(self) -> int:
        return self._context.timestamp

    def __getattr__(self, name: str) -> Any:
        return getattr(self._context, name)


def task_state_dir(state_dir: str, application_id: str, task_id: str) -> Path:
    """Where a task keeps its persistent stores and its checkpoint file."""
    return Path(state_dir) / application_id / task_id


#: the format of the keys RocksDB stores keep on disk: 2 since the default key serde writes a ``str`` key as
#: its UTF-8 bytes (it wrote JSON before)
ROCKSDB_FORMAT = 2


def rocksdb_dir(state_dir: str, application_id: str, task_id: str) -> Path:
    """A task's RocksDB directory, created and marked with ``ROCKSDB_FORMAT``."""
    path = task_state_dir(state_dir, application_id, task_id) / "rocksdb"
    path.mkdir(parents=True, exist_ok=True)
    marker = path / ".format"
    if not marker.exists():
        marker.write_text(str(ROCKSDB_FORMAT))
    return path


def rocksdb_format_is_stale(task_dir: Path) -> bool:
    """Whether ``task_dir`` holds RocksDB stores in an older format than ``ROCKSDB_FORMAT``."""
    path = task_dir / "rocksdb"
    if not path.exists():
        return False
    try:
        return int((path / ".format").read_text()) < ROCKSDB_FORMAT
    except (FileNotFoundError, ValueError):
        return True


def json_order(key: Any) -> bytes:
    """The fallback sort key: the key's JSON encoding (total order over any JSON-able key)."""
    return orjson.dumps(key, default=str, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)


def sort_keys(keys: Iterable[Any]) -> tuple[list[Any], KeyOrder | None]:
    """Sorts keys naturally, or by JSON encoding when they do not compare; returns the order used."""
    result = list(keys)
    try:
        result.sort()
        return result, None
    except TypeError:
        result.sort(key=json_order)
        return result, json_order


def sort_entries(entries: list[KeyValue]) -> list[KeyValue]:
    """Sorts entries by key in place (natural order, JSON-encoding fallback) and returns them."""
    try:
        entries.sort(key=itemgetter(0))
    except TypeError:
        entries.sort(key=lambda kv: json_order(kv[0]))
    return entries


class StateStore(ABC):
    """A named piece of task state that the runtime initializes, flushes and closes."""

    @property
    @abstractmethod
    def name(self) -> str:
        """The store's name, unique within a topology."""

    @property
    @abstractmethod
    def persistent(self) -> bool:
        """Whether the store keeps its data on disk (then restore only replays the changelog's tail)."""

    @abstractmethod
    def init(self, context: StateStoreContext, root: StateStore | None = None) -> None:
        """Opens the store for a task; ``root`` is the outermost layer, the one to register."""

    @abstractmethod
    def flush(self) -> None:
        """Makes buffered writes durable (called on commit)."""

    @abstractmethod
    def close(self) -> None:
        """Releases the store; it cannot be used afterwards."""

    @property
    @abstractmethod
    def is_open(self) -> bool:
        """Whether ``init`` ran and ``close`` did not."""


class StoreBackend(StateStore):
    """What the stores that hold the data themselves share (no layer below): their own name and open flag
    (``_name``, ``_open``); in memory with nothing to flush unless a subclass says otherwise (RocksDB)."""

    _name: str
    _open: bool

    @property
    def name(self) -> str:
        return self._name

    @property
    def persistent(self) -> bool:
        return False

    @property
    def is_open(self) -> bool:
        return self._open

    def flush(self) -> None:
        pass

    def _restore_without_changelog(self, batch: list[tuple[Any, ...]]) -> None:
        """What an in-memory store without a change-logging layer registers to restore with: nothing can."""
        raise IllegalStateError(
            f"store {self._name!r} has no changelog (logging disabled), so it cannot be restored"
        )


class ReadOnlyKeyValueStore(ABC):
    """Read access to a key-value store, as interactive queries see it."""

    @abstractmethod
    def get(self, key: Any) -> Any:
        """The value for ``key``, or None."""

    @abstractmethod
    def range(self, from_key: Any = None, to_key: Any = None) -> list[KeyValue]:
        """Entries with ``from_key <= key <= to_key`` in ascending key order; a None bound is open."""

    @abstractmethod
    def reverse_range(self, from_key: Any = None, to_key: Any = None) -> list[KeyValue]:
        """Entries with ``from_key <= key <= to_key`` in descending key order; a None bound is open."""

    def all(self) -> list[KeyValue]:
        """All entries in ascending key order."""
        return self.range()

    def reverse_all(self) -> list[KeyValue]:
        """All entries in descending key order."""
        return self.reverse_range()

    @abstractmethod
    def approximate_num_entries(self) -> int:
        """How many entries the store holds (exact for in-memory stores)."""

    def to_pandas(self, expand: bool = False) -> pd.DataFrame:
        """The entries as a DataFrame with ``key`` and ``value`` columns, sorted by key.

        With ``expand=True`` dict values become one column per field (``pandas.json_normalize``); a
        non-dict value lands in a ``value`` column.
        """
        import pandas as pd

        entries = self.all()
        if not expand:
            return pd.DataFrame(entries, columns=["key", "value"])
        rows = [v if isinstance(v, dict) else {"value": v} for _, v in entries]
        frame = pd.json_normalize(rows) if rows else pd.DataFrame()
        if "key" in frame.columns:
            frame = frame.rename(columns={"key": "value.key"})
        frame.insert(0, "key", [k for k, _ in entries])
        return frame

    def __len__(self) -> int:
        return self.approximate_num_entries()

    def __contains__(self, key: object) -> bool:
        return self.get(key) is not None

    def __iter__(self) -> Iterator[KeyValue]:
        """Iterates entries in key order, so ``dict(store)`` copies the store."""
        return iter(self.all())


class KeyValueStore(ReadOnlyKeyValueStore, StateStore):
    """A read-write key-value store; a None value deletes, as in Kafka Streams."""

    @abstractmethod
    def put(self, key: Any, value: Any) -> None:
        """Sets ``key`` to ``value``; a None value deletes the key."""

    def put_if_absent(self, key: Any, value: Any) -> Any:
        """Puts only when ``key`` has no value; returns the value that was there (None if it was put)."""
        old = self.get(key)
        if old is None:
            self.put(key, value)
        return old

    def put_all(self, entries: Iterable[tuple[Any, Any]]) -> None:
        """Puts every ``(key, value)`` pair in order (None values delete)."""
        for key, value in entries:
            self.put(key, value)

    @abstractmethod
    def delete(self, key: Any) -> Any:
        """Removes ``key``; returns the old value or None."""


class WrappedStateStore(StateStore):
    """A layer over another store (Kafka's ``WrappedStateStore``): name, persistence, opening, flushing and
    closing are the store's below; the outermost layer is the one the innermost store registers."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    @property
    def name(self) -> str:
        return str(self.inner.name)

    @property
    def persistent(self) -> bool:
        return bool(self.inner.persistent)

    @property
    def is_open(self) -> bool:
        return bool(self.inner.is_open)

    def init(self, context: StateStoreContext, root: StateStore | None = None) -> None:
        self.inner.init(context, root if root is not None else self)

    def flush(self) -> None:
        self.inner.flush()

    def close(self) -> None:
        self.inner.close()

    def approximate_num_entries(self) -> int:
        return int(self.inner.approximate_num_entries())

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.inner!r})"


class WrappedKeyValueStore(WrappedStateStore, KeyValueStore):
    """A layer over another key-value store that forwards everything; layers override what they add.

    Stores are stacks of these (metered -> caching -> change-logging -> in-memory / RocksDB), as in
    Kafka Streams; a new layer is a subclass plus a method of its store builder.
    """

    inner: KeyValueStore

    def __init__(self, inner: KeyValueStore) -> None:
        self.inner = inner

    def get(self, key: Any) -> Any:
        return self.inner.get(key)

    def range(self, from_key: Any = None, to_key: Any = None) -> list[KeyValue]:
        return self.inner.range(from_key, to_key)

    def reverse_range(self, from_key: Any = None, to_key: Any = None) -> list[KeyValue]:
        return self.inner.reverse_range(from_key, to_key)

    def all(self) -> list[KeyValue]:
        return self.inner.all()

    def reverse_all(self) -> list[KeyValue]:
        return self.inner.reverse_all()

    def put(self, key: Any, value: Any) -> None:
        self.inner.put(key, value)

    def put_if_absent(self, key: Any, value: Any) -> Any:
        return self.inner.put_if_absent(key, value)

    def put_all(self, entries: Iterable[tuple[Any, Any]]) -> None:
        self.inner.put_all(entries)

    def delete(self, key: Any) -> Any:
        return self.inner.delete(key)
