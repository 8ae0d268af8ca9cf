"""The Processor API: records, processors, their context, punctuation (Kafka's ``processor.api``)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from enum import Enum
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from kstream_nb.cluster.records import Headers
from kstream_nb.state.timestamped import ValueAndTimestamp as ValueAndTimestamp

if TYPE_CHECKING:
    from kstream_nb.state.store import StateStore


class Record:
    """A record: key, value, timestamp (ms) and headers — what processors forward and ``produce`` takes.

    Treat it as immutable: ``with_key``/``with_value``/``with_timestamp`` return new records. A None
    timestamp means "now" when the record is produced.
    """

    __slots__ = ("headers", "key", "timestamp", "value")

    def __init__(self, key: Any, value: Any, timestamp: Any = None, headers: Headers = ()) -> None:
        self.key = key
        self.value = value
        self.timestamp = timestamp
        self.headers = headers

    def with_key(self, key: Any) -> Record:
        return Record(key, self.value, self.timestamp, self.headers)

    def with_value(self, value: Any) -> Record:
        return Record(self.key, value, self.timestamp, self.headers)

    def with_timestamp(self, timestamp: int) -> Record:
        return Record(self.key, self.value, timestamp, self.headers)

    def with_headers(self, headers: Headers) -> Record:
        return Record(self.key, self.value, self.timestamp, headers)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Record) and (self.key, self.value, self.timestamp, self.headers) == (
            other.key,
            other.value,
            other.timestamp,
            other.headers,
        )

    def __hash__(self) -> int:
        return hash((self.key, self.timestamp))

    def __repr__(self) -> str:
        headers = f", headers={self.headers!r}" if self.headers else ""
        return f"Record(key={self.key!r}, value={self.value!r}, timestamp={self.timestamp}{headers})"


class Change(NamedTuple):
    """A KTable update as it flows between table processors: the new value and the one it replaced."""

    new_value: Any
    old_value: Any


class KeyValue(NamedTuple):
    """A key and a value, as mappers may return them."""

    key: Any
    value: Any


class PunctuationType(Enum):
    """What drives a punctuator: stream time (record timestamps) or wall-clock time."""

    STREAM_TIME = "stream_time"
    WALL_CLOCK_TIME = "wall_clock_time"


STREAM_TIME = PunctuationType.STREAM_TIME
WALL_CLOCK_TIME = PunctuationType.WALL_CLOCK_TIME


class Cancellable(Protocol):
    """Handle returned by ``schedule``; ``cancel()`` stops the punctuator."""

    def cancel(self) -> None: ...


class RecordMetadata(NamedTuple):
    """Where the record being processed came from."""

    topic: str | None
    partition: int
    offset: int


class ProcessorContext(ABC):
    """What a processor can see and do: forward records, schedule punctuation, reach its stores."""

    @property
    @abstractmethod
    def application_id(self) -> str: ...

    @property
    @abstractmethod
    def task_id(self) -> str:
        """``<subtopology>_<partition>``, e.g. ``"0_1"``."""

    @property
    @abstractmethod
    def topic(self) -> str | None:
        """Topic of the record being processed (None inside a punctuator)."""

    @property
    @abstractmethod
    def partition(self) -> int:
        """Partition of the record being processed (the task's partition inside a punctuator)."""

    @property
    @abstractmethod
    def offset(self) -> int:
        """Offset of the record being processed (-1 inside a punctuator)."""

    @property
    @abstractmethod
    def timestamp(self) -> int:
        """Timestamp of the record being processed, or the punctuation time inside a punctuator."""

    @property
    @abstractmethod
    def headers(self) -> Headers: ...

    def record_metadata(self) -> RecordMetadata | None:
        """Topic, partition and offset of the current input record, None inside a punctuator."""
        if self.topic is None:
            return None
        return RecordMetadata(self.topic, self.partition, self.offset)

    @abstractmethod
    def forward(self, record: Record, child_name: str | None = None) -> None:
        """Sends a record to every child processor, or only to the named one."""

    @abstractmethod
    def schedule(
        self, interval: Any, punctuation_type: PunctuationType, punctuator: Callable[[int], None]
    ) -> Cancellable:
        """Calls ``punctuator(timestamp)`` every ``interval`` (a duration) of stream or wall-clock time."""

    @abstractmethod
    def get_state_store(self, name: str) -> StateStore:
        """A store connected to this processor (``add_state_store`` / ``stores=[...]``)."""

    @abstractmethod
    def commit(self) -> None:
        """Requests a commit of the task as soon as possible."""

    @abstractmethod
    def current_stream_time_ms(self) -> int: ...

    @abstractmethod
    def current_system_time_ms(self) -> int: ...


class DelegatingContext(ProcessorContext):
    """A node's context seen through a wrapper that changes ``forward`` only (process_values,
    transform_values): everything else is the wrapped context's."""

    def __init__(self, inner: ProcessorContext) -> None:
        self._inner = inner

    @property
    def application_id(self) -> str:
        return self._inner.application_id

    @property
    def task_id(self) -> str:
        return self._inner.task_id

    @property
    def topic(self) -> str | None:
        return self._inner.topic

    @property
    def partition(self) -> int:
        return self._inner.partition

    @property
    def offset(self) -> int:
        return self._inner.offset

    @property
    def timestamp(self) -> int:
        return self._inner.timestamp

    @property
    def headers(self) -> Headers:
        return self._inner.headers

    def schedule(
        self, interval: Any, punctuation_type: PunctuationType, punctuator: Callable[[int], None]
    ) -> Cancellable:
        return self._inner.schedule(interval, punctuation_type, punctuator)

    def get_state_store(self, name: str) -> StateStore:
        return self._inner.get_state_store(name)

    def commit(self) -> None:
        self._inner.commit()

    def current_stream_time_ms(self) -> int:
        return self._inner.current_stream_time_ms()

    def current_system_time_ms(self) -> int:
        return self._inner.current_system_time_ms()


class Processor(ABC):
    """A node of a topology: ``init`` once per task, ``process`` per record, ``close`` at the end."""

    context: ProcessorContext

    def init(self, context: ProcessorContext) -> None:
        """Keeps the context; override to look up stores and schedule punctuators (call super)."""
        self.context = context

    @abstractmethod
    def process(self, record: Record) -> None: ...

    def close(self) -> None:
        """Releases what ``init`` acquired; stores are closed by the runtime."""


ProcessorSupplier = Callable[[], Processor]
