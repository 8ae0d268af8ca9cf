"""``TopologyTestDriver``: runs a topology deterministically, one record at a time, with no threads.

As Kafka's driver: every topic has one partition, each sub-topology is one task, a piped record is
processed completely (records written to topics the topology reads are processed right after it, in the
order written), then stream-time punctuators fire and the task commits. Wall-clock time moves only when
``advance_wall_clock_time`` is called.
"""

from __future__ import annotations

import shutil
import tempfile
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import pandas as pd

from kstream_nb.cluster.records import ConsumerRecord, FetchedBatch, Headers
from kstream_nb.cluster.schema_registry import configure_serde
from kstream_nb.cluster.serde_specs import serde_from
from kstream_nb.cluster.serdes import Serde
from kstream_nb.durations import to_millis
from kstream_nb.errors import InvalidStateStoreError, UnknownTopicError
from kstream_nb.runtime.config import StreamsConfig
from kstream_nb.runtime.dropped_records import late_records_frame, task_times
from kstream_nb.runtime.global_state import GlobalStores
from kstream_nb.runtime.record_collector import RecordByRecordCollector
from kstream_nb.runtime.task import StreamTask, stream_thread_cache
from kstream_nb.state.timestamped import PlainValueView, TimestampedKeyValueStoreBuilder
from kstream_nb.topology.topology import Topology

_MISSING = object()


@dataclass(frozen=True)
class TestRecord:
    """A record as a test reads it from an output topic."""

    key: Any
    value: Any
    timestamp: int
    headers: Headers = ()

    __test__ = False  # not a pytest test class


class _Collector(RecordByRecordCollector):
    copies_on_send = False  # the driver keeps what is written

    def __init__(self, driver: TopologyTestDriver) -> None:
        self.driver = driver

    def send(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        timestamp: int,
        headers: Headers,
        partition: int | None,
    ) -> None:
        self.driver._written(topic, key, value, timestamp, headers)

    def partition_count(self, topic: str) -> int:
        return 1


class _QueuesByTime:
    """The records waiting to be processed, as the single task of Kafka's TopologyTestDriver holds them
    (PartitionGroup): one FIFO queue per topic, the next record from the queue whose head is oldest; ties go as
    Kafka's ``java.util.PriorityQueue`` of queues breaks them (a binary heap: sift on strictly older only)."""

    def __init__(self) -> None:
        self.queues: dict[str, deque[tuple[str, ConsumerRecord]]] = {}
        self.heap: list[str] = []

    def __bool__(self) -> bool:
        return bool(self.heap)

    def append(self, item: tuple[str, ConsumerRecord]) -> None:
        queue = self.queues.setdefault(item[0], deque())
        queue.append(item)
        if len(queue) == 1:
            self._offer(item[0])

    def popleft(self) -> tuple[str, ConsumerRecord]:
        topic = self._poll()
        queue = self.queues[topic]
        item = queue.popleft()
        if queue:
            self._offer(topic)
        return item

    def _head(self, topic: str) -> int:
        return self.queues[topic][0][1].timestamp

    def _offer(self, topic: str) -> None:
        heap, ts = self.heap, self._head(topic)
        heap.append(topic)
        k = len(heap) - 1
        while k > 0:
            parent = (k - 1) >> 1
            if ts >= self._head(heap[parent]):
                break
            heap[k] = heap[parent]
            k = parent
        heap[k] = topic

    def _poll(self) -> str:
        heap = self.heap
        result, last = heap[0], heap.pop()
        n = len(heap)
        if n:
            k, ts = 0, self._head(last)
            while k < n >> 1:
                child = 2 * k + 1
                if child + 1 < n and self._head(heap[child]) > self._head(heap[child + 1]):
                    child += 1
                if ts <= self._head(heap[child]):
                    break
                heap[k] = heap[child]
                k = child
            heap[k] = last
        return result


class TopologyTestDriver:
    """Pipes records into a topology and reads what it writes, with no cluster and no threads."""

    def __init__(
        self, topology: Topology, config: dict[str, Any] | None = None, initial_wall_clock_ms: int = 0
    ) -> None:
        settings = dict(config or {})
        settings.setdefault("application_id", "topology-test-driver")
        self._own_state_dir = None
        if "state_dir" not in settings:
            settings["state_dir"] = self._own_state_dir = tempfile.mkdtemp(prefix="kstream-nb-driver-")
        self.config = StreamsConfig.of(**settings)
        self.topology = topology
        topology.validate()
        self._wall_clock = initial_wall_clock_ms
        self._outputs: dict[str, deque[ConsumerRecord]] = {}
        self._offsets: dict[str, int] = {}
        self._pending = _QueuesByTime()
        self._processing = False
        collector = _Collector(self)
        self.tasks: list[StreamTask] = []
        self._by_topic: dict[str, StreamTask] = {}
        self.global_stores = GlobalStores(topology, self.config)
        #: the record cache of the driver's tasks, as a stream thread's (Kafka's ThreadCache)
        self.cache = stream_thread_cache(self.config)
        for sub in topology.subtopologies():
            task = StreamTask(
                f"{sub.id}_0", sub, 0, topology, self.config, collector, lambda: self._wall_clock,
                global_stores=self.global_stores.stores, cache=self.cache,
            )  # fmt: skip
            self.tasks.append(task)
            for topic in task.sources:
                self._by_topic[topic] = task
        for task in self.tasks:
            task.initialize()

    # ---- topics --------------------------------------------------------------------------------

    def create_input_topic(
        self,
        name: str,
        key_serde: Any = None,
        value_serde: Any = None,
        start_timestamp: int | None = None,
        auto_advance: Any = 0,
    ) -> TestInputTopic:
        """An input topic; timestamps default to ``start_timestamp`` (else the wall clock) + auto advance."""
        if name not in self._by_topic and name not in self.global_stores.topics:
            reads = sorted([*self._by_topic, *self.global_stores.topics])
            raise UnknownTopicError(name, f"topic {name!r} is not read by the topology (reads: {reads})")
        return TestInputTopic(
            self,
            name,
            self._serde(key_serde, True),
            self._serde(value_serde, False),
            self._wall_clock if start_timestamp is None else start_timestamp,
            to_millis(auto_advance, "auto_advance"),
        )

    def create_output_topic(self, name: str, key_serde: Any = None, value_serde: Any = None) -> TestOutputTopic:
        """An output topic to read what the topology wrote to ``name``."""
        return TestOutputTopic(self, name, self._serde(key_serde, True), self._serde(value_serde, False))

    def _serde(self, spec: Any, key: bool) -> Serde:
        """A test topic's serde (the app's default if None), configured as the app's are: a registry serde
        uses the app's ``schema_registry_url``, else the embedded registry of its ``memory://`` cluster."""
        if spec is not None:
            serde = serde_from(spec)
        else:
            serde = self.config.default_key_serde if key else self.config.default_value_serde
        return configure_serde(serde, self.config.serde_configs(), key)

    def produced_topic_names(self) -> list[str]:
        return sorted(self._outputs)

    # ---- processing ----------------------------------------------------------------------------

    def pipe_raw(
        self, topic: str, key: bytes | None, value: bytes | None, timestamp: int, headers: Headers = ()
    ) -> None:
        """Processes one serialized record completely, then punctuates by stream time and commits."""
        if topic in self.global_stores.topics:
            record = self._consumer_record(topic, key, value, timestamp, headers)
            self.global_stores.apply(FetchedBatch(topic, 0, record.offset, [record]))
            return
        self._pending.append((topic, self._consumer_record(topic, key, value, timestamp, headers)))
        self._drain()

    def _consumer_record(
        self, topic: str, key: bytes | None, value: bytes | None, timestamp: int, headers: Headers
    ) -> ConsumerRecord:
        offset = self._offsets.get(topic, 0)
        self._offsets[topic] = offset + 1
        return ConsumerRecord(topic, 0, offset, timestamp, key, value, headers)

    def _drain(self) -> None:
        if self._processing:
            return
        self._processing = True
        try:
            while self._pending:
                topic, record = self._pending.popleft()
                task = self._by_topic[topic]
                task.add(FetchedBatch(topic, 0, record.offset, [record]))
                task.process(1 << 30)
                task.punctuate()
                task.flush()
                task.mark_committed(task.offsets_to_commit())
        finally:
            self._processing = False

    def _written(
        self, topic: str, key: bytes | None, value: bytes | None, timestamp: int, headers: Headers
    ) -> None:
        record = self._consumer_record(topic, key, value, timestamp, headers)
        self._outputs.setdefault(topic, deque()).append(record)
        if topic in self._by_topic:
            self._pending.append((topic, record))

    def advance_wall_clock_time(self, duration: Any) -> None:
        """Moves the mock wall clock and fires due wall-clock punctuators."""
        self._wall_clock += to_millis(duration, "advance_wall_clock_time")
        for task in self.tasks:
            task.punctuate()
        self._drain()

    # ---- stores --------------------------------------------------------------------------------

    def get_state_store(self, name: str) -> Any:
        for task in self.tasks:
            if name in task.stores:
                return task.stores[name].store
        if name in self.global_stores.stores:
            return self.global_stores.stores[name]
        raise InvalidStateStoreError(
            f"no state store named {name!r} (stores: {sorted(self.topology.store_builders)})"
        )

    def get_key_value_store(self, name: str) -> Any:
        """The store with plain values (KTable/aggregation stores drop their timestamps here)."""
        store = self.get_state_store(name)
        if name in self.global_stores.stores or isinstance(
            self.topology.store_builders.get(name), TimestampedKeyValueStoreBuilder
        ):
            return PlainValueView(store)
        return store

    def get_timestamped_key_value_store(self, name: str) -> Any:
        """The store with ``ValueAndTimestamp`` values."""
        return self.get_state_store(name)

    @property
    def dropped_records_total(self) -> int:
        return sum(t.dropped_total for t in self.tasks) + self.global_stores.dropped_total

    def metrics(self) -> dict[str, Any]:
        return {
            "process-total": sum(t.processed_total for t in self.tasks),
            "dropped-records-total": self.dropped_records_total,
            "task-time": task_times(self.tasks),
        }

    def dropped_records(self, n: int = 20) -> pd.DataFrame:
        """The last ``n`` records dropped for a closed window, newest first (``KafkaStreams.dropped_records``)."""
        return late_records_frame(self.tasks, n)

    def close(self) -> None:
        for task in self.tasks:
            task.close()
        self.global_stores.close()
        if self._own_state_dir is not None:
            shutil.rmtree(self._own_state_dir, ignore_errors=True)

    def __enter__(self) -> TopologyTestDriver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class TestInputTopic:
    """Serializes and pipes records into one topic of the driver."""

    __test__ = False

    def __init__(
        self,
        driver: TopologyTestDriver,
        name: str,
        key_serde: Serde,
        value_serde: Serde,
        start_timestamp: int,
        auto_advance_ms: int,
    ) -> None:
        self.driver = driver
        self.name = name
        self.key_serde = key_serde
        self.value_serde = value_serde
        self._time = start_timestamp
        self._advance = auto_advance_ms

    def pipe_input(self, key: Any, value: Any = _MISSING, timestamp: Any = None, headers: Headers = ()) -> None:
        """``pipe_input(value)`` or ``pipe_input(key, value, timestamp=...)``."""
        if value is _MISSING:
            key, value = None, key
        if timestamp is None:
            timestamp = self._time
            self._time += self._advance
        elif not isinstance(timestamp, int):
            from kstream_nb.processor.timestamps import to_epoch_millis

            timestamp = to_epoch_millis(timestamp)
        self.driver.pipe_raw(
            self.name,
            self.key_serde.serialize(self.name, key),
            self.value_serde.serialize(self.name, value),
            timestamp,
            tuple(headers),
        )

    def pipe_value_list(self, values: Iterable[Any]) -> None:
        for value in values:
            self.pipe_input(None, value)

    def pipe_key_value_list(self, pairs: Iterable[tuple[Any, Any]]) -> None:
        for key, value in pairs:
            self.pipe_input(key, value)

    def pipe_records(self, records: Iterable[Any]) -> None:
        """Records with ``key``, ``value`` and optional ``timestamp``/``headers`` attributes."""
        for r in records:
            self.pipe_input(r.key, r.value, getattr(r, "timestamp", None), getattr(r, "headers", None) or ())

    def advance_time(self, duration: Any) -> None:
        self._time += to_millis(duration, "advance_time")


class TestOutputTopic:
    """Reads, in order, what the topology wrote to one topic (each read consumes)."""

    __test__ = False

    def __init__(self, driver: TopologyTestDriver, name: str, key_serde: Serde, value_serde: Serde) -> None:
        self.driver = driver
        self.name = name
        self.key_serde = key_serde
        self.value_serde = value_serde

    def _queue(self) -> deque[ConsumerRecord]:
        return self.driver._outputs.setdefault(self.name, deque())

    def read_record(self) -> TestRecord:
        queue = self._queue()
        if not queue:
            raise LookupError(f"empty topic: {self.name!r}")
        r = queue.popleft()
        return TestRecord(
            self.key_serde.deserialize(self.name, r.key),
            self.value_serde.deserialize(self.name, r.value),
            r.timestamp,
            r.headers,
        )

    def read_value(self) -> Any:
        return self.read_record().value

    def read_key_value(self) -> tuple[Any, Any]:
        r = self.read_record()
        return r.key, r.value

    def read_records_to_list(self) -> list[TestRecord]:
        out = []
        while self._queue():
            out.append(self.read_record())
        return out

    def read_values_to_list(self) -> list[Any]:
        return [r.value for r in self.read_records_to_list()]

    def read_key_values_to_list(self) -> list[tuple[Any, Any]]:
        return [(r.key, r.value) for r in self.read_records_to_list()]

    def read_key_values_to_map(self) -> dict[Any, Any]:
        """The last value per key (a deleted key maps to None), as Kafka's ``readKeyValuesToMap``."""
        result: dict[Any, Any] = {}
        for key, value in self.read_key_values_to_list():
            if key is None:
                raise ValueError(f"topic {self.name!r} has a record with a null key: it cannot be read into a map")
            result[key] = value
        return result

    def is_empty(self) -> bool:
        return not self._queue()

    def get_queue_size(self) -> int:
        return len(self._queue())
