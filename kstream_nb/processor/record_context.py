"""The record being processed (Kafka Streams' ProcessorRecordContext): one mutable object per task.

The task's loop writes its fields before each record; every node context of the task shares it, so
processors read the record's topic, partition, offset, timestamp and headers from it, and a forward with
a new timestamp or headers sets them for the children and restores them after.
"""

from __future__ import annotations

from kstream_nb.cluster.records import Headers


class RecordContext:
    """Topic, partition, offset, timestamp and headers of the current record (topic None: a punctuation)."""

    __slots__ = ("headers", "offset", "partition", "timestamp", "topic")

    def __init__(self, partition: int) -> None:
        self.topic: str | None = None
        self.partition = partition
        self.offset = -1
        self.timestamp = -1
        self.headers: Headers = ()

    def __repr__(self) -> str:
        return (
            f"RecordContext(topic={self.topic!r}, partition={self.partition}, offset={self.offset}, "
            f"timestamp={self.timestamp}, headers={self.headers!r})"
        )
