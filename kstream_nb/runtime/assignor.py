"""The streams partition assignor: tasks from the topology and topic metadata, spread over members.

Runs once per rebalance on behalf of the whole group (all stream threads of all instances with the same
application id). It also creates the internal topics, because only now are the source partition
counts known: repartition topics get the partition count of the sub-topology that writes them,
changelog topics one partition per task. ``assign`` places the tasks over the instances with Kafka
Streams' HighAvailabilityTaskAssignor (``runtime/assignment/``: state-aware, warm-ups, probing rebalances,
rack-aware standbys), then over each instance's threads. On ``memory://`` the embedded group runs it as
the group's assignor; on Kafka the assignment leader runs it over the members' statuses
(``assignment_leader.py``), after ``prepare`` created the internal topics before the members joined.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from kstream_nb.cluster.base import Admin, Assignment, Subscription, TopicSpec
from kstream_nb.cluster.records import TopicPartition
from kstream_nb.errors import TopologyError
from kstream_nb.runtime.assignment.client_state import (
    LATEST_OFFSET,
    UNKNOWN_OFFSET_SUM,
    AssignmentConfigs,
    ClientAssignment,
    ClientState,
)
from kstream_nb.runtime.assignment.high_availability import assign_tasks
from kstream_nb.runtime.assignment.standby import assign_standbys
from kstream_nb.runtime.task_id import TaskId
from kstream_nb.state.builders import changelog_topic_config
from kstream_nb.topology.naming import changelog_topic, prefixed
from kstream_nb.topology.topology import Topology

log = logging.getLogger("kstream_nb.assignor")


@dataclass(frozen=True)
class TaskInfo:
    """A task id and the partitions it reads."""

    task_id: str
    subtopology: int
    partition: int
    partitions: tuple[TopicPartition, ...]


class StreamsPartitionAssignor:
    """Computes tasks (one per partition number of each sub-topology) and assigns them sticky and balanced."""

    def __init__(
        self,
        topology: Topology,
        application_id: str,
        admin: Admin,
        num_standby_replicas: int = 0,
        windowstore_changelog_additional_retention_ms: int = 86_400_000,
        assignment_configs: AssignmentConfigs | None = None,
    ) -> None:
        self.num_standby_replicas = num_standby_replicas
        #: KIP-441's settings (acceptable_recovery_lag, max_warmup_replicas, probing_rebalance_interval_ms)
        self.assignment_configs = replace(
            assignment_configs or AssignmentConfigs(), num_standby_replicas=num_standby_replicas
        )
        self.windowstore_changelog_additional_retention_ms = windowstore_changelog_additional_retention_ms
        self.topology = topology
        self.application_id = application_id
        self.admin = admin
        self.missing_topics: list[str] = []
        #: this instance's interactive-query endpoint (``application_server``), sent with each subscription as
        #: Kafka Streams' SubscriptionInfo carries it; and the group-wide ``{"all", "endpoints"}`` of the last
        #: assignment received (memory://; Kafka's StreamsMetadataState, filled in ``onAssignment``)
        self.endpoint: str | None = None
        self.group_hosts: dict[str, Any] = {}
        self._last_owners: dict[str, Any] = {}  # task -> instance, of the last assignment made here
        self._lock = threading.Lock()

    def subscription_userdata(self) -> dict[str, Any]:
        """What this instance adds to each of its members' subscriptions (its endpoint)."""
        return {"endpoint": self.endpoint}

    def on_assignment(self, assignment: Assignment) -> None:
        """Keeps the group-wide task owners and endpoints of an assignment one of this app's members got."""
        data = assignment.userdata or {}
        self.group_hosts = {
            "all": dict(data.get("all", {})),
            "endpoints": dict(data.get("endpoints", {})),
            "warmups": dict(data.get("warmups", {})),
            "lags": dict(data.get("lags", {})),
            "moved": dict(data.get("moved", {})),
        }

    def resolve(self, topic: str) -> str:
        return prefixed(self.application_id, topic) if self.topology.is_internal(topic) else topic

    def source_topics(self) -> list[str]:
        return [self.resolve(t) for t in self.topology.source_topics()]

    def check_copartitioning(self, counts: Mapping[str, int]) -> None:
        """Joined user topics must have equal partition counts; raises naming the topics and counts."""
        for group in self.topology.copartition_groups():
            user = {t: counts[t] for t in group if not self.topology.is_internal(t) and t in counts}
            if len(set(user.values())) > 1:
                listed = ", ".join(f"{t!r} ({n} partitions)" for t, n in sorted(user.items()))
                raise TopologyError(
                    f"topics joined together are not co-partitioned: {listed}; repartition one side with "
                    "repartition(number_of_partitions=...) before the join"
                )

    def partition_counts(self, known: Mapping[str, int]) -> dict[str, int]:
        """Partition counts of every source topic, internal ones derived from their writers.

        A repartition topic feeding a join gets the partition count of the user topics it is joined with.
        """
        counts = dict(known)
        self.check_copartitioning(counts)
        subs = self.topology.subtopologies()
        fixed = self.topology.repartition_topics
        # an internal topic joined with a user topic that does not exist yet takes that topic's count: it
        # cannot be sized (nor created) before it exists (say a foreign-key join's response topic)
        unsized = {
            self.resolve(t)
            for group in self.topology.copartition_groups()
            if any(not self.topology.is_internal(u) and u not in known for u in group)
            for t in group
            if self.topology.is_internal(t) and self.resolve(t) not in known
        }
        for group in self.topology.copartition_groups():
            user = [counts[t] for t in group if not self.topology.is_internal(t) and t in counts]
            for t in group:
                if user and self.topology.is_internal(t) and fixed.get(t) is None:
                    counts.setdefault(self.resolve(t), max(user))
        changed = True
        while changed:
            changed = False
            for name, partitions in fixed.items():
                topic = self.resolve(name)
                if topic in counts:
                    continue
                if partitions is not None:
                    counts[topic] = partitions
                    changed = True
                    continue
                writers = [s for s in subs if name in s.sink_topics]
                upstream = [self.resolve(t) for s in writers for t in s.source_topics]
                if upstream and all(t in counts for t in upstream):
                    counts[topic] = max(counts[t] for t in upstream)
                    changed = True
        # a join of internal topics only (say a foreign-key join's response topic and a table read from a
        # repartition topic): all of them get the largest of their counts, as Kafka's co-partitioning does
        for group in self.topology.copartition_groups():
            if any(not self.topology.is_internal(t) for t in group):
                continue
            sized = [self.resolve(t) for t in group if fixed.get(t) is None and self.resolve(t) in counts]
            if len(sized) > 1:
                largest = max(counts[t] for t in sized)
                counts.update(dict.fromkeys(sized, largest))
        for topic in unsized:
            counts.pop(topic, None)
        return counts

    def tasks(self, counts: Mapping[str, int]) -> list[TaskInfo]:
        tasks = []
        for sub in self.topology.subtopologies():
            topics = [self.resolve(t) for t in sub.source_topics]
            if not topics or any(t not in counts for t in topics):
                continue
            for p in range(max(counts[t] for t in topics)):
                tps = tuple(TopicPartition(t, p) for t in topics if counts[t] > p)
                tasks.append(TaskInfo(str(TaskId(sub.id, p)), sub.id, p, tps))
        return tasks

    def ensure_internal_topics(self, counts: Mapping[str, int]) -> None:
        """Creates missing repartition topics and changelog topics (compacted, one partition per task)."""
        specs = []
        for name in self.topology.repartition_topics:
            topic = self.resolve(name)
            if topic in counts and self.admin.partition_count(topic) is None:
                specs.append(TopicSpec(topic, counts[topic], {"cleanup.policy": "delete", "retention.ms": "-1"}))
        for store, builder in self.topology.store_builders.items():
            if not getattr(builder, "logging_enabled", False):
                continue
            sub = self.topology.subtopology_of_store(store)
            topics = [self.resolve(t) for t in sub.source_topics]
            if not topics or any(t not in counts for t in topics):
                continue
            topic = changelog_topic(self.application_id, store)
            if self.admin.partition_count(topic) is None:
                config = changelog_topic_config(builder, self.windowstore_changelog_additional_retention_ms)
                specs.append(TopicSpec(topic, max(counts[t] for t in topics), config))
        if specs:
            self.admin.create_topics(specs, exist_ok=True)

    def _counts_and_topics(self, partition_counts: Mapping[str, int]) -> dict[str, int]:
        """The partition count of every topic (see ``partition_counts``) after noting the user source topics
        the cluster lacks (``missing_topics``) and creating the internal topics; under the lock."""
        user_sources = [self.resolve(t) for t in self.topology.source_topics() if not self.topology.is_internal(t)]
        self.missing_topics = sorted({t for t in user_sources if t not in partition_counts})
        counts = self.partition_counts(partition_counts)
        self.ensure_internal_topics(counts)
        return counts

    def prepare(self, partition_counts: Mapping[str, int]) -> None:
        """Creates the internal topics that the existing source topics allow (before joining a Kafka group)."""
        with self._lock:
            counts = self.partition_counts(partition_counts)
            self.ensure_internal_topics(counts)

    def standby_assignment(
        self, tasks: list[TaskInfo], owners: Mapping[str, str], subscriptions: Mapping[str, Subscription]
    ) -> dict[str, set[str]]:
        """Member -> standby task ids for the given active owners: ``num_standby_replicas`` copies per stateful
        task on other instances (``assignment/standby.py``), each on a thread of the chosen instance."""
        if self.num_standby_replicas <= 0:
            return {}
        stateful = _logged_subtopologies(self.topology)
        ids = [t.task_id for t in tasks if t.subtopology in stateful]
        clients, members = client_states(subscriptions)
        plan = {c: ClientAssignment() for c in clients}
        for task_id, member in owners.items():
            plan[_client_of(member, subscriptions[member])].active.add(task_id)
        lags = {c: {t: clients[c].lag_for(t, 0) for t in ids} for c in clients}
        owner_clients = {t: _client_of(owners[t], subscriptions[owners[t]]) for t in ids}
        assign_standbys(ids, owner_clients, clients, lags, plan, self.num_standby_replicas)
        result: dict[str, set[str]] = {}
        for client, assignment in plan.items():
            for member, held in _replicas_over_threads(assignment.standby, members[client], subscriptions).items():
                result.setdefault(member, set()).update(held)
        return result

    def changelog_end_offset_sums(self, tasks: list[TaskInfo]) -> dict[str, int]:
        """Per task of a sub-topology with changelogged stores, the sum of its changelog partitions' end
        offsets (what the members' task offset sums are measured against)."""
        logged = {n for n, b in self.topology.store_builders.items() if getattr(b, "logging_enabled", False)}
        subs = {s.id: s for s in self.topology.subtopologies()}
        changelogs = {
            t.task_id: [
                TopicPartition(changelog_topic(self.application_id, store), t.partition)
                for store in sorted(logged & set(subs[t.subtopology].stores))
            ]
            for t in tasks
        }
        existing = {tp for tps in changelogs.values() for tp in tps if self.admin.partition_count(tp.topic)}
        ends = self.admin.end_offsets(existing) if existing else {}
        return {tid: sum(ends.get(tp, 0) for tp in tps) for tid, tps in changelogs.items() if tps}

    def assign(
        self, partition_counts: Mapping[str, int], subscriptions: Mapping[str, Subscription]
    ) -> dict[str, Assignment]:
        """Kafka Streams' HighAvailabilityTaskAssignor over the instances (``assignment/``), then each
        instance's tasks over its threads: balanced per sub-topology, sticky, standbys and warm-ups on the
        thread that held them."""
        with self._lock:
            counts = self._counts_and_topics(partition_counts)
            tasks = self.tasks(counts)
            stateful = [t for t in tasks if t.subtopology in _logged_subtopologies(self.topology)]
            clients, members = client_states(subscriptions)
            plan = assign_tasks(
                [t.task_id for t in tasks],
                [t.task_id for t in stateful],
                self.changelog_end_offset_sums(stateful),
                clients,
                self.assignment_configs,
            )
            by_id = {t.task_id: t for t in tasks}
            owners: dict[str, str] = {}
            standbys: dict[str, set[str]] = {}
            warmups: dict[str, set[str]] = {}
            for client, assignment in plan.clients.items():
                local = {m: subscriptions[m] for m in members[client]}
                owners.update(
                    balanced_sticky_assignment(
                        [by_id[t] for t in sorted(assignment.active, key=TaskId.parse)], local
                    )
                )
                replicas = assignment.standby | assignment.warmup
                for member, held in _replicas_over_threads(replicas, members[client], subscriptions).items():
                    standbys.setdefault(member, set()).update(held - assignment.warmup)
                    warmups.setdefault(member, set()).update(held & assignment.warmup)
            endpoints = {_process_of(s): (s.userdata or {}).get("endpoint") for s in subscriptions.values()}

            def holders(replicas: Mapping[str, set[str]], task_id: str) -> list[Any]:
                return sorted(_process_of(subscriptions[m]) for m, ids in replicas.items() if task_id in ids)

            group = {
                t.task_id: (
                    _thread_of(owners[t.task_id], subscriptions[owners[t.task_id]]),
                    _process_of(subscriptions[owners[t.task_id]]),
                    holders(standbys, t.task_id),
                    sorted(map(str, t.partitions)),
                )
                for t in tasks
            }
            warm_view = {t.task_id: holders(warmups, t.task_id) for t in stateful if holders(warmups, t.task_id)}
            client_of = {_process_of(s): _client_of(m, s) for m, s in subscriptions.items()}

            def lag(pid: Any, task_id: str) -> int | None:  # LATEST_OFFSET (runs it): 0; unknown: None
                value = plan.lags.get(client_of.get(pid, ""), {}).get(task_id)
                return None if value is None or value == UNKNOWN_OFFSET_SUM else max(value, 0)

            lags = {
                t.task_id: {
                    str(pid): lag(pid, t.task_id)
                    for pid in [group[t.task_id][1], *group[t.task_id][2], *warm_view.get(t.task_id, [])]
                }
                for t in stateful
            }
            moved = self._moved(group, subscriptions)
            prober = min(subscriptions) if plan.probing_rebalance_needed and subscriptions else None
            result = {}
            for member in subscriptions:
                mine = [t for t in tasks if owners[t.task_id] == member]
                partitions = frozenset(tp for t in mine for tp in t.partitions)
                userdata: dict[str, Any] = {
                    "active": {t.task_id: list(t.partitions) for t in mine},
                    "standby": sorted(standbys.get(member, set()) | warmups.get(member, set())),
                    "warmup": sorted(warmups.get(member, ())),
                    "missing_topics": list(self.missing_topics),
                    "endpoints": endpoints,
                    "all": group,
                    "warmups": warm_view,
                    # per stateful task, each holder's lag (changelog records it lacks) at this assignment
                    "lags": lags,
                    "moved": moved,
                }
                if member == prober:  # one member asks the group for the probing rebalance (KIP-441)
                    userdata["probing_rebalance_ms"] = self.assignment_configs.probing_rebalance_interval_ms
                result[member] = Assignment(partitions, userdata)
            return result

    def _moved(
        self, group: Mapping[str, tuple[Any, ...]], subscriptions: Mapping[str, Subscription]
    ) -> dict[str, dict[str, Any]]:
        """Tasks whose active instance this assignment changes: task -> {"from", "to"}; the previous owner is
        the instance that reported running it, else (it left) the owner in the last assignment this assignor
        made for the group (or, if none, received)."""
        before = {tid: entry[1] for tid, entry in self.group_hosts.get("all", {}).items()}
        before.update(self._last_owners)
        self._last_owners = {tid: entry[1] for tid, entry in group.items()}
        for subscription in subscriptions.values():
            for task_id in (subscription.userdata or {}).get("prev_tasks", ()):
                before[task_id] = _process_of(subscription)
        return {
            tid: {"from": before[tid], "to": entry[1]}
            for tid, entry in group.items()
            if tid in before and before[tid] != entry[1]
        }


def client_states(
    subscriptions: Mapping[str, Subscription],
) -> tuple[dict[str, ClientState], dict[str, list[str]]]:
    """The clients (instances) of the group from their threads' subscriptions: threads, previous tasks, task
    offset sums (a running task's LATEST_OFFSET wins, else the largest), rack; and each client's members."""
    members: dict[str, list[str]] = {}
    for member in sorted(subscriptions):
        members.setdefault(_client_of(member, subscriptions[member]), []).append(member)
    clients = {}
    for client, ids in members.items():
        data = [subscriptions[m].userdata or {} for m in ids]
        reported = [d["task_offset_sums"] for d in data if isinstance(d.get("task_offset_sums"), dict)]
        sums: dict[str, int] | None = None
        if reported:
            sums = {}
            for one in reported:
                for task_id, offset_sum in one.items():
                    known = sums.get(task_id)
                    sums[task_id] = (
                        LATEST_OFFSET if LATEST_OFFSET in (known, offset_sum) else max(known or 0, offset_sum)
                    )
        clients[client] = ClientState(
            client,
            len(ids),
            frozenset(t for d in data for t in d.get("prev_tasks", ())),
            frozenset(t for d in data for t in d.get("prev_standbys", ())),
            sums,
            next((d["rack"] for d in data if d.get("rack") is not None), None),
        )
    return clients, members


def _client_of(member: str, subscription: Subscription) -> str:
    """The instance a member belongs to: its process id (the member itself when it reported none)."""
    process = _process_of(subscription)
    return str(process) if process is not None else member


def _replicas_over_threads(
    replicas: set[str], members: list[str], subscriptions: Mapping[str, Subscription]
) -> dict[str, set[str]]:
    """An instance's standby (and warm-up) tasks over its threads: each to the thread that held it (as a
    standby or as the active), else to the thread holding the fewest."""
    result: dict[str, set[str]] = {m: set() for m in members}
    for task_id in sorted(replicas, key=TaskId.parse):
        data = {m: subscriptions[m].userdata or {} for m in members}
        held = [
            m
            for m in members
            if task_id in data[m].get("prev_standbys", ()) or task_id in data[m].get("prev_tasks", ())
        ]
        choice = held[0] if held else min(members, key=lambda m: (len(result[m]), m))
        result[choice].add(task_id)
    return result


def _logged_subtopologies(topology: Topology) -> set[int]:
    """Sub-topologies with at least one changelogged store (only those get standby tasks)."""
    logged = {n for n, b in topology.store_builders.items() if getattr(b, "logging_enabled", False)}
    return {sub.id for sub in topology.subtopologies() if logged & set(sub.stores)}


def _thread_of(member: str, subscription: Subscription) -> Any:
    """The stream thread's name the member reported (its member id when it reported none)."""
    data = subscription.userdata or {}
    return data.get("thread", member)


def _process_of(subscription: Subscription) -> Any:
    data = subscription.userdata or {}
    return data.get("process_id")


def balanced_sticky_assignment(tasks: list[TaskInfo], subscriptions: Mapping[str, Subscription]) -> dict[str, str]:
    """Task id -> member: balanced overall and per sub-topology; tasks stay where they were when that fits.

    Each member gets at most ceil(tasks / members) tasks, and at most ceil(n / members) of the n tasks of
    each sub-topology, so the tasks of one sub-topology spread over the threads (as Kafka Streams does).
    """
    members = sorted(subscriptions)
    if not members:
        return {}
    capacity = -(-len(tasks) // len(members))
    per_sub: dict[int, int] = {}
    for task in tasks:
        per_sub[task.subtopology] = per_sub.get(task.subtopology, 0) + 1
    sub_capacity = {sub: -(-n // len(members)) for sub, n in per_sub.items()}
    load = dict.fromkeys(members, 0)
    sub_load: dict[tuple[str, int], int] = {}
    owners: dict[str, str] = {}
    previous: dict[str, str] = {}
    for member in members:
        for task_id in (subscriptions[member].userdata or {}).get("prev_tasks", ()):
            previous.setdefault(task_id, member)
    for member in members:  # no previous owner left: a member with a warm standby copy takes it (seed 004)
        for task_id in (subscriptions[member].userdata or {}).get("prev_standbys", ()):
            previous.setdefault(task_id, member)

    def give(task: TaskInfo, member: str) -> None:
        owners[task.task_id] = member
        load[member] += 1
        sub_load[member, task.subtopology] = sub_load.get((member, task.subtopology), 0) + 1

    base, extra = divmod(len(tasks), len(members))
    # tasks stay with their previous owner up to the floor share, then up to the ceiling while the number
    # of members above the floor allows it: a new member always gets its share (Kafka's sticky balance)
    for floor_pass in (True, False):
        for task in tasks:
            owner = previous.get(task.task_id)
            if owner is None or task.task_id in owners:
                continue
            if sub_load.get((owner, task.subtopology), 0) >= sub_capacity[task.subtopology]:
                continue
            if floor_pass:
                fits = load[owner] < base
            else:
                fits = load[owner] == base and extra > 0
            if fits:
                if not floor_pass:
                    extra -= 1
                give(task, owner)
    for task in sorted(tasks, key=lambda t: (t.subtopology, t.partition)):
        if task.task_id not in owners:
            member = min(
                members,
                key=lambda m: (load[m] >= capacity, sub_load.get((m, task.subtopology), 0), load[m], m),
            )
            give(task, member)
    return owners
