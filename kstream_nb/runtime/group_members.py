"""Who is in the group on Kafka, and where standby tasks go there.

On Kafka, librdkafka's range assignor hands out the partitions and a member learns nothing about the
others (see ``cluster/kafka_assignment.py``). So each stream thread publishes what it holds (member id,
instance, active and standby tasks, a heartbeat time) to the compacted topic
``<application_id>-group-members``, one record per thread and a tombstone when it leaves, and reads
everybody's records back. From that view come the all-instances view (``app.group_assignment()``), the
interactive-query metadata (each record carries its instance's ``application_server`` endpoint) and
the placement of standby tasks. The view is advisory: the group alone decides the active tasks, and a
member that died without a tombstone drops out once its heartbeat is older than ``stale_after_ms``.

Standby placement follows the range assignor: members are ordered by member id (which starts with the
stable client id, ``<application_id>-<process_id>-StreamThread-N``), and the standby of a task goes to
the member that the range assignor would give the task to if the active task's whole instance left the
group. When that instance dies, the task moves exactly to the member that kept it warm (seed 004).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from kstream_nb.cluster.base import Cluster, TopicSpec
from kstream_nb.cluster.records import TopicPartition
from kstream_nb.errors import StreamsError


@dataclass(frozen=True)
class Member:
    """One stream thread of one instance, as it last reported itself."""

    key: str
    member_id: str
    process_id: str
    thread: str
    active: tuple[str, ...]
    standby: tuple[str, ...]
    assigned_ms: int
    heartbeat_ms: int
    #: task id -> the partitions it reads (``topic-partition``), so every member can show them
    partitions: Mapping[str, list[str]] = field(default_factory=dict)
    #: the instance's interactive-query endpoint ``host:port`` (``application_server``), or None
    endpoint: str | None = None


def group_members_topic(application_id: str) -> str:
    return f"{application_id}-group-members"


class GroupMembers:
    """The shared board of one app instance: publishes its threads' records and reads everyone's."""

    def __init__(self, cluster: Cluster, application_id: str, client_config: Mapping[str, Any]) -> None:
        self.topic = group_members_topic(application_id)
        timeout = 45_000  # librdkafka's default; Kafka Streams' prefixed settings win (later in the tuple)
        for name in ("session.timeout.ms", "consumer.session.timeout.ms", "main.consumer.session.timeout.ms"):
            timeout = int(client_config.get(name, timeout))
        #: a member silent for longer than this is gone (it died: the group has moved its tasks by then)
        self.stale_after_ms = 2 * timeout
        admin = cluster.admin()
        admin.create_topics([TopicSpec(self.topic, 1, {"cleanup.policy": "compact"})], exist_ok=True)
        self._producer = cluster.producer({**client_config, "client.id": f"{application_id}-group-members"})
        self._consumer = cluster.consumer(None, {**client_config, "client.id": f"{application_id}-group-members"})
        tp = TopicPartition(self.topic, 0)
        self._consumer.assign([tp])
        self._consumer.seek(tp, admin.beginning_offsets([tp])[tp])
        self._members: dict[str, Member] = {}
        self._lock = threading.Lock()
        #: this instance's interactive-query endpoint, added to each record it publishes
        self.endpoint: str | None = None

    def publish(self, member: Member) -> None:
        value = orjson.dumps({**member.__dict__, "endpoint": member.endpoint or self.endpoint})
        self._producer.send(self.topic, member.key.encode(), value)

    def leave(self, key: str) -> None:
        """A tombstone: the thread left the group cleanly (best effort: a member that cannot say so drops
        out of the view once its heartbeat is stale)."""
        self._producer.send(self.topic, key.encode(), None)
        with contextlib.suppress(StreamsError):
            self._producer.flush(2.0)

    def refresh(self) -> None:
        """Applies the records published since the last refresh (never blocks)."""
        with self._lock:
            for batch in self._consumer.poll(0):
                for record in batch.records:
                    key = record.key.decode() if isinstance(record.key, bytes) else str(record.key)
                    if record.value is None:
                        self._members.pop(key, None)
                        continue
                    data = orjson.loads(record.value)
                    data["active"], data["standby"] = tuple(data["active"]), tuple(data["standby"])
                    self._members[key] = Member(**data)

    def live(self, now_ms: int | None = None) -> list[Member]:
        """Members heard from recently, ordered by member id (the range assignor's order)."""
        now = int(time.time() * 1000) if now_ms is None else now_ms
        with self._lock:
            members = [m for m in self._members.values() if now - m.heartbeat_ms <= self.stale_after_ms]
        return sorted(members, key=lambda m: m.member_id)

    def close(self) -> None:
        for closer in (lambda: self._producer.close(2.0), self._consumer.close):
            with contextlib.suppress(Exception):  # best effort: the view is advisory
                closer()


def active_owners(members: list[Member]) -> dict[str, Member]:
    """Task id -> the member that claims it; the latest assignment wins while a rebalance settles."""
    owners: dict[str, Member] = {}
    for member in members:
        for task_id in member.active:
            current = owners.get(task_id)
            if current is None or member.assigned_ms > current.assigned_ms:
                owners[task_id] = member
    return owners


def range_owner(partition: int, partitions: int, members: int) -> int:
    """Index of the member that the range assignor gives ``partition`` to (members in sorted order)."""
    per, extra = divmod(partitions, members)
    boundary = extra * (per + 1)  # the first ``extra`` members get one partition more
    if partition < boundary:
        return partition // (per + 1)
    return extra + (partition - boundary) // per


def standby_placement(
    members: list[Member], task_partitions: Mapping[str, tuple[int, int]], stateful: set[str], replicas: int
) -> dict[str, list[Member]]:
    """Task id -> the members that keep standby copies: where the task would go if its active instance
    left, then if that one left too, ...; always on instances other than the active one.

    ``task_partitions`` maps a task id to (its partition, its sub-topology's partition count).
    """
    owners = active_owners(members)
    result: dict[str, list[Member]] = {}
    for task_id in sorted(stateful):
        owner = owners.get(task_id)
        if owner is None or task_id not in task_partitions:
            continue
        partition, partitions = task_partitions[task_id]
        gone = {owner.process_id}
        chosen: list[Member] = []
        for _ in range(replicas):
            remaining = [m for m in members if m.process_id not in gone]
            if not remaining:
                break
            target = remaining[range_owner(partition, partitions, len(remaining))]
            chosen.append(target)
            gone.add(target.process_id)
        if chosen:
            result[task_id] = chosen
    return result
