"""Resetting an app to a point in time, as Kafka's ``kafka-streams-application-reset`` tool does.

``reset_app(application_id, bootstrap_servers, to=...)`` refuses while instances of the app run (this
process's apps, and the members of its consumer group on the cluster), commits the group's offsets of the
app's input topics at ``to`` (``"earliest"``, ``"latest"`` or a time: per partition the earliest offset
stamped at or after it, as the tool's ``--to-datetime``), deletes the app's internal topics (repartition,
changelog, foreign-key subscription topics and the ``<app>-assignment`` control topic) and wipes its local
state (``<state_dir>/<application_id>``, what the tool leaves to ``KafkaStreams.cleanUp()``). The next start
rebuilds the state from the inputs at ``to``.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kstream_nb.cluster.base import Admin, Cluster
from kstream_nb.cluster.connection import connect
from kstream_nb.cluster.records import TopicPartition
from kstream_nb.errors import StreamsError, UnknownTopicError
from kstream_nb.runtime.app import running_apps
from kstream_nb.runtime.config import StreamsConfig
from kstream_nb.runtime.control_topic import control_topic
from kstream_nb.time_bounds import TimeBound, to_epoch_ms
from kstream_nb.topology.naming import is_internal_topic


class AppRunningError(StreamsError):
    """An app cannot be reset while instances of it run; ``instances`` names them."""

    def __init__(self, application_id: str, instances: list[str]) -> None:
        super().__init__(
            f"cannot reset app {application_id!r}: {len(instances)} instance(s) still running "
            f"({'; '.join(instances)}); stop them first"
        )
        self.application_id = application_id
        self.instances = instances


@dataclass
class ResetResult:
    """What a reset did: the input offsets it committed, the topics it deleted, the state it wiped."""

    application_id: str
    to: str
    offsets: dict[TopicPartition, int] = field(default_factory=dict)
    deleted_topics: list[str] = field(default_factory=list)
    wiped_state_dir: str | None = None

    def lines(self) -> list[str]:
        """One line per thing done, for a notebook."""
        out = [f"offset {tp.topic}-{tp.partition} -> {offset}" for tp, offset in sorted(self.offsets.items())]
        out += [f"deleted topic {t}" for t in self.deleted_topics]
        if self.wiped_state_dir:
            out.append(f"wiped local state {self.wiped_state_dir}")
        return out

    def __repr__(self) -> str:
        return f"reset {self.application_id} to {self.to}:\n  " + "\n  ".join(self.lines() or ["nothing to do"])


def reset_app(
    application_id: str,
    bootstrap_servers: str = "memory://",
    to: TimeBound = "earliest",
    input_topics: Iterable[str] | None = None,
    state_dir: str | None = None,
    client_config: Mapping[str, Any] | None = None,
) -> ResetResult:
    """Resets ``application_id`` so that its next run processes its inputs from ``to`` with empty state.

    ``to``: ``"earliest"``, ``"latest"`` or a time (a ``datetime``, naive meaning UTC; epoch ms; ISO-8601;
    ``"-1h"``). ``input_topics``: the topics whose offsets move (Kafka's ``--input-topics``); by default the
    topics the group has committed offsets for, internal ones aside. ``state_dir``: the app's ``state_dir``
    setting (default: ``StreamsConfig``'s). Raises ``AppRunningError`` naming the running instances.
    """
    cluster = connect(bootstrap_servers, client_config)
    admin = cluster.admin()
    _refuse_while_running(application_id, bootstrap_servers, admin)
    label = to if isinstance(to, str) and to in ("earliest", "latest") else None
    target = None if label else to_epoch_ms(to, "to")
    result = ResetResult(application_id, label or f"{target} ms")
    topics = _input_topics(application_id, admin, input_topics)
    tps = _partitions(admin, topics, bootstrap_servers)
    if tps:
        if label == "earliest":
            offsets = admin.beginning_offsets(tps)
        elif label == "latest":
            offsets = admin.end_offsets(tps)
        else:
            assert target is not None
            offsets = admin.offsets_for_time(tps, target)
        _commit(cluster, application_id, offsets)
        result.offsets = dict(sorted(offsets.items()))
    internal = sorted(
        t
        for t in admin.list_topics()
        if is_internal_topic(t, application_id) or t == control_topic(application_id)
    )
    if internal:
        admin.delete_topics(internal)
    result.deleted_topics = internal
    folder = Path(state_dir or StreamsConfig.of(application_id=application_id).state_dir) / application_id
    if folder.exists():
        shutil.rmtree(folder)
        result.wiped_state_dir = str(folder)
    return result


def running_instances(application_id: str, bootstrap_servers: str, admin: Admin) -> list[str]:
    """The instances of ``application_id`` running now: this process's apps on that cluster, then the members
    of its consumer group (member id and the partitions it owns)."""
    found = [
        f"this process: {app.application_id} (process {app.process_id}, {app.state.value})"
        for app in running_apps()
        if app.application_id == application_id and app.config.bootstrap_servers == bootstrap_servers
    ]
    for member, partitions in sorted(admin.group_members(application_id).items()):
        owned = ", ".join(f"{tp.topic}-{tp.partition}" for tp in sorted(partitions)) or "no partitions"
        found.append(f"group member {member} ({owned})")
    return found


def _refuse_while_running(application_id: str, bootstrap_servers: str, admin: Admin) -> None:
    instances = running_instances(application_id, bootstrap_servers, admin)
    if instances:
        raise AppRunningError(application_id, instances)


def _input_topics(application_id: str, admin: Admin, given: Iterable[str] | None) -> list[str]:
    if given is not None:
        return sorted(set(given))
    control = control_topic(application_id)
    return sorted(
        {
            tp.topic
            for tp in admin.group_offsets(application_id)
            if not is_internal_topic(tp.topic, application_id) and tp.topic != control
        }
    )


def _partitions(admin: Admin, topics: list[str], bootstrap_servers: str) -> list[TopicPartition]:
    tps = []
    for topic in topics:
        count = admin.partition_count(topic)
        if count is None:
            raise UnknownTopicError(topic, f"input topic {topic!r} does not exist on {bootstrap_servers}")
        tps += [TopicPartition(topic, p) for p in range(count)]
    return tps


def _commit(cluster: Cluster, application_id: str, offsets: Mapping[TopicPartition, int]) -> None:
    """Commits ``offsets`` for the app's group from a consumer outside it (the group has no members, so Kafka
    takes commits from any client, as the reset tool's)."""
    consumer = cluster.consumer(application_id, {"client.id": f"{application_id}-reset"})
    try:
        consumer.commit(dict(offsets))
    finally:
        consumer.close()
