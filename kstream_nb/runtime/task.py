"""``StreamTask``: one partition number of one sub-topology; picks records, keeps stream time, punctuates.

A task owns fresh instances of its sub-topology's processors and stores. It takes records from its
partitions' queues lowest timestamp first, advances its stream time, runs punctuators, and reports the
offsets to commit. Records are written through a ``RecordCollector`` (the thread's producer, or the test
driver's capture).
"""

from __future__ import annotations

import json
import logging
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

from kstream_nb.cluster.records import ColumnarBatch, FetchedBatch, Headers, TopicPartition
from kstream_nb.errors import DeserializationError, ProcessingError
from kstream_nb.processor.api import PunctuationType
from kstream_nb.processor.batch import RecordBatch
from kstream_nb.processor.node import ProcessorNode, SourceNode
from kstream_nb.processor.record_context import RecordContext
from kstream_nb.processor.window_time import LateRecord
from kstream_nb.runtime.config import EXACTLY_ONCE_V2, StreamsConfig
from kstream_nb.runtime.dropped_records import LateRecords
from kstream_nb.runtime.partition_group import PartitionGroup
from kstream_nb.runtime.punctuation import PunctuationQueue, PunctuationSchedule
from kstream_nb.runtime.record_collector import RecordCollector
from kstream_nb.runtime.skip_log import SkipLog
from kstream_nb.runtime.state_manager import ProcessorStateManager, RegisteredStore
from kstream_nb.state.caching import ThreadCache
from kstream_nb.state.store import ChangelogWriter, RestoreCallback, StateStore
from kstream_nb.topology.topology import SubTopology, Topology

log = logging.getLogger("kstream_nb.task")


def stream_thread_cache(config: StreamsConfig) -> ThreadCache:
    """A stream thread's record cache (Kafka's ThreadCache): ``statestore_cache_max_bytes`` split over the
    stream threads, each thread's budget shared by the cached stores of its tasks."""
    return ThreadCache(config.statestore_cache_max_bytes // max(1, config.num_stream_threads))


class StreamTask:
    """Runs one task: ``add`` fetched batches, ``process`` them, ``punctuate``, ``commit`` offsets."""

    def __init__(
        self,
        task_id: str,
        subtopology: SubTopology,
        partition: int,
        topology: Topology,
        config: StreamsConfig,
        collector: RecordCollector,
        wall_clock: Callable[[], int],
        partitions: list[TopicPartition] | None = None,
        global_stores: Mapping[str, StateStore] | None = None,
        *,
        cache: ThreadCache,
    ) -> None:
        self.task_id = task_id
        self._global_stores = global_stores or {}
        self.subtopology = subtopology
        self.partition = partition
        self.application_id = config.application_id
        self.state_dir: str | None = config.state_dir
        self._config = config
        self._topology = topology
        self._collector = collector
        self.copies_on_send = collector.copies_on_send
        self.exactly_once = config.processing_guarantee == EXACTLY_ONCE_V2
        #: what processors keep with the committed offsets (Kafka's ProcessorMetadata), by key
        self.processor_metadata: dict[str, int] = {}
        self._wall_clock = wall_clock
        self.stream_time = -1
        #: the record being processed (Kafka's ProcessorRecordContext), shared by every node context
        self.record_context = RecordContext(partition)
        self.processed_total = 0
        self.dropped_total = 0
        #: the last records dropped for a closed window (bounded; filled only on the drop path)
        self.late_records = LateRecords(task_id)
        #: summarised warnings for the records the deserialization handler skips
        self._skip_log = SkipLog(log, task_id, wall_clock)
        self.skipped_production = 0
        self.commit_requested = False
        self.consumed: dict[TopicPartition, int] = {}
        #: positions whose outputs have reached the cluster (what lag is measured against)
        self.published: dict[TopicPartition, int] = {}
        self._committed: dict[TopicPartition, int] = {}
        self._stream_punctuations = PunctuationQueue()
        self._wall_punctuations = PunctuationQueue()
        serde_configs = config.serde_configs()
        graph = topology.build_task_graph(
            subtopology,
            config.default_key_serde,
            config.default_value_serde,
            config.default_timestamp_extractor,
            serde_configs,
        )
        self.sources: dict[str, SourceNode] = {self.resolve_topic(t): n for t, n in graph.sources.items()}
        self.nodes: list[ProcessorNode] = graph.nodes
        self.partition_group = PartitionGroup(
            task_id, partitions or (), self.sources, lambda: self.stream_time, self._deserialization_failed
        )
        #: the partitions' record queues (the partition group's)
        self.queues = self.partition_group.queues
        #: the consumer's ``fetched_to_end`` (set by the task manager): with it, a task of several partitions
        #: processes only while each empty one was fetched to its end, so that it never takes a record ahead
        #: of one the broker already holds but has not delivered yet (KIP-695; Kafka's max.task.idle.ms 0)
        self.fetched_to_end: Callable[[TopicPartition], bool] | None = None
        #: the task's stores and the checkpoint of the persistent ones (taken before the stores open)
        self.state_manager = ProcessorStateManager(
            task_id, partition, self.application_id, self.state_dir, self.exactly_once
        )
        #: the registered stores, by name (the state manager's)
        self.stores = self.state_manager.stores
        #: the stream thread's record cache (Kafka's ThreadCache): the caching layers take their part at init
        self.cache = cache
        for builder in graph.stores:
            store = builder.build(
                config.default_key_serde,
                config.default_value_serde,
                config.default_dsl_store,
                cache.max_bytes > 0,
                serde_configs,
            )
            store.init(self)
        self._closed = False

    # ---- what stores and nodes see (StateStoreContext, TaskHandle) -----------------------------

    @property
    def timestamp(self) -> int:
        return self.record_context.timestamp

    @property
    def headers(self) -> Headers:
        """Headers of the record being processed (a cached store keeps them with the update)."""
        return self.record_context.headers

    def changelog_topic(self, store_name: str) -> str:
        return f"{self.application_id}-{store_name}-changelog"

    def changelog_writer(self, topic: str) -> ChangelogWriter:
        send, partition = self._collector.send, self.partition

        def write(key: bytes | None, value: bytes | None, timestamp: int) -> None:
            send(topic, key, value, timestamp, (), partition)

        return write

    def register(self, store: StateStore, restore: RestoreCallback, changelog_topic: str | None) -> None:
        self.state_manager.register(store, restore, changelog_topic)

    def get_store(self, name: str) -> StateStore:
        registered = self.stores.get(name)
        return registered.store if registered is not None else self._global_stores[name]

    def resolve_topic(self, name: str) -> str:
        return f"{self.application_id}-{name}" if self._topology.is_internal(name) else name

    def partition_count(self, topic: str) -> int:
        return self._collector.partition_count(topic)

    def topic_exists(self, topic: str) -> bool:
        """Whether ``topic`` exists (a sink whose topic a topic name extractor chooses writes only to topics
        that do); collectors without a cluster (test driver, backtest) take every topic."""
        exists = getattr(self._collector, "topic_exists", None)
        return True if exists is None else bool(exists(topic))

    def send(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        timestamp: int,
        headers: Headers,
        partition: int | None,
    ) -> None:
        self._collector.send(topic, key, value, timestamp, headers, partition)

    def send_columnar(self, topic: str, batch: ColumnarBatch, partition: int) -> None:
        self._collector.send_columnar(topic, batch, partition)

    def schedule(
        self, interval_ms: int, punctuation_type: PunctuationType, punctuator: Callable[[int], None]
    ) -> PunctuationSchedule:
        if punctuation_type is PunctuationType.STREAM_TIME:
            schedule = PunctuationSchedule(None, interval_ms, punctuation_type, punctuator, 0)
            self._stream_punctuations.add(schedule)
        else:
            schedule = PunctuationSchedule(
                None, interval_ms, punctuation_type, punctuator, self._wall_clock() + interval_ms
            )
            self._wall_punctuations.add(schedule)
        return schedule

    def request_commit(self) -> None:
        self.commit_requested = True

    def wall_clock_ms(self) -> int:
        return self._wall_clock()

    def record_dropped(self, processor: str, reason: str, late: LateRecord | None = None) -> None:
        self.dropped_total += 1
        if late is not None:
            self.late_records.add(processor, late, self.record_context)
        log.debug("task %s: %s dropped a record (%s)", self.task_id, processor, reason)

    # ---- lifecycle -----------------------------------------------------------------------------

    def initialize(self) -> None:
        """Runs every processor's ``init`` (after the stores are restored)."""
        for node in self.nodes:
            node.init(self)

    # ---- commit metadata (Kafka's TopicPartitionMetadata) --------------------------------------

    def processor_metadata_for_key(self, key: str) -> int | None:
        return self.processor_metadata.get(key)

    def add_processor_metadata_key_value(self, key: str, value: int) -> None:
        self.processor_metadata[key] = value

    def commit_metadata(self) -> str:
        """What the task commits with each of its offsets: its stream time and the processors' metadata."""
        return json.dumps({"stream_time": self.stream_time, "processors": self.processor_metadata})

    def restore_metadata(self, committed: Mapping[TopicPartition, str]) -> None:
        """Takes up the stream time and processor metadata committed with the task's offsets (before
        ``initialize``); metadata it cannot read, written by another client, is skipped with a warning."""
        for tp, text in committed.items():
            try:
                saved = json.loads(text)
                stream_time = int(saved["stream_time"])
                processors = {str(k): int(v) for k, v in saved["processors"].items()}
            except (ValueError, TypeError, KeyError, AttributeError):
                log.warning(
                    "task %s: commit metadata of %s not understood, ignored: %.80r", self.task_id, tp, text
                )
                continue
            self.stream_time = max(self.stream_time, stream_time)
            for key, value in processors.items():
                self.processor_metadata[key] = max(value, self.processor_metadata.get(key, value))

    def suspend(self) -> None:
        """A rebalance took the task's partitions: drop buffered records (they are fetched again from the
        committed offsets if the task comes back); processors and stores stay as they are."""
        self.partition_group.clear()

    def changelog_partitions(self) -> dict[TopicPartition, RegisteredStore]:
        return self.state_manager.changelog_partitions()

    def persistent_changelogs(self) -> list[TopicPartition]:
        """Changelog partitions of stores that keep their data on disk (they need a checkpoint)."""
        return self.state_manager.persistent_changelogs()

    def read_checkpoint(self) -> dict[TopicPartition, int]:
        """Changelog offsets up to which the persistent stores already hold the data (read at creation)."""
        return self.state_manager.read_checkpoint()

    def write_checkpoint(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Records the changelog end offsets the flushed persistent stores correspond to."""
        self.state_manager.write_checkpoint(offsets)

    def close(self) -> None:
        """Closes processors and stores; safe to call twice."""
        if self._closed:
            return
        self._closed = True
        self._skip_log.close()
        errors = []
        for node in self.nodes:
            try:
                node.close()
            except Exception as e:  # a failing close must not keep the other stores open
                errors.append(e)
        errors.extend(self.state_manager.close())
        if errors:
            raise ProcessingError(f"closing task {self.task_id} failed: {errors[0]}", task_id=self.task_id)

    # ---- records -------------------------------------------------------------------------------

    def add(self, fetched: FetchedBatch) -> None:
        """Queues a fetched batch (see ``PartitionGroup.add``)."""
        self.partition_group.add(fetched)

    def _deserialization_failed(
        self, topic: str, partition: int, offset: int, error: Exception, raw: tuple[Any, ...] | None = None
    ) -> None:
        """Applies the deserialization-exception handler: fail, log and continue, or dead-letter topic."""
        handler = self._config.default_deserialization_exception_handler
        if handler == "fail":
            raise DeserializationError(
                f"cannot deserialize record: {error}",
                task_id=self.task_id,
                topic=topic,
                partition=partition,
                offset=offset,
            ) from error
        self._skip_log.skipped(topic, partition, offset, error)
        if handler == "dead_letter" and raw is not None:
            key, value, timestamp, headers = raw
            error_headers = (
                ("__streams.errors.exception", type(error).__name__.encode()),
                ("__streams.errors.message", str(error).encode()),
                ("__streams.errors.topic", topic.encode()),
                ("__streams.errors.partition", str(partition).encode()),
                ("__streams.errors.offset", str(offset).encode()),
            )
            dlq = self._config.dead_letter_topic
            assert dlq is not None
            self._collector.send(dlq, key, value, timestamp, tuple(headers) + error_headers, None)

    @property
    def skipped_deserialization(self) -> int:
        """Records the deserialization handler skipped (logged or counted in a summary line)."""
        return self._skip_log.total

    def production_failed(self, topic: str, error: Exception) -> bool:
        """The production-exception handler: True to skip the record (``continue``), False to fail."""
        if self._config.default_production_exception_handler == "continue":
            self.skipped_production += 1
            log.warning("task %s: dropping a record for topic %s: %s", self.task_id, topic, error)
            return True
        return False

    def sender(self) -> Callable[[str, bytes | None, bytes | None, int, Headers, int | None], None]:
        """``send`` without the indirection through the task (a sink calls it once per record)."""
        return self._collector.send

    def buffered(self) -> int:
        return self.partition_group.buffered()

    def ready(self) -> bool:
        """Whether the task may process now: it has records, and none of its empty partitions holds more on the
        broker as far as the consumer knows."""
        if not self.partition_group.buffered():
            return False
        fetched_to_end = self.fetched_to_end
        if fetched_to_end is None or len(self.queues) == 1:
            return True
        return all(queue or fetched_to_end(tp) for tp, queue in self.queues.items())

    def process(self, budget: int) -> int:
        """Processes up to about ``budget`` buffered records, lowest head timestamp first (see ``ready``)."""
        done = 0
        single = len(self.queues) == 1
        if not single and not self.ready():
            return 0
        rc = self.record_context
        while done < budget:
            picked = next(iter(self.queues.items())) if single else self.partition_group.next_queue()
            if picked is None or not picked[1]:
                break
            tp, queue = picked
            source = self.sources[tp.topic]
            rc.topic = tp.topic
            rc.partition = tp.partition
            if single:
                done += self._drain(tp, queue, source, budget - done)
            else:
                done += self._process_head(tp, queue, source)
                if not queue and self.fetched_to_end is not None and not self.fetched_to_end(tp):
                    break  # the broker holds more of this partition: wait for it
        self.processed_total += done
        return done

    def _drain(self, tp: TopicPartition, queue: deque[Any], source: SourceNode, budget: int) -> int:
        """Processes one partition's queue record by record: decode, advance stream time, run the source's
        (fused) entry with the record's offset, timestamp and headers in the record context."""
        done = 0
        rc = self.record_context
        entry = source.chain()  # errors are named below, once, rather than by a wrapper around each record
        stream_time = self.stream_time
        try:
            while queue and done < budget:
                chunk = queue[0]
                if type(chunk) is RecordBatch:
                    done += self._process_head(tp, queue, source)
                    stream_time = self.stream_time
                    continue
                offsets, value_de, start = chunk.offsets, chunk.value_de, chunk.pos
                end = min(len(offsets), start + budget - done)
                rows = zip(
                    offsets[start:end],
                    chunk.keys[start:end],
                    chunk.values[start:end],
                    chunk.timestamps[start:end],
                    chunk.headers[start:end],
                )
                skipped = 0
                if value_de is None:
                    for offset, key, value, ts, h in rows:
                        if ts > stream_time:
                            self.stream_time = stream_time = ts
                        rc.offset = offset
                        rc.timestamp = ts
                        rc.headers = h
                        entry(key, value)
                else:
                    key_de, cached_key = chunk.key_de, chunk.key_cache.get
                    for offset, k, v, ts, h in rows:
                        try:
                            if k is None:
                                key = None
                            else:
                                key = cached_key(k)
                                if key is None:
                                    key = key_de(k)
                            value = None if v is None else value_de(v)
                        except Exception as e:
                            skipped += 1
                            self._deserialization_failed(tp.topic, tp.partition, offset, e, (k, v, ts, h))
                            continue
                        if ts > stream_time:
                            self.stream_time = stream_time = ts
                        rc.offset = offset
                        rc.timestamp = ts
                        rc.headers = h
                        entry(key, value)
                chunk.pos = end
                done += end - start - skipped
                self.consumed[tp] = offsets[end - 1] + 1
                if end == len(offsets):
                    queue.popleft()
        except ProcessingError:
            raise
        except Exception as e:
            raise source.chain_error(e) from e
        return done

    def _process_head(self, tp: TopicPartition, queue: deque[Any], source: SourceNode) -> int:
        """Processes the head of a partition's queue: a whole column batch, or one record."""
        item = queue[0]
        rc = self.record_context
        if type(item) is RecordBatch:
            queue.popleft()
            if len(item):
                self.stream_time = max(self.stream_time, int(item.timestamps.max()))
                rc.offset = int(item.offsets[-1])
                rc.timestamp = int(item.timestamps[-1])
                source.processor.process_batch(item)  # type: ignore[attr-defined]
                self.consumed[tp] = int(item.offsets[-1]) + 1
            return len(item)
        i = item.pos
        item.pos = i + 1
        if item.pos == len(item.offsets):
            queue.popleft()
        offset, ts, headers = item.offsets[i], item.timestamps[i], item.headers[i]
        key, value = item.keys[i], item.values[i]
        if item.value_de is not None:
            k, v = key, value
            try:
                key = None if k is None else item.key_de(k)
                value = None if v is None else item.value_de(v)
            except Exception as e:
                self._deserialization_failed(tp.topic, tp.partition, offset, e, (k, v, ts, headers))
                self.consumed[tp] = offset + 1
                return 0
        if ts > self.stream_time:
            self.stream_time = ts
        rc.offset = offset
        rc.timestamp = ts
        rc.headers = headers
        source.entry()(key, value)
        self.consumed[tp] = offset + 1
        return 1

    # ---- punctuation and commit ----------------------------------------------------------------

    def punctuate(self) -> int:
        """Fires due stream-time and wall-clock punctuators; returns how many fired."""
        fired = 0
        rc = self.record_context
        for queue, now in ((self._stream_punctuations, self.stream_time), (self._wall_punctuations, None)):
            if not len(queue):
                continue
            if now is None:
                now = self._wall_clock()
            if now < 0:
                continue
            for schedule in queue.due(now):
                rc.topic, rc.offset = None, -1
                rc.partition, rc.timestamp, rc.headers = self.partition, now, ()
                try:
                    schedule.punctuator(now)
                except ProcessingError:
                    raise
                except Exception as e:
                    raise ProcessingError(
                        f"punctuator failed: {type(e).__name__}: {e}", task_id=self.task_id
                    ) from e
                fired += 1
        return fired

    def flush(self) -> None:
        self.state_manager.flush()

    def has_cached_changes(self) -> bool:
        """Whether a record cache holds updates not yet written and forwarded (they go at the next commit)."""
        return self.state_manager.has_cached_changes()

    def offsets_to_commit(self) -> dict[TopicPartition, int]:
        """Consumed positions that changed since the last commit (call ``flush`` first)."""
        changed = {tp: off for tp, off in self.consumed.items() if self._committed.get(tp) != off}
        return changed

    def set_start_offsets(self, offsets: dict[TopicPartition, int]) -> None:
        """The committed positions the task starts from (nothing to commit for them)."""
        for tp, offset in offsets.items():
            self.consumed.setdefault(tp, offset)
            self.published.setdefault(tp, offset)
            self._committed.setdefault(tp, offset)

    def mark_committed(self, offsets: dict[TopicPartition, int]) -> None:
        self._committed.update(offsets)
        self.commit_requested = False

    def __repr__(self) -> str:
        return f"StreamTask({self.task_id}, partitions={sorted(map(str, self.queues))})"
