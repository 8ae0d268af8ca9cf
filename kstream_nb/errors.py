"""Exceptions a user can see; each names what was wrong (topic, partition, offset, processor)."""

from __future__ import annotations


class StreamsError(Exception):
    """Base of every kstream_nb error."""


class TopologyError(StreamsError):
    """The topology is invalid (unknown node, missing store, co-partitioning violation, ...)."""


class UnknownTopicError(StreamsError):
    """A topic does not exist."""

    def __init__(self, topic: str, message: str | None = None) -> None:
        super().__init__(message or f"topic {topic!r} does not exist")
        self.topic = topic


class MissingSourceTopicError(StreamsError):
    """Source topics of the topology do not exist on the cluster."""

    def __init__(self, topics: list[str]) -> None:
        super().__init__(f"source topic(s) missing on the cluster: {', '.join(sorted(topics))}")
        self.topics = sorted(topics)


class BrokerUnavailableError(StreamsError):
    """The broker did not answer (down, restarting): nothing was lost, the caller retries later."""


class AuthenticationError(StreamsError):
    """The broker refused the client's credentials (SASL login, mechanism): retrying cannot help, the
    client settings (``security.protocol``, ``sasl.*``) must change."""


class TransactionError(StreamsError):
    """A transactional call failed: ``fatal`` (the producer cannot go on), ``fenced`` (fatal: the broker no
    longer holds the producer's transaction, after a timeout, a newer producer or a lost state; a new
    producer with the same id can take over), ``abortable`` (abort the transaction, then begin a new one)
    or ``retriable`` (call it again)."""

    def __init__(
        self,
        message: str,
        *,
        fatal: bool = False,
        fenced: bool = False,
        abortable: bool = False,
        retriable: bool = False,
        code: object = None,
    ) -> None:
        super().__init__(message)
        self.fatal, self.fenced, self.code = fatal, fenced, code
        self.abortable, self.retriable = abortable, retriable


class SerializationError(StreamsError):
    """A key or value could not be (de)serialized."""


class ProcessingError(StreamsError):
    """An error while processing a record, with where it happened."""

    def __init__(
        self,
        message: str,
        *,
        task_id: str | None = None,
        processor: str | None = None,
        topic: str | None = None,
        partition: int | None = None,
        offset: int | None = None,
    ) -> None:
        where = [
            f"{name}={value}"
            for name, value in (
                ("task", task_id),
                ("processor", processor),
                ("topic", topic),
                ("partition", partition),
                ("offset", offset),
            )
            if value is not None
        ]
        super().__init__(f"{message} ({', '.join(where)})" if where else message)
        self.task_id = task_id
        self.processor = processor
        self.topic = topic
        self.partition = partition
        self.offset = offset


class DeserializationError(ProcessingError):
    """A consumed record could not be deserialized."""


class InvalidStateStoreError(StreamsError):
    """A state store is not available (unknown name, app not running, or store closed)."""


class IllegalStateError(StreamsError):
    """An operation is not allowed in the app's current state."""
