"""The control topic ``<application_id>-assignment`` of leader-assigned tasks on Kafka: one partition, compacted,
JSON values.

What the classic group gives (``cluster/kafka_group_member.py``): membership, a generation, eviction of dead
or stuck members, commit fencing, and one leader: the member that got partition 0 of this topic. What this
topic carries:

- ``member/<member id>``: each stream thread's status, published after each group assignment and each
  applied assignment, then every second: the generation (parsed from its ``consumer_group_metadata()``),
  process id, thread, interactive-query endpoint, ``client.rack``, the assignment epoch it applied, the tasks
  it holds (active, standby) and its task offset sums (KIP-441 lags); a tombstone when it leaves cleanly.
- ``assignment``: written by the leader only, in a transaction with ``transactional.id``
  ``<application_id>-assignment-leader`` (a new leader's ``init_transactions`` fences the previous one): an
  epoch, the generation it was computed for, per member id its active tasks (with partitions), standbys and
  warm-ups, the tasks *in transit* (moved, listed for nobody until their old owner released them), and the
  group view (owners, endpoints) that ``group_assignment()`` and interactive queries read.

Every member reads the topic ``read_committed`` and applies the newest assignment whose generation is at least
every generation seen before (the log is totally ordered, so all members agree); a zombie leader's record
of an older generation is ignored.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import orjson

from kstream_nb.cluster.base import Cluster, TopicSpec
from kstream_nb.cluster.records import TopicPartition
from kstream_nb.errors import StreamsError

log = logging.getLogger("kstream_nb.assignment")


def control_topic(application_id: str) -> str:
    return f"{application_id}-assignment"


def leader_transactional_id(application_id: str) -> str:
    return f"{application_id}-assignment-leader"


@dataclass(frozen=True)
class MemberStatus:
    """One stream thread (group member) as it last reported itself."""

    member_id: str
    generation: int
    process_id: str
    thread: str
    applied_epoch: int
    active: tuple[str, ...] = ()
    standby: tuple[str, ...] = ()
    offset_sums: Mapping[str, int] = field(default_factory=dict)
    endpoint: str | None = None
    rack: str | None = None
    heartbeat_ms: int = 0

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> MemberStatus:
        return cls(**{**data, "active": tuple(data["active"]), "standby": tuple(data["standby"])})


@dataclass(frozen=True)
class TaskAssignment:
    """An ``assignment`` record: who runs what after round ``epoch`` of the leader of ``generation``."""

    epoch: int
    generation: int
    leader: str
    #: member id -> {"active": {task id: [[topic, partition], ...]}, "standby": [...], "warmup": [...]}
    members: Mapping[str, Mapping[str, Any]]
    #: task id -> the member it goes to once its old owner released it
    in_transit: Mapping[str, str] = field(default_factory=dict)
    #: task id -> (thread, process id, standby process ids, partitions), as the assignor's group view
    group: Mapping[str, Any] = field(default_factory=dict)
    endpoints: Mapping[str, Any] = field(default_factory=dict)
    warmups: Mapping[str, Any] = field(default_factory=dict)
    #: per stateful task, each holder's lag at the round that computed the target; task -> {"from", "to"}
    lags: Mapping[str, Any] = field(default_factory=dict)
    moved: Mapping[str, Any] = field(default_factory=dict)
    #: user source topics the cluster lacked at the round: their tasks come once they exist
    missing_topics: tuple[str, ...] = ()

    def active_of(self, member_id: str) -> dict[str, list[TopicPartition]]:
        """Task id -> partitions of ``member_id``'s active tasks."""
        mine = self.members.get(member_id, {}).get("active", {})
        return {tid: [TopicPartition(t, p) for t, p in tps] for tid, tps in mine.items()}

    def standby_of(self, member_id: str) -> set[str]:
        return set(self.members.get(member_id, {}).get("standby", ()))

    def same_plan(self, other: TaskAssignment | None) -> bool:
        """Whether ``other`` gives the same tasks to the same members (epoch and view aside)."""
        return other is not None and (self.members, self.in_transit) == (other.members, other.in_transit)


def _loads_assignment(value: bytes) -> TaskAssignment:
    return TaskAssignment(**orjson.loads(value))


class ControlTopic:
    """One instance's reader and status writer of the control topic, shared by its stream threads."""

    def __init__(self, cluster: Cluster, application_id: str, client_config: Mapping[str, Any]) -> None:
        self.cluster = cluster
        self.application_id = application_id
        self.client_config = dict(client_config)
        self.topic = control_topic(application_id)
        admin = cluster.admin()
        admin.create_topics([TopicSpec(self.topic, 1, {"cleanup.policy": "compact"})], exist_ok=True)
        client = f"{application_id}-assignment"
        self._producer = cluster.producer({**client_config, "client.id": client, "linger.ms": 0})
        # assignments are transactional: read_committed hides an aborted (fenced) leader's records
        self._reader = cluster.consumer(
            None,
            {**client_config, "client.id": client, "isolation.level": "read_committed", "fetch.wait.max.ms": 10},
        )
        tp = self._tp = TopicPartition(self.topic, 0)
        self._admin = admin
        self._reader.assign([tp])
        self._reader.seek(tp, admin.beginning_offsets([tp])[tp])
        self._lock = threading.RLock()
        #: member id -> its last status
        self.statuses: dict[str, MemberStatus] = {}
        #: the assignment in force (the newest whose generation is not below any seen before)
        self.assignment: TaskAssignment | None = None
        #: bumped by every record applied (the leader recomputes when it changed)
        self.version = 0
        #: bumped by every assignment record taken (a member applies each new one)
        self.assignments_read = 0
        #: this instance's interactive-query endpoint, in its threads' statuses
        self.endpoint: str | None = None

    def refresh(self) -> None:
        """Applies the records published since the last refresh (never blocks)."""
        with self._lock:
            for batch in self._reader.poll(0):
                for record in batch.records:
                    self._apply(record.key, record.value)

    def _apply(self, key: Any, value: bytes | None) -> None:
        name = key.decode() if isinstance(key, bytes) else str(key)
        try:
            if name.startswith("member/"):
                member = name.removeprefix("member/")
                if value is None:
                    self.statuses.pop(member, None)
                else:
                    self.statuses[member] = MemberStatus.from_json(orjson.loads(value))
            elif name == "assignment" and value is not None:
                record = _loads_assignment(value)
                current = self.assignment
                if current is None or record.generation >= current.generation:
                    self.assignment = record
                    self.assignments_read += 1
                else:
                    log.warning("%s: assignment epoch %d of generation %d ignored (generation %d seen)",
                                self.topic, record.epoch, record.generation, current.generation)  # fmt: skip
        except (orjson.JSONDecodeError, TypeError, KeyError) as e:
            raise StreamsError(f"bad record {name!r} in control topic {self.topic}-0: {e}") from e
        self.version += 1

    def end_offset(self) -> int:
        """The control partition's end offset now (what a new leader reads up to before its first round)."""
        return self._admin.end_offsets([self._tp])[self._tp]

    def read_up_to(self, offset: int) -> bool:
        """Whether everything before ``offset`` has been read (committed records; aborted ones skipped)."""
        self.refresh()
        fetched = getattr(self._reader, "fetched_position", None)  # (a KafkaConsumer's: no request)
        position = fetched(self._tp) if fetched is not None else None
        return position is not None and position >= offset

    def publish_status(self, status: MemberStatus) -> None:
        self._producer.send(self.topic, f"member/{status.member_id}".encode(), orjson.dumps(asdict(status)))

    def leave(self, member_id: str) -> None:
        """A tombstone for a member that left (cleanly) or changed its member id."""
        self._producer.send(self.topic, f"member/{member_id}".encode(), None)
        with contextlib.suppress(StreamsError):
            self._producer.flush(2.0)

    def close(self) -> None:
        for closer in (lambda: self._producer.close(2.0), self._reader.close):
            with contextlib.suppress(Exception):
                closer()


class LeaderWriter:
    """The leader's transactional producer: each ``assignment`` record in its own transaction, under the
    shared transactional id that fences any previous leader (KIP-98 epochs)."""

    def __init__(self, cluster: Cluster, application_id: str, client_config: Mapping[str, Any]) -> None:
        self.topic = control_topic(application_id)
        self._producer = cluster.producer(
            {
                **client_config,
                "client.id": f"{application_id}-assignment-leader",
                "transactional.id": leader_transactional_id(application_id),
            }
        )
        self._producer.init_transactions()  # fences the previous leader (its open transaction is aborted)

    def publish(self, assignment: TaskAssignment) -> None:
        """Writes ``assignment`` in a transaction; raises when this leader was fenced or the broker refused."""
        self._producer.begin_transaction()
        self._producer.send(self.topic, b"assignment", orjson.dumps(asdict(assignment)))
        self._producer.commit_transaction()

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._producer.close(2.0)
