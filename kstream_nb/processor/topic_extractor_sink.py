"""A sink whose topic is chosen per record (Kafka's ``TopicNameExtractor``): ``stream.to(extractor)``.

``extractor(key, value, record_context)`` returns the topic's name; ``record_context`` is where the record
came from (topic, partition, offset) with its timestamp and headers. As in Kafka Streams the topics are not
created: a name that is not a topic of the cluster fails the task with an ``UnknownTopicError`` naming it
(the production-exception handler may skip the record instead, as Kafka's KIP-1065). The topology test
driver, as Kafka's, accepts any topic.
"""

from __future__ import annotations

import functools
import inspect
import types
from collections.abc import Callable
from typing import Any, NamedTuple

from kstream_nb.cluster.records import Headers
from kstream_nb.cluster.serdes import Serde
from kstream_nb.errors import SerializationError, UnknownTopicError
from kstream_nb.processor.api import Processor, Record
from kstream_nb.processor.batch import RecordBatch
from kstream_nb.processor.node import NodeContext
from kstream_nb.processor.sink import StreamPartitioner, chosen_partition


class RecordContext(NamedTuple):
    """What a topic name extractor knows of the record besides its key and value (Kafka's RecordContext)."""

    topic: str | None
    partition: int
    offset: int
    timestamp: int
    headers: Headers


#: ``extractor(key, value, record_context) -> topic name`` (a two-argument ``extractor(key, value)`` works too)
TopicNameExtractor = Callable[..., str]


def describe_extractor(extractor: Any) -> str:
    """The extractor as ``describe()`` names it: a function's qualified name, else the object's own repr,
    else its class (Kafka prints the extractor's ``toString()``)."""
    target = extractor.func if isinstance(extractor, functools.partial) else extractor
    if isinstance(target, (types.FunctionType, types.BuiltinFunctionType, types.MethodType)):
        return f"{target.__module__}.{target.__qualname__}"
    cls = type(target)
    if cls.__repr__ is not object.__repr__:
        return repr(target)
    return f"{cls.__module__}.{cls.__qualname__}"


def _takes_context(extractor: Callable[..., Any]) -> bool:
    """True unless ``extractor`` takes exactly (key, value)."""
    try:
        params = inspect.signature(extractor).parameters.values()
    except (TypeError, ValueError):
        return True
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return True
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) != 2


class TopicExtractorSink(Processor):
    """Serializes each record and writes it to the topic ``extractor`` names for it."""

    context: NodeContext

    def __init__(self, extractor: TopicNameExtractor, key_serde: Serde, value_serde: Serde,
                 partitioner: StreamPartitioner | None = None) -> None:  # fmt: skip
        self.extractor = extractor
        self.with_context = _takes_context(extractor)
        self.key_serde = key_serde
        self.value_serde = value_serde
        self.partitioner = partitioner
        #: topics known to exist (checked once each)
        self._existing: set[str] = set()

    def init(self, context: Any) -> None:
        super().init(context)
        self._task = context._task

    def _topic_for(self, record: Record) -> str | None:
        ctx = self.context
        if self.with_context:
            meta = RecordContext(ctx.topic, ctx.partition, ctx.offset, record.timestamp, record.headers)
            topic = self.extractor(record.key, record.value, meta)
        else:
            topic = self.extractor(record.key, record.value)
        if not isinstance(topic, str) or not topic:
            raise TypeError(
                f"the topic name extractor {describe_extractor(self.extractor)} returned {topic!r} for key "
                f"{record.key!r}: it must return a topic name"
            )
        if topic not in self._existing:
            exists = getattr(self._task, "topic_exists", None)
            if exists is not None and not exists(topic):
                error = UnknownTopicError(
                    topic,
                    f"topic {topic!r}, named by the topic name extractor {describe_extractor(self.extractor)} for "
                    f"key {record.key!r}, does not exist: as in Kafka Streams, to(extractor) does not create "
                    "topics (create it first, e.g. ks.produce or the cluster's admin)",
                )
                if self._task.production_failed(topic, error):
                    return None
                raise error
            self._existing.add(topic)
        return topic

    def process(self, record: Record) -> None:
        topic = self._topic_for(record)
        if topic is None:
            return
        try:
            key_bytes = self.key_serde.serialize(topic, record.key)
            value_bytes = self.value_serde.serialize(topic, record.value)
        except SerializationError as e:
            if self._task.production_failed(topic, e):
                return
            raise
        partition = chosen_partition(self.partitioner, self._task, topic, record.key, record.value)
        self._task.send(topic, key_bytes, value_bytes, record.timestamp, record.headers, partition)

    def process_batch(self, batch: RecordBatch) -> None:
        """Record by record: each may go to another topic."""
        self.context.process_records_of(batch)
