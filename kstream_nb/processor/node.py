"""Processor nodes of one task's graph (Kafka Streams' ProcessorNode), the fusion of built-ins into chains
of closures, and the per-node context that processors see (ProcessorContextImpl)."""

from __future__ import annotations

from collections.abc import Callable
from types import CodeType, FunctionType, TracebackType
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
from kstream_nb.processor.record_context import RecordContext

if TYPE_CHECKING:
    from kstream_nb.cluster.serdes import Serde
    from kstream_nb.processor.timestamps import TimestampExtractor
    from kstream_nb.processor.window_time import LateRecord
    from kstream_nb.state.store import StateStore

#: A node (and what it is fused with) called with a record's key and value; the record's timestamp and
#: headers are those of the task's ``record_context``.
Entry = Callable[[Any, Any], None]
#: How a caller holding a Record reaches a node: ``(entry, None)`` if it is fused, else ``(None, process)``.
Receiver = tuple[Entry | None, Callable[[Record], None] | None]


class TaskHandle(Protocol):
    """What a running task offers its nodes (implemented by the runtime's task and the test driver)."""

    application_id: str
    task_id: str
    partition: int
    #: the record being processed, shared by the task's node contexts
    record_context: RecordContext
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

    def record_dropped(self, processor: str, reason: str, late: LateRecord | None = None) -> None: ...

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


class FusedProcessor(Processor):
    """A built-in written once, as ``fuse``: a closure over the key and value that calls its children's
    entries directly (see ``ProcessorNode.entry``). ``process`` runs that closure on a Record."""

    context: NodeContext

    def fuse(self, downstream: Entry) -> Entry:
        """This processor's step calling ``downstream`` (its children); it need not name its errors."""
        raise NotImplementedError

    def process(self, record: Record) -> None:
        self.context.run(record)


class ProcessorNode:
    """One processor instance in a task, with its children and the stores it may use."""

    __slots__ = (
        "_chain",
        "_entry",
        "_own",
        "_process",
        "_steps",
        "children",
        "context",
        "name",
        "processor",
        "store_names",
    )

    def __init__(self, name: str, processor: Processor, store_names: tuple[str, ...] = ()) -> None:
        self.name = name
        self.processor = processor
        self.store_names = store_names
        self.children: list[ProcessorNode] = []
        self.context: NodeContext | None = None
        self._chain: Entry | None = None
        self._entry: Entry | None = None
        self._own: Entry | None = None
        self._process: Callable[[Record], None] | None = None
        #: the nodes of the fused steps of ``chain()``, by ``id`` of their step's code (see ``_failed_step``)
        self._steps: dict[int, ProcessorNode] = {}

    @property
    def fused(self) -> bool:
        """A built-in that runs as its ``fuse`` step (not a Processor, nor a subclass overriding ``process``)."""
        return type(self.processor).process is FusedProcessor.process

    def entry(self) -> Entry:
        """This node as a ``(key, value)`` function, built on first use (after every node's ``init``).

        A fused node is composed with its fused children into one closure, so a chain of them runs without
        Record objects or per-node dispatch; any other processor gets a Record. Errors name the node they
        happened in.
        """
        entry = self._entry
        if entry is None:
            entry = self._entry = self.own_entry() if self.fused else self.chain()
        return entry

    def chain(self) -> Entry:
        """``entry()`` without naming the errors of fused steps (what a fused parent calls)."""
        chain = self._chain
        if chain is None:
            if self.fused:
                chain, self._steps = self._compose()
            else:
                chain = self._context().record_entry(self.guarded_process())
            self._chain = chain
        return chain

    def own_entry(self) -> Entry:
        """The processor's ``fuse`` step composed with its children, errors naming the failing node: the
        ``entry()`` of a fused node, and what ``FusedProcessor.process`` runs (``super().process``)."""
        own = self._own
        if own is None:
            chain, steps = (self.chain(), self._steps) if self.fused else self._compose()
            # a chain without a fused step raises only the ProcessingErrors of its Processor API nodes
            own = self._own = _named_errors(self, chain, steps) if steps else chain
        return own

    def chain_error(self, e: Exception) -> ProcessingError:
        """The ProcessingError for an exception that ``chain()`` raised, naming the fused step it escaped from:
        a caller with its own ``try`` around a loop of records (the task) runs ``chain()`` and names errors
        with this, sparing each record the call through ``entry()``'s wrapper."""
        return self._context()._error(_failed_step(e.__traceback__, self._steps, self), e)

    def _compose(self) -> tuple[Entry, dict[int, ProcessorNode]]:
        """The ``fuse`` step over the children's chains, and the node of each fused step in it by the ``id``
        of its code (each step gets a code object of its own: see ``_failed_step``)."""
        self._context()
        chains = [c.chain() for c in self.children]
        steps: dict[int, ProcessorNode] = {}
        for c in self.children:
            steps.update(c._steps)
        downstream = fan_out(chains)
        step = self.processor.fuse(downstream)  # type: ignore[attr-defined]
        if step is not downstream:
            step = _own_code(step)
            steps[id(step.__code__)] = self
        return step, steps

    def _context(self) -> NodeContext:
        if self.context is None:
            raise TopologyError(f"processor {self.name!r} is used before its init")
        return self.context

    def guarded_process(self) -> Callable[[Record], None]:
        """``process`` of a node that is not fused, its errors naming the node (built once)."""
        process = self._process
        if process is None:
            process = self._process = self._context().guarded(self, self.processor.process)
        return process

    def receiver(self) -> Receiver:
        """How a caller holding a Record reaches this node (a Processor API node gets the very record)."""
        return (self.entry(), None) if self.fused else (None, self.guarded_process())

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


def _own_code(step: Entry) -> FunctionType:
    """``step`` with a code object of its own, so that a frame of it tells which node it belongs to (the
    closures of two filters share one code object)."""
    if not isinstance(step, FunctionType):
        raise TypeError(f"fuse must return a function, got {step!r}")
    code: CodeType = step.__code__.replace()
    own = FunctionType(code, step.__globals__, step.__name__, step.__defaults__, step.__closure__)
    own.__qualname__ = step.__qualname__
    return own


def _named_errors(root: ProcessorNode, chain: Entry, steps: dict[int, ProcessorNode]) -> Entry:
    """``chain`` raising a ProcessingError that names the fused step an exception escaped from: the node of
    the innermost frame of the traceback that runs a step of the chain (the root if none does)."""
    context = root._context()

    def named_errors(key: Any, value: Any) -> None:
        try:
            chain(key, value)
        except ProcessingError:
            raise
        except Exception as e:
            raise context._error(_failed_step(e.__traceback__, steps, root), e) from e

    return named_errors


def _failed_step(tb: TracebackType | None, steps: dict[int, ProcessorNode], root: ProcessorNode) -> ProcessorNode:
    """The node of the innermost step in the traceback ``tb`` (the frames a record went through)."""
    node = root
    while tb is not None:
        node = steps.get(id(tb.tb_frame.f_code), node)
        tb = tb.tb_next
    return node


class NodeContext(ProcessorContext):
    """The context of one node: ``forward`` goes to this node's children; the rest is the task's."""

    __slots__ = ("_by_name", "_children", "_node", "_targets", "_task", "record_context")

    def __init__(self, node: ProcessorNode, task: TaskHandle) -> None:
        self._node = node
        self._task = task
        #: the task's record context (Kafka's ProcessorRecordContext): the record being processed
        self.record_context = task.record_context
        self._children = node.children
        self._by_name = {c.name: c for c in node.children}
        self._targets: list[Receiver] | None = None

    @property
    def application_id(self) -> str:
        return self._task.application_id

    @property
    def task_id(self) -> str:
        return self._task.task_id

    @property
    def topic(self) -> str | None:
        return self.record_context.topic

    @property
    def partition(self) -> int:
        return self.record_context.partition

    @property
    def offset(self) -> int:
        return self.record_context.offset

    @property
    def timestamp(self) -> int:
        return self.record_context.timestamp

    @property
    def headers(self) -> Headers:
        return self.record_context.headers

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
                targets = self._targets = [c.receiver() for c in self._children]
        else:
            child = self._by_name.get(child_name)
            if child is None:
                raise TopologyError(
                    f"processor {self._node.name!r} has no child {child_name!r} "
                    f"(children: {sorted(self._by_name)})"
                )
            targets = [child.receiver()]
        self._deliver(targets, record)

    def run(self, record: Record) -> None:
        """Runs this node's ``fuse`` step on ``record`` (a fused built-in's ``process``)."""
        self._deliver([(self._node.own_entry(), None)], record)

    def _deliver(self, targets: list[Receiver], record: Record) -> None:
        """Calls each target with ``record``'s timestamp and headers in the record context: an entry with its
        key and value, else (a Processor API node) its ``process`` with the record itself."""
        rc = self.record_context
        saved_ts, saved_headers = rc.timestamp, rc.headers
        rc.timestamp = record.timestamp
        rc.headers = record.headers
        key, value = record.key, record.value
        for entry, process in targets:
            if entry is not None:
                entry(key, value)
            elif process is not None:
                process(record)
        rc.timestamp, rc.headers = saved_ts, saved_headers

    def guarded(self, node: ProcessorNode, call: Callable[[Any], None]) -> Callable[[Any], None]:
        """``call`` (a ``process`` or ``process_batch`` of ``node``), its errors naming ``node``."""
        error = self._error

        def guarded(arg: Any) -> None:
            try:
                call(arg)
            except ProcessingError:
                raise
            except Exception as e:
                raise error(node, e) from e

        return guarded

    def record_entry(self, process: Callable[[Record], None]) -> Entry:
        """``process`` as an entry: the key and value with the current timestamp and headers."""
        rc = self.record_context

        def record_entry(key: Any, value: Any) -> None:
            process(Record(key, value, rc.timestamp, rc.headers))

        return record_entry

    def forward_batch(self, batch: RecordBatch) -> None:
        """Sends a batch to every child: column-wise where the child can, else record by record."""
        for child in self._children:
            process_batch = getattr(child.processor, "process_batch", None)
            if process_batch is not None:
                self.guarded(child, process_batch)(batch)
            else:
                self._unbatch(child, batch)

    def process_records_of(self, batch: RecordBatch) -> None:
        """Runs this node's own processor record by record over a batch (its batch path gave up)."""
        self._unbatch(self._node, batch)

    def _unbatch(self, child: ProcessorNode, batch: RecordBatch) -> None:
        rc = self.record_context
        entry = child.entry()
        keys = batch.keys
        headers = batch.headers
        offsets = batch.offsets.tolist()
        timestamps = batch.timestamps.tolist()
        for i, value in enumerate(batch.value_dicts()):
            rc.offset = offsets[i]
            rc.timestamp = timestamps[i]
            rc.headers = headers[i] if headers is not None else ()
            entry(keys[i], value)

    def _error(self, child: ProcessorNode, e: Exception) -> ProcessingError:
        rc = self.record_context
        return ProcessingError(
            f"{type(e).__name__}: {e}",
            task_id=self._task.task_id,
            processor=child.name,
            topic=rc.topic,
            partition=rc.partition if rc.topic is not None else None,
            offset=rc.offset if rc.topic is not None else None,
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

    def record_dropped(self, reason: str, late: LateRecord | None = None) -> None:
        """Counts a record this node skipped (null key, late, ...) in the dropped-records metric; ``late``: the
        window it missed, kept among the task's last late records (``KafkaStreams.dropped_records``)."""
        self._task.record_dropped(self._node.name, reason, late)


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
