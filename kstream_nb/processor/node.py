"""Processor nodes of one task's graph and the per-node context that processors see."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from kstream_nb.cluster.records import ColumnarBatch, Headers
from kstream_nb.errors import ProcessingError, TopologyError
from kstream_nb.processor.api import (
    Cancellable,
    Processor,
    ProcessorContext,
    PunctuationType,
    Record,
)
from kstream_nb.processor.batch import RecordBatch

if TYPE_CHECKING:
    from kstream_nb.cluster.serdes import Serde
    from kstream_nb.processor.timestamps import TimestampExtractor
    from kstream_nb.state.store import StateStore

#: A node (and what it is fused with) called with a record's key and value; the record's timestamp and
#: headers are the task's ``current_timestamp`` and ``current_headers``.
Entry = Callable[[Any, Any], None]
#: Turns an exception of a fused step into the ProcessingError that names its node.
Fail = Callable[[Exception], ProcessingError]

#: Fuse chains of DSL stateless processors and sinks into one closure per node (tests switch it off to
#: compare with the record-at-a-time path).
FUSION = True


class TaskHandle(Protocol):
    """What a running task offers its nodes (implemented by the runtime's task and the test driver)."""

    application_id: str
    task_id: str
    partition: int
    current_topic: str | None
    current_partition: int
    current_offset: int
    current_timestamp: int
    current_headers: Headers
    stream_time: int
    #: the producer copies what is sent at once (Kafka): serialized bytes are not kept, need not be compact
    copies_on_send: bool

    def get_store(self, name: str) -> StateStore: ...

    def processor_metadata_for_key(self, key: str) -> int | None: ...

    def add_processor_metadata_key_value(self, key: str, value: int) -> None: ...

    def schedule(
        self, interval_ms: int, punctuation_type: PunctuationType, punctuator: Callable[[int], None]
    ) -> Cancellable: ...

    def request_commit(self) -> None: ...

    def wall_clock_ms(self) -> int: ...

    def record_dropped(self, processor: str, reason: str) -> None: ...

    def resolve_topic(self, name: str) -> str:
        """The cluster topic for a topology topic name (internal topics get the application id prefix)."""
        ...

    def partition_count(self, topic: str) -> int: ...

    def send(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        timestamp: int,
        headers: Headers,
        partition: int | None,
    ) -> None: ...

    def send_columnar(self, topic: str, batch: ColumnarBatch, partition: int) -> None: ...

    def sender(self) -> Callable[[str, bytes | None, bytes | None, int, Headers, int | None], None]:
        """``send`` as a function to call directly (the per-record path of a sink)."""
        ...

    def production_failed(self, topic: str, error: Exception) -> bool:
        """Asks the production-exception handler: True to drop the record and go on."""
        ...


class ProcessorNode:
    """One processor instance in a task, with its children and the stores it may use."""

    __slots__ = ("_entry", "children", "context", "name", "processor", "store_names")

    def __init__(self, name: str, processor: Processor, store_names: tuple[str, ...] = ()) -> None:
        self.name = name
        self.processor = processor
        self.store_names = store_names
        self.children: list[ProcessorNode] = []
        self.context: NodeContext | None = None
        self._entry: Entry | None = None

    def entry(self) -> Entry:
        """This node as a ``(key, value)`` function, built on first use (after every node's ``init``).

        A processor whose own class defines ``fuse`` (the DSL stateless built-ins and the sink) is fused
        with its children's entries into one closure, so a chain of them runs without Record objects or
        per-node dispatch; any other processor gets a Record. Errors name the node they happened in.
        """
        entry = self._entry
        if entry is None:
            context = self.context
            if context is None:
                raise TopologyError(f"processor {self.name!r} is used before its init")
            fuse = type(self.processor).__dict__.get("fuse") if FUSION else None
            if fuse is None:
                entry = context.record_entry()
            else:
                entry = fuse(self.processor, fan_out([c.entry() for c in self.children]), context.fail)
            self._entry = entry
        return entry

    def fused_entry(self) -> Entry | None:
        """``entry()`` if this node is fused, else None (callers holding a Record pass it to ``process``)."""
        if not FUSION or "fuse" not in type(self.processor).__dict__:
            return None
        return self.entry()

    def init(self, task: TaskHandle) -> None:
        self.context = NodeContext(self, task)
        try:
            self.processor.init(self.context)
        except ProcessingError:
            raise
        except Exception as e:
            raise ProcessingError(
                f"init failed: {type(e).__name__}: {e}", task_id=task.task_id, processor=self.name
            ) from e

    def close(self) -> None:
        self.processor.close()

    def __repr__(self) -> str:
        return f"ProcessorNode({self.name})"


class NodeContext(ProcessorContext):
    """The context of one node: ``forward`` goes to this node's children; the rest is the task's."""

    __slots__ = ("_by_name", "_children", "_node", "_targets", "_task")

    def __init__(self, node: ProcessorNode, task: TaskHandle) -> None:
        self._node = node
        self._task = task
        self._children = node.children
        self._by_name = {c.name: c for c in node.children}
        self._targets: list[tuple[ProcessorNode, Entry | None]] | None = None

    @property
    def application_id(self) -> str:
        return self._task.application_id

    @property
    def task_id(self) -> str:
        return self._task.task_id

    @property
    def topic(self) -> str | None:
        return self._task.current_topic

    @property
    def partition(self) -> int:
        return self._task.current_partition

    @property
    def offset(self) -> int:
        return self._task.current_offset

    @property
    def timestamp(self) -> int:
        return self._task.current_timestamp

    @property
    def headers(self) -> Headers:
        return self._task.current_headers

    def processor_metadata_for_key(self, key: str) -> int | None:
        """A value committed with the task's offsets (``add_processor_metadata_key_value``), or None."""
        return self._task.processor_metadata_for_key(key)

    def add_processor_metadata_key_value(self, key: str, value: int) -> None:
        """Keeps ``value`` with the task's next offset commit, so that it outlives a restart or a task move
        exactly as far as the committed offsets do (Kafka keeps it in the commit's metadata)."""
        self._task.add_processor_metadata_key_value(key, value)

    @property
    def node_name(self) -> str:
        return self._node.name

    def forward(self, record: Record, child_name: str | None = None) -> None:
        if child_name is None:
            targets = self._targets
            if targets is None:
                targets = self._targets = [(c, c.fused_entry()) for c in self._children]
        else:
            child = self._by_name.get(child_name)
            if child is None:
                raise TopologyError(
                    f"processor {self._node.name!r} has no child {child_name!r} "
                    f"(children: {sorted(self._by_name)})"
                )
            targets = [(child, child.fused_entry())]
        task = self._task
        saved_ts, saved_headers = task.current_timestamp, task.current_headers
        task.current_timestamp = record.timestamp
        task.current_headers = record.headers
        key, value = record.key, record.value
        for child, entry in targets:
            try:
                if entry is None:
                    child.processor.process(record)
                else:
                    entry(key, value)
            except ProcessingError:
                raise
            except Exception as e:
                raise self._error(child, e) from e
        task.current_timestamp, task.current_headers = saved_ts, saved_headers

    def record_entry(self) -> Entry:
        """This node's ``process`` as an entry: the key and value with the current timestamp and headers."""
        task = self._task
        node = self._node
        process = node.processor.process
        error = self._error

        def record_entry(key: Any, value: Any) -> None:
            try:
                process(Record(key, value, task.current_timestamp, task.current_headers))
            except ProcessingError:
                raise
            except Exception as e:
                raise error(node, e) from e

        return record_entry

    def fail(self, e: Exception) -> ProcessingError:
        """The error of this node's processor failing on the current record (fused steps raise it)."""
        return self._error(self._node, e)

    def forwarder(self) -> Callable[[Record], None]:
        """``forward`` for processors that keep the record's timestamp and headers (stateless built-ins).

        With one child it calls the child directly (no context switch); errors still name the child.
        """
        if len(self._children) != 1:
            return self.forward
        child = self._children[0]
        process = child.processor.process
        error = self._error

        def forward_one(record: Record) -> None:
            try:
                process(record)
            except ProcessingError:
                raise
            except Exception as e:
                raise error(child, e) from e

        return forward_one

    def forward_batch(self, batch: RecordBatch) -> None:
        """Sends a batch to every child: column-wise where the child can, else record by record."""
        for child in self._children:
            process_batch = getattr(child.processor, "process_batch", None)
            if process_batch is not None:
                try:
                    process_batch(batch)
                except ProcessingError:
                    raise
                except Exception as e:
                    raise self._error(child, e) from e
            else:
                self._unbatch(child, batch)

    def process_records_of(self, batch: RecordBatch) -> None:
        """Runs this node's own processor record by record over a batch (its batch path gave up)."""
        self._unbatch(self._node, batch)

    def _unbatch(self, child: ProcessorNode, batch: RecordBatch) -> None:
        task = self._task
        entry = child.entry()
        keys = batch.keys
        headers = batch.headers
        offsets = batch.offsets.tolist()
        timestamps = batch.timestamps.tolist()
        for i, value in enumerate(batch.value_dicts()):
            task.current_offset = offsets[i]
            task.current_timestamp = timestamps[i]
            task.current_headers = headers[i] if headers is not None else ()
            try:
                entry(keys[i], value)
            except ProcessingError:
                raise
            except Exception as e:
                raise self._error(child, e) from e

    def _error(self, child: ProcessorNode, e: Exception) -> ProcessingError:
        task = self._task
        return ProcessingError(
            f"{type(e).__name__}: {e}",
            task_id=task.task_id,
            processor=child.name,
            topic=task.current_topic,
            partition=task.current_partition if task.current_topic is not None else None,
            offset=task.current_offset if task.current_topic is not None else None,
        )

    def schedule(
        self, interval: Any, punctuation_type: PunctuationType, punctuator: Callable[[int], None]
    ) -> Cancellable:
        from kstream_nb.durations import to_millis

        interval_ms = to_millis(interval, "punctuation interval")
        if interval_ms < 1:
            raise ValueError("punctuation interval must be at least 1 ms")
        return self._task.schedule(interval_ms, punctuation_type, punctuator)

    def get_state_store(self, name: str) -> StateStore:
        if name not in self._node.store_names:
            raise TopologyError(
                f"processor {self._node.name!r} is not connected to state store {name!r}; "
                f"connect it with stores=[{name!r}] (connected: {list(self._node.store_names)})"
            )
        return self._task.get_store(name)

    def commit(self) -> None:
        self._task.request_commit()

    def current_stream_time_ms(self) -> int:
        return self._task.stream_time

    def current_system_time_ms(self) -> int:
        return self._task.wall_clock_ms()

    def record_dropped(self, reason: str) -> None:
        """Counts a record this node skipped (null key, late, ...) in the dropped-records metric."""
        self._task.record_dropped(self._node.name, reason)


def fan_out(entries: list[Entry]) -> Entry:
    """One entry calling ``entries`` in order (a node's children)."""
    if len(entries) == 1:
        return entries[0]
    if not entries:
        return _drop
    targets = tuple(entries)

    def forward_all(key: Any, value: Any) -> None:
        for entry in targets:
            entry(key, value)

    return forward_all


def _drop(key: Any, value: Any) -> None:
    """The children of a leaf."""


class SourceNode(ProcessorNode):
    """A source in a task: the serdes and timestamp extractor its topics are read with."""

    __slots__ = ("key_serde", "timestamp_extractor", "topics", "value_serde")

    def __init__(
        self,
        name: str,
        topics: tuple[str, ...],
        key_serde: Serde,
        value_serde: Serde,
        timestamp_extractor: TimestampExtractor | None,
    ) -> None:
        from kstream_nb.processor.stream_stateless import PassThrough

        super().__init__(name, PassThrough())
        self.topics = topics
        self.key_serde = key_serde
        self.value_serde = value_serde
        self.timestamp_extractor = timestamp_extractor
