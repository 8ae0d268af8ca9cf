"""The Kafka consumer (confluent-kafka) behind the cluster contract, as Kafka's KafkaConsumer.

A group member subscribes with librdkafka's range assignor and reads the partitions the group gives it (a
stream thread instead pairs a ``KafkaGroupMember`` with a ``KafkaFetchConsumer``: its tasks come from the
assignment leader); a reader (no group) reads manually assigned partitions. ``poll`` returns
``FetchedBatch``es of raw columns, grouped per partition in fetch order. Rebalance callbacks run inside
``poll`` on the consumer's thread, as with the embedded cluster; offsets are committed asynchronously and
their answers come back through a later ``poll``.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from confluent_kafka import OFFSET_INVALID, KafkaError, KafkaException
from confluent_kafka import Consumer as CKConsumer
from confluent_kafka import TopicPartition as CKTopicPartition

from kstream_nb.cluster.base import Consumer, GroupAssignor, RebalanceListener
from kstream_nb.cluster.kafka_config import with_metadata
from kstream_nb.cluster.kafka_errors import (
    AUTHENTICATION_ERRORS,
    BROKER_UNAVAILABLE_ERRORS,
    MISSING_TOPIC_ERRORS,
    REBALANCE_ERRORS,
    authentication_error,
    error_code,
)
from kstream_nb.cluster.records import CREATE_TIME, LOG_APPEND_TIME, FetchedBatch, TopicPartition, as_tp
from kstream_nb.errors import BrokerUnavailableError, IllegalStateError, StreamsError

if TYPE_CHECKING:
    from kstream_nb.cluster.kafka import KafkaCluster

log = logging.getLogger("kstream_nb.kafka")


class KafkaConsumer(Consumer):
    """A confluent-kafka consumer behind the cluster contract; meant for one thread, like Kafka's."""

    def __init__(self, cluster: KafkaCluster, group_id: str | None, config: Mapping[str, Any]) -> None:
        self.cluster = cluster
        self.group_id = group_id
        self._broker_error: str | None = None
        self._auth_error: str | None = None
        conf = dict(config)
        if str(conf.get("group.protocol", "classic")).lower() != "classic":
            raise StreamsError(
                "kstream_nb's group members need the classic group protocol (its leader assigns the tasks); "
                f"remove group.protocol={conf['group.protocol']!r}"
            )
        reset = str(conf.get("auto.offset.reset", "earliest")).lower()
        if reset not in ("earliest", "latest", "none", "smallest", "largest", "beginning", "end", "error"):
            raise StreamsError(f"auto.offset.reset must be earliest, latest or none, got {reset!r}")
        self.auto_offset_reset = {"smallest": "earliest", "beginning": "earliest", "largest": "latest",
                                  "end": "latest", "error": "none"}.get(reset, reset)  # fmt: skip
        strategy = conf.get("partition.assignment.strategy")
        if group_id is not None and strategy not in (None, "range"):
            log.warning("partition.assignment.strategy=%r replaced by 'range'", strategy)
        if group_id is not None:
            # notice soon when a missing subscribed topic is created (librdkafka's default is 5 minutes)
            conf.setdefault("topic.metadata.refresh.interval.ms", 10_000)
        conf.update(
            {
                "group.id": group_id or f"kstream-nb-manual-{uuid.uuid4().hex[:12]}",
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "enable.partition.eof": True,
                "auto.offset.reset": "error" if self.auto_offset_reset == "none" else self.auto_offset_reset,
                "partition.assignment.strategy": "range",
            }
        )
        # librdkafka reports "broker away" (all brokers down, transport failure) here, not through consume()
        conf.setdefault("error_cb", self._on_client_error)
        conf["on_commit"] = self._on_commit
        self.config = conf
        self._consumer = CKConsumer(conf)
        self._closed = False
        self._subscribed = False
        self._manual = False
        self._topics: list[str] = []
        self._listener: RebalanceListener | None = None
        self._assigned: set[TopicPartition] = set()
        self._positions: dict[TopicPartition, int] = {}
        #: per partition, the offset of its last end-of-partition event
        self._ends: dict[TopicPartition, int] = {}
        self._paused: set[TopicPartition] = set()
        self._dirty = False  # manual assignment changed: applied (with the sought offsets) at the next use
        self._pending_seeks: dict[TopicPartition, int] = {}
        self._rebalances = 0
        self._lost = False
        #: per partition, the newest offset sent by ``commit_async`` (its client TopicPartition)
        self._sent: dict[TopicPartition, Any] = {}
        #: sent offsets the broker did not take while away, and nothing newer sent since: sent again
        self._resend: dict[TopicPartition, Any] = {}
        self._commits_in_flight = 0
        self._commit_error: str | None = None

    def __repr__(self) -> str:
        return f"KafkaConsumer({self.cluster.bootstrap_servers!r}, group={self.group_id!r})"

    # ---- group membership ----------------------------------------------------------------------

    def subscribe(
        self,
        topics: Iterable[str],
        listener: RebalanceListener | None = None,
        assignor: GroupAssignor | None = None,
        userdata: Callable[[], Any] | None = None,
    ) -> None:
        self._check_open()
        self._require_group()
        if self._manual:
            raise IllegalStateError("cannot subscribe: partitions were assigned manually with assign()")
        if assignor is not None:
            raise StreamsError(
                f"{type(assignor).__name__} cannot run on a Kafka group: librdkafka assigns the partitions "
                "(stream threads take their tasks from the assignment leader: runtime/task_handover.py)"
            )
        self._topics = sorted(set(topics))
        self._listener = listener
        self._consumer.subscribe(
            self._topics, on_assign=self._on_assign, on_revoke=self._on_revoke, on_lost=self._on_lost
        )
        self._subscribed = True

    def _on_assign(self, consumer: Any, partitions: list[CKTopicPartition]) -> None:
        self._rebalances += 1
        tps = {TopicPartition(p.topic, p.partition) for p in partitions}
        self._assigned = tps
        self._positions = {}
        self._paused = set()
        self._lost = False
        consumer.assign(partitions)
        # librdkafka keeps a partition's pause across assignments
        if tps:
            consumer.resume(partitions)
        log.debug("%s assigned %s", self, sorted(map(str, tps)))
        if self._listener is not None:
            self._listener.on_partitions_assigned(set(tps), None)

    def _on_revoke(self, consumer: Any, partitions: list[CKTopicPartition]) -> None:
        self._rebalances += 1
        tps = {TopicPartition(p.topic, p.partition) for p in partitions}
        try:
            if tps and self._listener is not None:
                self._listener.on_partitions_revoked(set(tps))
        finally:
            self._assigned = set()
            self._positions = {}
            self._paused = set()
            self._resend = {}  # offsets of the member's previous generation are no longer its to commit

    def _on_lost(self, consumer: Any, partitions: list[CKTopicPartition]) -> None:
        # the member was thrown out of the group (session timeout): others own the partitions now, so
        # nothing may be committed for them
        self._lost = True
        try:
            self._on_revoke(consumer, partitions)
        finally:
            self._lost = False

    def take_broker_error(self) -> str | None:
        error, self._broker_error = self._broker_error, None
        return error

    @property
    def member_id(self) -> str | None:
        if not self._subscribed or self._closed:
            return None
        return self._consumer.memberid() or None

    def request_rebalance(self) -> None:
        self._check_open()
        if not self._subscribed:
            raise IllegalStateError("request_rebalance needs a group subscription")
        # subscribing again makes the member rejoin the group
        self._consumer.subscribe(
            self._topics, on_assign=self._on_assign, on_revoke=self._on_revoke, on_lost=self._on_lost
        )

    # ---- manual assignment ---------------------------------------------------------------------

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        self._check_open()
        if self._subscribed:
            raise IllegalStateError("cannot assign: the consumer is subscribed to a group")
        self._manual = True
        self._assigned = {as_tp(tp) for tp in partitions}
        self._positions = {tp: off for tp, off in self._positions.items() if tp in self._assigned}
        self._paused &= self._assigned
        if self._assigned:
            self._dirty = True  # applied with the offsets sought before the next poll
        else:
            self._dirty = False
            self._consumer.assign([])

    def _apply_assignment(self) -> None:
        if not self._dirty:
            return
        self._dirty = False
        self._consumer.assign(
            [
                CKTopicPartition(tp.topic, tp.partition, self._positions.get(tp, OFFSET_INVALID))
                for tp in sorted(self._assigned)
            ]
        )
        # librdkafka keeps a partition's pause across assignments: set both ways explicitly
        running = self._assigned - self._paused
        if running:
            self._consumer.resume([CKTopicPartition(tp.topic, tp.partition) for tp in running])
        if self._paused:
            self._consumer.pause([CKTopicPartition(tp.topic, tp.partition) for tp in self._paused])

    def assignment(self) -> set[TopicPartition]:
        return set(self._assigned)

    # ---- reading -------------------------------------------------------------------------------

    def poll(self, timeout: float, max_records: int = 10_000) -> list[FetchedBatch]:
        self._check_open()
        self._apply_assignment()
        self._apply_seeks()
        max_records = max(1, int(max_records))
        consume = self._consumer.consume
        messages = consume(max_records, 0)
        if not messages and timeout > 0:
            # consume(n, t) waits until n messages or t: wait for one, then take what is already there
            messages = consume(1, timeout)
            if messages and max_records > 1:
                before = self._rebalances
                more = consume(max_records - 1, 0)
                # after a rebalance, what came before it belongs to the previous assignment (librdkafka
                # already drops it within one consume call)
                messages = more if self._rebalances != before else messages + more
        if self._auth_error is not None:
            raise authentication_error(self.cluster.bootstrap_servers, self._auth_error)
        if self._commit_error is not None:
            raise StreamsError(f"{self}: {self._commit_error}")
        return self._batches(messages)

    def _batches(self, messages: list[Any]) -> list[FetchedBatch]:
        columns: dict[tuple[str, int], tuple[list[int], list[Any], list[Any], list[int], list[Any], int]] = {}
        assigned = self._assigned
        positions = self._positions
        eof: dict[TopicPartition, int] = {}
        for msg in messages:
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    offset = msg.offset()
                    if offset is not None and offset >= 0:
                        eof[TopicPartition(msg.topic(), msg.partition())] = offset
                else:
                    self._handle_error(msg, err)
                continue
            key = (msg.topic(), msg.partition())
            cols = columns.get(key)
            if cols is None:
                ts_type, _ = msg.timestamp()
                kind = LOG_APPEND_TIME if ts_type == 2 else CREATE_TIME
                cols = columns[key] = ([], [], [], [], [], kind)
            cols[0].append(msg.offset())
            cols[1].append(msg.key())
            cols[2].append(msg.value())
            cols[3].append(msg.timestamp()[1])
            headers = msg.headers()
            cols[4].append(tuple(headers) if headers else ())
        out = []
        for (topic, partition), (offsets, keys, values, timestamps, headers, kind) in columns.items():
            tp = TopicPartition(topic, partition)
            if tp not in assigned:
                continue
            end = eof.pop(tp, None)
            positions[tp] = max(offsets[-1] + 1, end or 0)
            if end is not None and end == positions[tp]:
                self._ends[tp] = end
            out.append(
                FetchedBatch(
                    topic,
                    partition,
                    offsets[0],
                    raw=(offsets, keys, values, timestamps, headers),
                    timestamp_type=kind,
                )
            )
        for tp, offset in eof.items():
            if tp in assigned:
                positions[tp] = offset  # the end of the partition: nothing more to read for now
                self._ends[tp] = offset
        return out

    def _on_client_error(self, err: KafkaError) -> None:
        if err.code() in AUTHENTICATION_ERRORS:
            self._auth_error = err.str()  # raised by the next poll()
        elif err.code() in BROKER_UNAVAILABLE_ERRORS:
            self._broker_error = err.str()
        else:
            log.warning("%s: %s", self, err.str())

    def _handle_error(self, msg: Any, err: KafkaError) -> None:
        code = err.code()
        if err.fatal():
            raise StreamsError(f"Kafka consumer of {self.cluster.bootstrap_servers} failed: {err.str()}")
        if code in MISSING_TOPIC_ERRORS:
            log.debug("%s: %s", self, err.str())
            return
        if code in BROKER_UNAVAILABLE_ERRORS:
            self._broker_error = err.str()  # the stream thread reports the broker unreachable
        if code == KafkaError._AUTO_OFFSET_RESET:
            where = f"{msg.topic()}-{msg.partition()}" if msg.topic() else "a partition"
            raise StreamsError(
                f"{where} has no valid offset to start from and auto.offset.reset is 'none': {err.str()}"
            )
        log.warning("%s: %s", self, err.str())

    # ---- positions -----------------------------------------------------------------------------

    def seek(self, partition: TopicPartition, offset: int) -> None:
        tp = self._seek_position(partition, offset)
        if self._manual:
            # librdkafka cannot seek a partition it has not started fetching: assign again from there
            self._dirty = True
        else:
            self._pending_seeks[tp] = int(offset)
            self._apply_seeks()

    def _apply_seeks(self) -> None:
        for tp, offset in list(self._pending_seeks.items()):
            if tp not in self._assigned:
                del self._pending_seeks[tp]
                continue
            try:
                self._consumer.seek(CKTopicPartition(tp.topic, tp.partition, offset))
            except KafkaException as e:
                if error_code(e) == KafkaError._STATE:
                    continue  # not fetching yet: try again at the next poll
                raise StreamsError(f"cannot seek {tp} to offset {offset}: {e}") from e
            del self._pending_seeks[tp]

    def position(self, partition: TopicPartition) -> int:
        tp = as_tp(partition)
        self._check_assigned(tp)
        pos = self._positions.get(tp)
        if pos is not None:
            return pos
        if not self._dirty:
            current = self._consumer.position([CKTopicPartition(tp.topic, tp.partition)])[0].offset
            if current is not None and current >= 0:
                return int(current)
        committed = self._committed_offsets([tp]).get(tp) if self._subscribed else None
        if committed is None:
            if self.auto_offset_reset == "none":
                raise StreamsError(f"partition {tp} has no committed offset and auto.offset.reset is 'none'")
            if self.auto_offset_reset == "earliest":
                committed = self.cluster.beginning_offsets([tp])[tp]
            else:
                committed = self.cluster.end_offsets([tp])[tp]
        if self._manual:
            self._positions[tp] = committed
            self._dirty = True
        return committed

    def fetched_to_end(self, partition: TopicPartition) -> bool:
        """Whether the last thing fetched of ``partition`` was its end (librdkafka's end-of-partition event, at
        the last stable offset when reading committed) and no record after it came since."""
        tp = as_tp(partition)
        end = self._ends.get(tp)
        return end is not None and self._positions.get(tp) == end

    def fetched_position(self, partition: TopicPartition) -> int | None:
        """Where fetching stands in ``partition`` (past the last record or end-of-partition seen), or None
        before anything was fetched; no request to the broker."""
        return self._positions.get(as_tp(partition))

    def pause(self, partitions: Iterable[TopicPartition]) -> None:
        tps = [as_tp(tp) for tp in partitions]
        for tp in tps:
            self._check_assigned(tp)
        self._paused.update(tps)
        if not self._dirty:
            self._consumer.pause([CKTopicPartition(tp.topic, tp.partition) for tp in tps])

    def resume(self, partitions: Iterable[TopicPartition]) -> None:
        tps = [as_tp(tp) for tp in partitions]
        self._paused.difference_update(tps)
        if not self._dirty:
            known = [tp for tp in tps if tp in self._assigned]
            if known:
                self._consumer.resume([CKTopicPartition(tp.topic, tp.partition) for tp in known])

    def paused(self) -> set[TopicPartition]:
        return set(self._paused)

    # ---- offsets -------------------------------------------------------------------------------

    def _checked(
        self, offsets: Mapping[TopicPartition, int], metadata: Mapping[TopicPartition, str] | None
    ) -> list[Any]:
        self._check_open()
        self._require_group()
        checked = []
        for tp, offset in offsets.items():
            tp = as_tp(tp)
            if not isinstance(offset, int) or offset < 0:
                raise StreamsError(f"cannot commit offset {offset!r} for partition {tp}")
            checked.append(with_metadata(tp, offset, metadata))
        return checked

    def commit(
        self, offsets: Mapping[TopicPartition, int], metadata: Mapping[TopicPartition, str] | None = None
    ) -> None:
        """Commits, for each partition, the offset of the next record to read, and waits for the broker.

        When the group has moved the partitions to another member meanwhile, nothing is committed and a
        warning is logged: the new owner resumes from the previous commit (at-least-once).
        """
        checked = self._checked(offsets, metadata)
        if not checked:
            return
        if self._lost:
            log.warning("%s lost its partitions: offsets %s not committed", self, offsets)
            return
        try:
            result = self._consumer.commit(offsets=checked, asynchronous=False)
        except KafkaException as e:
            self._raise_commit_error(e.args[0] if e.args else None, f"offsets {dict(offsets)}", str(e))
            return
        for tp_result in result:
            if tp_result.error is not None:
                where = f"offset {tp_result.offset} of {tp_result.topic}-{tp_result.partition}"
                self._raise_commit_error(tp_result.error, where, tp_result.error.str())

    def _raise_commit_error(self, err: object, what: str, detail: str) -> None:
        code = err.code() if isinstance(err, KafkaError) else None
        if code in REBALANCE_ERRORS:
            log.warning("%s: commit of %s skipped, the group is rebalancing: %s", self, what, detail)
            return
        if code in BROKER_UNAVAILABLE_ERRORS:
            raise BrokerUnavailableError(f"cannot commit {what} now: {detail}")
        raise StreamsError(f"cannot commit {what}: {detail}")

    def commit_async(
        self, offsets: Mapping[TopicPartition, int], metadata: Mapping[TopicPartition, str] | None = None
    ) -> None:
        """Sends the commit and returns: librdkafka lets one thread at a time into a consumer, so a commit
        waiting for an absent coordinator would hold the stream thread's next poll and its close. The answer
        comes back through a later ``poll``: "broker away" is reported by ``take_broker_error`` and the
        offsets are sent again with the next commit (unless newer ones were sent); another error is raised.
        A rebalance or ``close`` waits for the commits in flight before the partitions move on."""
        checked = self._checked(offsets, metadata)
        if self._lost:
            if checked:
                log.warning("%s lost its partitions: offsets %s not committed", self, offsets)
            return
        for tp in list(self._resend):
            if tp in offsets or tp not in self._assigned:
                del self._resend[tp]
        batch = checked + list(self._resend.values())
        self._resend.clear()
        if not batch:
            return
        for p in batch:
            self._sent[TopicPartition(p.topic, p.partition)] = p
        self._commits_in_flight += 1
        try:
            self._consumer.commit(offsets=batch, asynchronous=True)
        except KafkaException as e:
            self._commits_in_flight -= 1
            self._raise_commit_error(e.args[0] if e.args else None, f"offsets {dict(offsets)}", str(e))

    def _on_commit(self, err: KafkaError | None, partitions: list[CKTopicPartition]) -> None:
        """The answer to a ``commit_async`` (run inside poll or close)."""
        self._commits_in_flight = max(0, self._commits_in_flight - 1)
        for p in partitions:
            error = p.error or err
            if error is None:
                continue
            tp = TopicPartition(p.topic, p.partition)
            code = error.code()
            if code in REBALANCE_ERRORS:
                log.warning("%s: commit of offset %s for %s skipped: %s", self, p.offset, tp, error.str())
            elif code in BROKER_UNAVAILABLE_ERRORS:
                self._broker_error = f"cannot commit offset {p.offset} for {tp} now: {error.str()}"
                sent = self._sent.get(tp)
                if sent is not None and sent.offset == p.offset and tp in self._assigned:
                    self._resend[tp] = sent
                    log.info("%s: offset %s for %s not committed (%s): sent again with the next commit",
                             self, p.offset, tp, error.str())  # fmt: skip
            elif self._commit_error is None:
                self._commit_error = f"cannot commit offset {p.offset} for {tp}: {error.str()}"

    def _committed(self, tps: list[TopicPartition]) -> list[Any]:
        if not tps:
            return []
        try:
            return list(
                self._consumer.committed(
                    [CKTopicPartition(tp.topic, tp.partition) for tp in tps], timeout=self.cluster.timeout_s
                )
            )
        except KafkaException as e:
            also = ""
            if error_code(e) == KafkaError._TIMED_OUT:
                answer = self._committed_by_admin(tps)
                if not isinstance(answer, str):
                    return answer
                also = f"; through the admin client: {answer}"
            message = f"cannot read the committed offsets of group {self.group_id!r}: {e}{also}"
            if error_code(e) in BROKER_UNAVAILABLE_ERRORS:  # (a timeout: unstable offsets, a coordinator loading)
                raise BrokerUnavailableError(message) from e
            raise StreamsError(message) from e

    def _committed_by_admin(self, tps: list[TopicPartition]) -> list[Any] | str:
        """The group's stable committed offsets asked through the admin client, after the consumer's own fetch
        timed out: seen after a broker restart, the consumer's fetch kept timing out for minutes while the
        group's coordinator answered other clients. Why not, when this fails too."""
        try:
            answer = self.cluster.admin().committed_partitions(str(self.group_id), tps, require_stable=True)
        except KafkaException as e:
            log.warning("%s: the committed offsets asked through the admin client too: %s", self, e)
            return str(e)
        log.info("%s: committed offsets read through the admin client (the consumer's fetch timed out)", self)
        return answer

    def _committed_offsets(self, tps: list[TopicPartition]) -> dict[TopicPartition, int | None]:
        out: dict[TopicPartition, int | None] = {}
        for r in self._committed(tps):
            offset = r.offset
            out[TopicPartition(r.topic, r.partition)] = int(offset) if offset is not None and offset >= 0 else None
        return out

    def committed(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int | None]:
        self._require_group()
        tps = [as_tp(tp) for tp in partitions]
        return self._committed_offsets(tps)

    def committed_metadata(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, str]:
        self._require_group()
        return {
            TopicPartition(r.topic, r.partition): r.metadata
            for r in self._committed([as_tp(tp) for tp in partitions])
            if r.metadata
        }

    def group_metadata(self) -> Any:
        """The group's metadata (member, generation) for ``send_offsets_to_transaction``."""
        self._check_open()
        self._require_group()
        return self._consumer.consumer_group_metadata()

    def close(self, timeout: float | None = None) -> None:
        """Leaves the group once the commits in flight are answered; with ``timeout``, a close still waiting
        for them after that long (the coordinator is away) goes on in the background, where librdkafka
        gives up on those commits within a session timeout."""
        if self._closed:
            return
        try:
            if timeout is None or self._commits_in_flight == 0:
                self._consumer.close()  # leaves the group: the revoke callback (which may commit) runs here
                return
            self._listener = None  # the owner has moved on: the revocation in the background is not its
            closing = threading.Thread(target=self._consumer.close, name=f"{self}-close", daemon=True)
            closing.start()
            closing.join(timeout)
        finally:
            self._closed = True
            self._assigned = set()
            self._positions = {}
        if closing.is_alive():
            log.warning(
                "%s: %d offset commit(s) still wait for the group coordinator; the consumer closes in the "
                "background (what they did not commit is processed again at the next start)",
                self,
                self._commits_in_flight,
            )

    def __enter__(self) -> KafkaConsumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
