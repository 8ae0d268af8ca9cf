"""The sink: serializes records and writes them to a topic, choosing the partition as Kafka does."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from kstream_nb.cluster.partitioner import default_partition
from kstream_nb.cluster.records import ColumnarBatch
from kstream_nb.cluster.serdes import Serde
from kstream_nb.errors import SerializationError
from kstream_nb.processor.batch import RecordBatch
from kstream_nb.processor.node import Entry, FusedProcessor, NodeContext

#: ``partitioner(key, value, num_partitions) -> partition`` (None = default partitioner), as seed 000's
#: StreamPartitioner.
StreamPartitioner = Callable[[Any, Any, int], "int | None"]

_KEY_CACHE_LIMIT = 100_000
_IMMUTABLE = (str, int, float)


class SinkProcessor(FusedProcessor):
    """Writes each record to ``topic``: custom partitioner, else murmur2 of the key bytes, else spread."""

    context: NodeContext

    def __init__(
        self, topic: str, key_serde: Serde, value_serde: Serde, partitioner: StreamPartitioner | None = None
    ) -> None:
        self.topic_name = topic
        self.key_serde = key_serde
        self.value_serde = value_serde
        self.partitioner = partitioner
        self._partition_of: dict[Any, int] = {}
        self._key_bytes: dict[Any, bytes | None] = {}
        self._sticky = -1

    def init(self, context: Any) -> None:
        super().init(context)
        self._task = context._task
        self.topic = self._task.resolve_topic(self.topic_name)

    def fuse(self, downstream: Entry) -> Entry:
        """Sends the key and value with the record context's timestamp and headers (a sink has no children)."""
        task = self._task
        rc = self.context.record_context
        topic = self.topic
        partitioner = self.partitioner
        send = task.sender()
        cache = self._key_bytes
        cached_key = cache.get
        serialize_key = self.key_serde.serialize
        serialize_value = self.value_serde.serializer(topic, compact=not task.copies_on_send)
        production_failed = task.production_failed

        def sink(key: Any, value: Any) -> None:
            try:
                if type(key) in _IMMUTABLE:
                    key_bytes = cached_key(key)
                    if key_bytes is None:
                        key_bytes = serialize_key(topic, key)
                        if len(cache) >= _KEY_CACHE_LIMIT:
                            cache.clear()
                        cache[key] = key_bytes
                else:
                    key_bytes = serialize_key(topic, key)
                value_bytes = serialize_value(value)
            except SerializationError as e:
                if production_failed(topic, e):
                    return
                raise
            send(
                topic,
                key_bytes,
                value_bytes,
                rc.timestamp,
                rc.headers,
                None if partitioner is None else chosen_partition(partitioner, task, topic, key, value),
            )

        return sink

    def process_batch(self, batch: RecordBatch) -> None:
        """Writes the batch column-wise, split by target partition (null keys: one partition per batch)."""
        if (
            self.partitioner is not None
            or batch.key_serde != self.key_serde
            or batch.value_serde != self.value_serde
        ):
            return self.context.process_records_of(batch)
        topic = self.topic
        count = self._task.partition_count(topic)
        cache = self._partition_of
        if len(cache) > _KEY_CACHE_LIMIT:
            cache.clear()
        self._sticky = sticky = (self._sticky + 1) % count
        serialize = self.key_serde.serialize
        parts = np.empty(len(batch), dtype=np.int64)
        for i, key in enumerate(batch.keys):
            if key is None:
                parts[i] = sticky
                continue
            try:
                p = cache.get(key)
                if p is None:
                    p = cache[key] = default_partition(serialize(topic, key), count)  # type: ignore[arg-type]
            except TypeError:  # unhashable key (a dict): no caching
                p = default_partition(serialize(topic, key), count)  # type: ignore[arg-type]
            parts[i] = p
        targets = np.unique(parts)
        for p in targets:
            rows = batch if len(targets) == 1 else batch.take(parts == p)
            self._task.send_columnar(
                topic,
                ColumnarBatch(
                    rows.keys, rows.values, rows.timestamps, self.key_serde, self.value_serde, rows.headers
                ),
                int(p),
            )
        return None


class WindowedStreamPartitioner:
    """Kafka's ``WindowedStreamPartitioner``, which the DSL's ``to`` uses with a windowed key serde: a windowed
    key goes to the partition of its key alone (murmur2 of the inner key's bytes), whatever its window."""

    def __init__(self, serde: Any) -> None:
        self.serde = serde

    def partition(self, topic: str, key: Any, num_partitions: int) -> int | None:
        key_bytes = None if key is None else self.serde.serialize_base_key(topic, key)
        return None if key_bytes is None else default_partition(key_bytes, num_partitions)

    def __call__(self, key: Any, value: Any, num_partitions: int) -> int | None:
        raise TypeError("WindowedStreamPartitioner needs the topic: the sink calls partition(topic, key, n)")


def chosen_partition(partitioner: Any, task: Any, topic: str, key: Any, value: Any) -> int | None:
    """The partition a sink's ``partitioner`` picks for a record (None: the producer's own choice)."""
    if partitioner is None:
        return None
    count = task.partition_count(topic)
    if isinstance(partitioner, WindowedStreamPartitioner):
        partition = partitioner.partition(topic, key, count)
    else:
        partition = partitioner(key, value, count)
    if partition is not None and not 0 <= partition < count:
        raise ValueError(f"partitioner returned partition {partition} for topic {topic!r} with {count} partitions")
    return partition
