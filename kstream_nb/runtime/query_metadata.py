"""Which instance holds which key: Kafka Streams' ``queryMetadataForKey`` and ``metadataForAllStreamsClients``.

A key goes to bytes with its store's key serde, to a partition with Kafka's default partitioner (murmur2) over
the partition count of the store's sub-topology source topics, to the task ``<subtopology>_<partition>``, and
from the group's view of who runs that task (active and standby) to the instances' ``application_server``
endpoints. The group's view comes from the last assignment this instance received (the assignor's
``group_hosts``: from the group assignor on ``memory://``, from the control topic on Kafka), by process id.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from kstream_nb.cluster.partitioner import default_partition
from kstream_nb.cluster.schema_registry import configure_serde
from kstream_nb.cluster.serdes import Serde
from kstream_nb.errors import InvalidStateStoreError
from kstream_nb.runtime.task_id import TaskId
from kstream_nb.state.builders import StoreBuilder

if TYPE_CHECKING:
    from kstream_nb.runtime.app import KafkaStreams


@dataclass(frozen=True, order=True)
class HostInfo:
    """An instance's interactive-query endpoint (Kafka Streams' ``HostInfo``)."""

    host: str
    port: int

    @classmethod
    def parse(cls, endpoint: str) -> HostInfo:
        """``"host:port"`` -> HostInfo (an empty host is 127.0.0.1, the loopback default)."""
        host, sep, port = endpoint.rpartition(":")
        if not sep or not port.isdigit():
            raise ValueError(f"not an endpoint {endpoint!r}: expected 'host:port'")
        return cls(host or "127.0.0.1", int(port))

    @classmethod
    def unavailable(cls) -> HostInfo:
        """No instance can be named (no ``application_server``, or nobody holds the task): Kafka's
        ``HostInfo.unavailable()``."""
        return cls("unavailable", -1)

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True)
class KeyQueryMetadata:
    """Where a key's task runs: the active instance, the instances keeping standby copies, and the partition."""

    active_host: HostInfo
    standby_hosts: tuple[HostInfo, ...]
    partition: int


@dataclass(frozen=True)
class StreamsMetadata:
    """One instance of the application as the group sees it (Kafka Streams' ``StreamsMetadata``)."""

    host_info: HostInfo
    process_id: str
    state_store_names: frozenset[str]
    active_tasks: tuple[str, ...]
    topic_partitions: tuple[str, ...]
    standby_tasks: tuple[str, ...] = ()
    standby_state_store_names: frozenset[str] = frozenset()
    standby_topic_partitions: tuple[str, ...] = ()


@dataclass
class Instance:
    """An instance (process id) with its endpoint, active tasks (task id -> partitions) and standby tasks."""

    process_id: str
    endpoint: str | None = None
    active: dict[str, list[str]] = field(default_factory=dict)
    standby: set[str] = field(default_factory=set)

    @property
    def host_info(self) -> HostInfo:
        return HostInfo.parse(self.endpoint) if self.endpoint else HostInfo.unavailable()


def instances(app: KafkaStreams) -> dict[str, Instance]:
    """Process id -> what the group last said about that instance (this one is always listed)."""
    found: dict[str, Instance] = {app.process_id: Instance(app.process_id, app.endpoint)}

    def instance(pid: str) -> Instance:
        return found.setdefault(pid, Instance(pid))

    hosts = app.assignor.group_hosts
    for pid, endpoint in hosts.get("endpoints", {}).items():
        instance(pid).endpoint = endpoint or instance(pid).endpoint
    for task_id, (_thread, pid, standby_pids, partitions) in hosts.get("all", {}).items():
        instance(pid).active[task_id] = list(partitions)
        for standby_pid in standby_pids:
            instance(standby_pid).standby.add(task_id)
    found[app.process_id].endpoint = app.endpoint
    return found


def _stores_of(app: KafkaStreams, task_ids: set[str]) -> frozenset[str]:
    subs = {TaskId.parse(t).subtopology for t in task_ids}
    local = {s for sub in app.topology.subtopologies() if sub.id in subs for s in sub.stores}
    return frozenset(local | set(app.topology.global_stores))


def all_metadata(app: KafkaStreams) -> list[StreamsMetadata]:
    """One ``StreamsMetadata`` per instance of the application, by endpoint."""
    everyone = instances(app).values()
    partitions = {tid: ps for i in everyone for tid, ps in i.active.items()}
    result = []
    for inst in everyone:
        result.append(
            StreamsMetadata(
                host_info=inst.host_info,
                process_id=inst.process_id,
                state_store_names=_stores_of(app, set(inst.active)),
                active_tasks=tuple(sorted(inst.active)),
                topic_partitions=tuple(sorted(p for ps in inst.active.values() for p in ps)),
                standby_tasks=tuple(sorted(inst.standby)),
                standby_state_store_names=_stores_of(app, inst.standby) - set(app.topology.global_stores),
                standby_topic_partitions=tuple(sorted(p for t in inst.standby for p in partitions.get(t, ()))),
            )
        )
    return sorted(result, key=lambda m: (m.host_info, m.process_id))


def store_serdes(app: KafkaStreams, store: str) -> tuple[Serde, Serde]:
    """The key and value serdes store ``store`` keeps and changelogs its records with (as its tasks build it)."""
    builder = app.topology.store_builders.get(store)
    if builder is None:
        spec = app.topology.global_stores.get(store)
        if spec is None:
            known = sorted([*app.topology.store_builders, *app.topology.global_stores])
            raise InvalidStateStoreError(f"no state store named {store!r} in this topology (stores: {known})")
        builder = spec.builder
    config = app.config
    key_serde, value_serde = cast(StoreBuilder, builder)._serdes(
        config.default_key_serde, config.default_value_serde
    )
    configs = config.serde_configs()
    return configure_serde(key_serde, configs, True), configure_serde(value_serde, configs, False)


def key_task(app: KafkaStreams, store: str, key: Any) -> tuple[bytes, int, str]:
    """(the key's bytes, its partition, its task id) for a key of store ``store`` (not a global store)."""
    key_serde, _ = store_serdes(app, store)
    sub = app.topology.subtopology_of_store(store)
    topics = [app.assignor.resolve(t) for t in sub.source_topics]
    counts = {t: app.admin.partition_count(t) for t in topics}
    missing = sorted(t for t, n in counts.items() if n is None)
    if missing or not counts:
        raise InvalidStateStoreError(
            f"store {store!r}: its source topic(s) {missing or topics} do not exist yet; start the application "
            "(its internal topics are created at the first rebalance) and retry"
        )
    # as Kafka Streams' DefaultStreamPartitioner over the source topic with the most partitions
    widest = max(topics, key=lambda t: counts[t] or 0)
    key_bytes = key_serde.serialize(widest, key)
    if key_bytes is None:
        raise InvalidStateStoreError(f"store {store!r}: key {key!r} serializes to null; it has no partition")
    partition = default_partition(key_bytes, counts[widest] or 1)
    return key_bytes, partition, str(TaskId(sub.id, partition))


def metadata_for_key(app: KafkaStreams, store: str, key: Any) -> KeyQueryMetadata:
    """Where ``key`` of store ``store`` lives (see the module docstring). For a global store, every instance has
    it: this one answers (partition -1). ``active_host`` is ``HostInfo.unavailable()`` while nobody holds the
    task (a rebalance) or when its instance has no ``application_server``."""
    if store in app.topology.global_stores:
        return KeyQueryMetadata(Instance(app.process_id, app.endpoint).host_info, (), -1)
    _, partition, task_id = key_task(app, store, key)
    everyone = instances(app).values()
    active = next((i.host_info for i in everyone if task_id in i.active), HostInfo.unavailable())
    standbys = tuple(sorted({i.host_info for i in everyone if task_id in i.standby and i.endpoint}))
    return KeyQueryMetadata(active, standbys, partition)
