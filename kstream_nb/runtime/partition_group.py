"""``PartitionGroup``: a task's input partitions and their record queues, as Kafka Streams' ``PartitionGroup``
and ``RecordQueue``.

Fetched batches are queued per partition, column-wise (``RecordBatch``) when the source can take them so, else
as raw columns decoded as they are processed; the task takes the queue whose head has the lowest timestamp.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np
import orjson

from kstream_nb.cluster.records import FetchedBatch, Headers, TopicPartition
from kstream_nb.cluster.serdes import JsonSerde
from kstream_nb.errors import ProcessingError
from kstream_nb.processor.api import Record
from kstream_nb.processor.batch import RecordBatch
from kstream_nb.processor.node import SourceNode
from kstream_nb.processor.timestamps import FieldTimestampExtractor

#: the deserialization-exception handler: (topic, partition, offset, error, raw record or None)
BadRecordHandler = Callable[[str, int, int, Exception, "tuple[Any, ...] | None"], None]


class _Chunk:
    """Records of one fetch as parallel columns, consumed from ``pos`` on.

    With ``value_de`` set, keys and values are still bytes, decoded as they are processed (so a decoded
    value lives only while its record is processed, and a bad record meets the deserialization handler
    when it is reached, as in Kafka Streams); with ``value_de`` None they were decoded on arrival (for a
    timestamp extractor that reads them).
    """

    __slots__ = ("headers", "key_cache", "key_de", "keys", "offsets", "pos", "timestamps", "value_de", "values")

    def __init__(
        self,
        offsets: list[int],
        keys: list[Any],
        values: list[Any],
        timestamps: list[int],
        headers: list[Headers],
        key_de: _KeyDecoder | None = None,
        value_de: Callable[[bytes], Any] | None = None,
    ) -> None:
        self.offsets = offsets
        self.keys = keys
        self.values = values
        self.timestamps = timestamps
        self.headers = headers
        self.key_de = key_de
        self.key_cache = key_de.cache if key_de is not None else {}
        self.value_de = value_de
        self.pos = 0

    def __len__(self) -> int:
        return len(self.offsets) - self.pos


class PartitionGroup:
    """Record queues of a task's partitions (``queues``): ``add`` fetched batches, ``next_queue`` to process."""

    def __init__(
        self,
        task_id: str,
        partitions: Iterable[TopicPartition],
        sources: Mapping[str, SourceNode],
        stream_time: Callable[[], int],
        bad_record: BadRecordHandler,
    ) -> None:
        self.task_id = task_id
        self.queues: dict[TopicPartition, deque[Any]] = {tp: deque() for tp in partitions}
        self._sources = sources
        self._stream_time = stream_time
        self._deserialization_failed = bad_record
        self._key_decoders: dict[str, _KeyDecoder] = {}

    def clear(self) -> None:
        """Drops every buffered record (the partitions were revoked)."""
        for queue in self.queues.values():
            queue.clear()

    def add(self, fetched: FetchedBatch) -> None:
        """Queues a fetched batch: column-wise when possible, else its raw columns (decoded when processed)."""
        tp = TopicPartition(fetched.topic, fetched.partition)
        queue = self.queues.get(tp)
        if queue is None:
            queue = self.queues[tp] = deque()
        source = self._sources[fetched.topic]
        if fetched.columnar is not None:
            batch = self._columnar(fetched, source)
            if batch is not None:
                queue.append(batch)
                return
        key_de = self._key_decoders.get(fetched.topic)
        if key_de is None:
            key_de = self._key_decoders[fetched.topic] = _KeyDecoder(_decoder(source.key_serde, fetched.topic))
        value_de = _decoder(source.value_serde, fetched.topic)
        extractor = source.timestamp_extractor
        topic, partition = fetched.topic, fetched.partition
        if fetched.raw is not None:
            offsets, keys, values, timestamps, headers = fetched.raw
        else:
            rs = fetched.records
            offsets, keys, values = [r.offset for r in rs], [r.key for r in rs], [r.value for r in rs]
            timestamps, headers = [r.timestamp for r in rs], [r.headers for r in rs]
        if not offsets:
            return
        if extractor is None or extractor.uses_record_timestamp:
            if min(timestamps) < 0:
                bad = next(i for i, ts in enumerate(timestamps) if ts < 0)
                raise ProcessingError(
                    f"invalid (negative) timestamp {timestamps[bad]}",
                    task_id=self.task_id,
                    topic=topic,
                    partition=partition,
                    offset=offsets[bad],
                )
            queue.append(_Chunk(list(offsets), keys, values, timestamps, headers, key_de, value_de))
            return
        records, kept = self._decode_one_by_one(
            topic, partition, (offsets, keys, values, timestamps, headers), key_de, value_de
        )
        for record, offset in zip(records, kept):
            record.timestamp = self._extract(extractor, record, topic, partition, offset)
        if records:
            queue.append(
                _Chunk(
                    kept,
                    [r.key for r in records],
                    [r.value for r in records],
                    [r.timestamp for r in records],
                    [r.headers for r in records],
                )
            )

    def _decode_one_by_one(
        self, topic: str, partition: int, raw: Any, key_de: Any, value_de: Any
    ) -> tuple[list[Record], list[int]]:
        """Decodes each record on its own (for the timestamp extractor), bad ones to the handler."""
        records, kept = [], []
        for offset, k, v, ts, h in zip(*raw):
            try:
                records.append(Record(None if k is None else key_de(k), None if v is None else value_de(v), ts, h))
                kept.append(offset)
            except Exception as e:
                self._deserialization_failed(topic, partition, offset, e, (k, v, ts, h))
        return records, kept

    def _columnar(self, fetched: FetchedBatch, source: SourceNode) -> RecordBatch | None:
        col = fetched.columnar
        assert col is not None
        if col.key_serde != source.key_serde or col.value_serde != source.value_serde:
            return None
        extractor = source.timestamp_extractor
        timestamps = np.asarray(col.timestamps, dtype=np.int64)
        if isinstance(extractor, FieldTimestampExtractor):
            if extractor.field not in col.values.columns or col.values[extractor.field].dtype.kind not in "iu":
                return None
            timestamps = col.values[extractor.field].to_numpy(dtype=np.int64)
        elif not (extractor is None or extractor.uses_record_timestamp):
            return None
        offsets = np.arange(fetched.base_offset, fetched.base_offset + len(col), dtype=np.int64)
        return RecordBatch(
            fetched.topic,
            fetched.partition,
            col.keys,
            col.values,
            timestamps,
            offsets,
            col.key_serde,
            col.value_serde,
            col.headers,
        )

    def _extract(self, extractor: Any, record: Record, topic: str, partition: int, offset: int) -> int:
        try:
            ts = int(extractor.extract(record, self._stream_time()))
        except Exception as e:
            raise ProcessingError(
                f"timestamp extractor failed: {type(e).__name__}: {e}",
                task_id=self.task_id,
                topic=topic,
                partition=partition,
                offset=offset,
            ) from e
        if ts < 0:
            raise ProcessingError(
                f"timestamp extractor returned a negative timestamp {ts}",
                task_id=self.task_id,
                topic=topic,
                partition=partition,
                offset=offset,
            )
        return ts

    def buffered(self) -> int:
        return sum(len(item) for q in list(self.queues.values()) for item in list(q))

    def queued(self, tp: TopicPartition) -> int:
        """Records of ``tp`` waiting to be processed."""
        return sum(len(item) for item in self.queues.get(tp, ()))

    def next_queue(self) -> tuple[TopicPartition, deque[Any]] | None:
        best = None
        best_ts = None
        for tp, queue in self.queues.items():
            if queue:
                head = queue[0]
                ts = head.timestamps[0] if type(head) is RecordBatch else head.timestamps[head.pos]
                if best_ts is None or ts < best_ts:
                    best, best_ts = (tp, queue), ts
        return best


def _decoder(serde: Any, topic: str) -> Callable[[bytes], Any]:
    """The serde's decoding function for non-null data (orjson directly for JSON: the hot path)."""
    if type(serde) is JsonSerde:
        return orjson.loads
    return lambda data: serde.deserialize(topic, data)


_IMMUTABLE = (str, int, float, bool)
_MEMO_LIMIT = 50_000


class _KeyDecoder:
    """Keys repeat: remembers the decoded form of immutable keys (bounded), decodes the rest every time.

    ``cache`` is public so that the processing loop can look hits up without a call.
    """

    __slots__ = ("cache", "decode")

    def __init__(self, decode: Callable[[bytes], Any]) -> None:
        self.decode = decode
        self.cache: dict[bytes, Any] = {}

    def __call__(self, data: bytes) -> Any:
        cache = self.cache
        key = cache.get(data)
        if key is None:
            key = self.decode(data)
            if type(key) in _IMMUTABLE:
                if len(cache) >= _MEMO_LIMIT:
                    cache.clear()
                cache[data] = key
        return key
