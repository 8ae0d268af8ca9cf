"""What librdkafka's error codes mean to kstream_nb, shared by the Kafka admin, producer and consumer.

Each set names the codes that call for one reaction (retry later, skip a commit the group moved past, give
up on credentials that will never be accepted, hand a transaction over); the helpers read the code out
of a ``KafkaException`` and build the errors kstream_nb raises for a refused login.
"""

from __future__ import annotations

from confluent_kafka import KafkaError, KafkaException

from kstream_nb.errors import AuthenticationError

#: Commit errors that mean "the group moved on": the partitions now belong to another member, which
#: resumes from the last committed offsets (at-least-once: some records are processed again).
REBALANCE_ERRORS = frozenset(
    {
        KafkaError.REBALANCE_IN_PROGRESS,
        KafkaError.ILLEGAL_GENERATION,
        KafkaError.UNKNOWN_MEMBER_ID,
        KafkaError.FENCED_INSTANCE_ID,
        KafkaError._ASSIGNMENT_LOST,
        KafkaError._NO_OFFSET,
    }
)
#: Consumer errors that only say a subscribed topic does not exist (yet): the app reports missing topics.
MISSING_TOPIC_ERRORS = frozenset({KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC})
#: Errors that say the broker is away for now (down, restarting, not answering in time): retried later.
BROKER_UNAVAILABLE_ERRORS = frozenset(
    {
        KafkaError._TRANSPORT,
        KafkaError._ALL_BROKERS_DOWN,
        KafkaError._TIMED_OUT,
        KafkaError._MSG_TIMED_OUT,
        KafkaError._WAIT_COORD,
        KafkaError._RESOLVE,
        KafkaError.REQUEST_TIMED_OUT,
        KafkaError.NETWORK_EXCEPTION,
        KafkaError.BROKER_NOT_AVAILABLE,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
        KafkaError.NOT_COORDINATOR,
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    }
)

#: Errors that say the broker refused the client's credentials (wrong SASL password or mechanism) or the
#: TLS handshake failed (``_SSL``: the broker's certificate is not trusted, no ``ssl.ca.location``; a
#: broker that goes away mid-handshake is ``_TRANSPORT`` instead). librdkafka reports them through
#: ``error_cb`` and retries for ever; like Java's clients, kstream_nb fails instead of waiting for a broker
#: that will never let it in.
AUTHENTICATION_ERRORS = frozenset(
    {KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED, KafkaError._SSL}
)

#: ListOffsets answers while a new topic's leader is being elected or a leader moves (librdkafka does not
#: flag them retriable in admin results; a broker that just took a new topic's leadership may answer with the
#: leader epoch errors for a moment)
LEADER_MOVING = frozenset(
    {
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        KafkaError._NOENT,
        KafkaError.UNKNOWN_LEADER_EPOCH,
        KafkaError.FENCED_LEADER_EPOCH,
        KafkaError.OFFSET_NOT_AVAILABLE,
    }
)

#: the transaction coordinator no longer holds the producer's transaction: it gave the transactional id a
#: newer epoch (the transaction timed out, or a newer producer registered) or lost its state (a restart
#: that aborted it); a new producer with the same transactional id can take over
FENCED = frozenset(
    {
        KafkaError._FENCED,
        KafkaError.PRODUCER_FENCED,
        KafkaError.INVALID_PRODUCER_EPOCH,
        KafkaError.INVALID_TXN_STATE,
        KafkaError.INVALID_PRODUCER_ID_MAPPING,
        KafkaError.UNKNOWN_PRODUCER_ID,
    }
)

#: what librdkafka reports for the records ``purge`` dropped (not delivery failures)
PURGED = (KafkaError._PURGE_QUEUE, KafkaError._PURGE_INFLIGHT)


def kafka_error(exc: BaseException) -> KafkaError | None:
    """The librdkafka error a KafkaException carries (None for other exceptions)."""
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return exc.args[0]
    return None


def error_code(exc: BaseException) -> int | None:
    """The librdkafka error code of a KafkaException (None for other exceptions)."""
    err = kafka_error(exc)
    return None if err is None else int(err.code())


def authentication_error(bootstrap_servers: str, detail: str) -> AuthenticationError:
    """The error a client raises when ``bootstrap_servers`` refused its credentials (``detail``: librdkafka's)."""
    return AuthenticationError(
        f"authentication with {bootstrap_servers} failed: {detail}; check security.protocol, and sasl.mechanism, "
        "sasl.username and sasl.password (SASL) or ssl.ca.location (TLS) in client_config"
    )
