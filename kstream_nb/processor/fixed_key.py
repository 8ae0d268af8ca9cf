"""Fixed-key processors (Kafka's KIP-820): ``KStream.process_values`` runs them; they may change values,
timestamps and headers, never keys, so the stream is not marked for repartitioning.

As Kafka's ``FixedKeyRecord``, a ``FixedKeyRecord`` is made only by the runtime, from the record being
processed; a processor derives the records it forwards with ``with_value``/``with_timestamp``/
``with_headers``. Its context forwards ``FixedKeyRecord`` objects only: forwarding a ``Record`` (which could
carry any key) fails, naming the processor.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kstream_nb.cluster.records import Headers
from kstream_nb.processor.api import DelegatingContext, Processor, ProcessorContext, Record

if TYPE_CHECKING:
    pass

_RUNTIME = object()


class FixedKeyRecord:
    """A record whose key cannot change: key, value, timestamp (ms) and headers, immutable."""

    __slots__ = ("_headers", "_key", "_timestamp", "_value")

    def __init__(
        self, key: Any, value: Any, timestamp: int, headers: Headers = (), *, _made_by: object = None
    ) -> None:
        if _made_by is not _RUNTIME:
            raise TypeError(
                "a FixedKeyRecord comes from the record being processed: derive new ones with "
                "record.with_value(...), with_timestamp(...) or with_headers(...); process_values cannot "
                "change keys"
            )
        self._key = key
        self._value = value
        self._timestamp = timestamp
        self._headers = headers

    @classmethod
    def _of(cls, record: Record) -> FixedKeyRecord:
        return cls(record.key, record.value, record.timestamp, record.headers, _made_by=_RUNTIME)

    @property
    def key(self) -> Any:
        return self._key

    @property
    def value(self) -> Any:
        return self._value

    @property
    def timestamp(self) -> int:
        return self._timestamp

    @property
    def headers(self) -> Headers:
        return self._headers

    def with_value(self, value: Any) -> FixedKeyRecord:
        return FixedKeyRecord(self._key, value, self._timestamp, self._headers, _made_by=_RUNTIME)

    def with_timestamp(self, timestamp: int) -> FixedKeyRecord:
        return FixedKeyRecord(self._key, self._value, timestamp, self._headers, _made_by=_RUNTIME)

    def with_headers(self, headers: Headers) -> FixedKeyRecord:
        return FixedKeyRecord(self._key, self._value, self._timestamp, headers, _made_by=_RUNTIME)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FixedKeyRecord) and (self.key, self.value, self.timestamp, self.headers) == (
            other.key,
            other.value,
            other.timestamp,
            other.headers,
        )

    def __hash__(self) -> int:
        return hash((self._key, self._timestamp))

    def __repr__(self) -> str:
        headers = f", headers={self._headers!r}" if self._headers else ""
        return f"FixedKeyRecord(key={self._key!r}, value={self._value!r}, timestamp={self._timestamp}{headers})"


class FixedKeyProcessorContext(DelegatingContext):
    """A processor context whose ``forward`` takes ``FixedKeyRecord`` objects only (the rest is the node's)."""

    def __init__(self, inner: ProcessorContext, processor_name: str) -> None:
        super().__init__(inner)
        self._name = processor_name

    def forward(self, record: Any, child_name: str | None = None) -> None:
        """Sends a record derived from an input record (``record.with_value(...)``) to the children."""
        if not isinstance(record, FixedKeyRecord):
            raise TypeError(
                f"process_values processor {self._name!r} forwarded {record!r}: a fixed-key processor forwards "
                "FixedKeyRecords (record.with_value(...)) and cannot change keys; use process() to change keys"
            )
        self._inner.forward(Record(record.key, record.value, record.timestamp, record.headers), child_name)


class FixedKeyProcessor(ABC):
    """Kafka's ``FixedKeyProcessor``: ``init`` once per task, ``process`` per record, ``close`` at the end."""

    context: FixedKeyProcessorContext

    def init(self, context: FixedKeyProcessorContext) -> None:
        """Keeps the context; override to look up stores and schedule punctuators (call super)."""
        self.context = context

    @abstractmethod
    def process(self, record: FixedKeyRecord) -> None: ...

    def close(self) -> None:
        """Releases what ``init`` acquired; stores are closed by the runtime."""


FixedKeyProcessorSupplier = Callable[[], Any]


class KStreamProcessValues(Processor):
    """The node of ``process_values``: hands the user's fixed-key processor ``FixedKeyRecord`` objects."""

    def __init__(self, supplier: FixedKeyProcessorSupplier) -> None:
        self.processor = supplier()
        if not callable(getattr(self.processor, "process", None)):
            raise TypeError(
                f"process_values: the supplier returned {self.processor!r}, not a FixedKeyProcessor "
                "(an object with process(record))"
            )

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        name = getattr(context, "node_name", "process_values")
        self.processor.init(FixedKeyProcessorContext(context, name))

    def process(self, record: Record) -> None:
        self.processor.process(FixedKeyRecord._of(record))

    def close(self) -> None:
        self.processor.close()
