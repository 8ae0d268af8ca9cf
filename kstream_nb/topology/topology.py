"""The logical graph: sources, processors, sinks, stores; split into sub-topologies at topics.

This is Kafka's low-level ``Topology``: the DSL adds nodes to it, the runtime instantiates one copy of a
sub-topology per task.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kstream_nb.cluster.auto_serde import refuse_auto_source
from kstream_nb.cluster.schema_registry import configure_serde
from kstream_nb.cluster.serde_specs import serde_from
from kstream_nb.cluster.serdes import Serde
from kstream_nb.errors import TopologyError
from kstream_nb.processor.api import ProcessorSupplier
from kstream_nb.processor.node import ProcessorNode, SourceNode
from kstream_nb.processor.sink import SinkProcessor, StreamPartitioner
from kstream_nb.processor.timestamps import TimestampExtractor, timestamp_extractor_from
from kstream_nb.processor.topic_extractor_sink import TopicExtractorSink, TopicNameExtractor

if TYPE_CHECKING:
    from kstream_nb.state.builders import StoreFactory
    from kstream_nb.topology.description import TopologyDescription


@dataclass
class SourceSpec:
    name: str
    topics: tuple[str, ...]
    key_serde: Serde | None
    value_serde: Serde | None
    timestamp_extractor: TimestampExtractor | None


@dataclass
class ProcessorSpec:
    name: str
    supplier: ProcessorSupplier
    parents: tuple[str, ...]
    stores: list[str] = field(default_factory=list)


@dataclass
class SinkSpec:
    name: str
    topic: str
    parents: tuple[str, ...]
    key_serde: Serde | None
    value_serde: Serde | None
    partitioner: StreamPartitioner | None


@dataclass
class ExtractorSinkSpec:
    """A sink writing each record to the topic ``topic_extractor(key, value, record_context)`` names."""

    name: str
    topic_extractor: TopicNameExtractor
    parents: tuple[str, ...]
    key_serde: Serde | None
    value_serde: Serde | None
    partitioner: StreamPartitioner | None


NodeSpec = SourceSpec | ProcessorSpec | SinkSpec | ExtractorSinkSpec


@dataclass
class GlobalStoreSpec:
    """A store every instance keeps a full copy of, filled from all partitions of ``topic``."""

    builder: StoreFactory
    topic: str
    key_serde: Serde | None
    value_serde: Serde | None


@dataclass(frozen=True)
class SubTopology:
    """A connected part of the topology: it runs as one task per input partition number."""

    id: int
    nodes: tuple[str, ...]
    source_topics: tuple[str, ...]
    sink_topics: tuple[str, ...]
    stores: tuple[str, ...]


@dataclass
class TaskGraph:
    """One task's instantiated nodes: sources by topology topic name, every node in topological order."""

    sources: dict[str, SourceNode]
    nodes: list[ProcessorNode]
    stores: list[StoreFactory]


class Topology:
    """A processing graph built with ``add_source``/``add_processor``/``add_sink``/``add_state_store``."""

    def __init__(self) -> None:
        self._nodes: dict[str, NodeSpec] = {}
        self._children: dict[str, list[str]] = {}
        self._stores: dict[str, StoreFactory] = {}
        self._repartition_topics: dict[str, int | None] = {}
        self._copartition_groups: list[tuple[str, ...]] = []
        self._global_stores: dict[str, GlobalStoreSpec] = {}
        self._subtopologies: list[SubTopology] | None = None

    # ---- building -------------------------------------------------------------------------------

    def add_source(
        self,
        name: str,
        *topics: str,
        key_serde: Any = None,
        value_serde: Any = None,
        timestamp_extractor: Any = None,
    ) -> Topology:
        """A source reading ``topics`` (None serdes/extractor = the app's defaults)."""
        if not topics:
            raise TopologyError(f"source {name!r} needs at least one topic")
        for node in self._nodes.values():
            if isinstance(node, SourceSpec) and set(node.topics) & set(topics):
                raise TopologyError(
                    f"topic(s) {sorted(set(node.topics) & set(topics))} already read by source {node.name!r}"
                )
        extractor = None if timestamp_extractor is None else timestamp_extractor_from(timestamp_extractor)
        key, value = _serde(key_serde), _serde(value_serde)
        refuse_auto_source(", ".join(topics), key, value)
        self._add(SourceSpec(name, tuple(topics), key, value, extractor))
        return self

    def add_processor(
        self, name: str, supplier: ProcessorSupplier, *parent_names: str, stores: Iterable[str] = ()
    ) -> Topology:
        """A processor made by ``supplier()`` (one instance per task) fed by ``parent_names``."""
        if not parent_names:
            raise TopologyError(f"processor {name!r} needs at least one parent")
        if not callable(supplier):
            raise TopologyError(
                f"processor {name!r}: supplier must be callable (a Processor class), got {supplier!r}"
            )
        self._check_parents(name, parent_names)
        self._add(ProcessorSpec(name, supplier, tuple(parent_names)))
        self.connect_processor_and_state_stores(name, *stores)
        return self

    def add_sink(
        self,
        name: str,
        topic: str | TopicNameExtractor,
        *parent_names: str,
        key_serde: Any = None,
        value_serde: Any = None,
        partitioner: StreamPartitioner | None = None,
    ) -> Topology:
        """A sink writing to ``topic``, or to the topic ``topic(key, value, record_context)`` names per record
        (a topic name extractor; its topics must exist); ``partitioner(key, value, n)`` picks partitions."""
        if not parent_names:
            raise TopologyError(f"sink {name!r} needs at least one parent")
        self._check_parents(name, parent_names)
        parents = tuple(parent_names)
        if isinstance(topic, str):
            self._add(SinkSpec(name, topic, parents, _serde(key_serde), _serde(value_serde), partitioner))
        elif callable(topic):
            self._add(ExtractorSinkSpec(name, topic, parents, _serde(key_serde), _serde(value_serde), partitioner))
        else:
            raise TopologyError(f"sink {name!r}: topic must be a name or a topic name extractor, got {topic!r}")
        return self

    def add_state_store(self, builder: StoreFactory, *processor_names: str) -> Topology:
        """Registers a store (one instance per task) and connects it to processors."""
        if builder.name in self._stores:
            raise TopologyError(f"state store {builder.name!r} is already added")
        self._stores[builder.name] = builder
        for processor in processor_names:
            self.connect_processor_and_state_stores(processor, builder.name)
        self._subtopologies = None
        return self

    def add_global_store(self, builder: StoreFactory, topic: str, key_serde: Any = None,
                         value_serde: Any = None) -> Topology:  # fmt: skip
        """A global store: a full copy on every instance of ``topic``'s latest value per key."""
        if builder.name in self._stores or builder.name in self._global_stores:
            raise TopologyError(f"state store {builder.name!r} is already added")
        key, value = _serde(key_serde), _serde(value_serde)
        refuse_auto_source(topic, key, value)
        self._global_stores[builder.name] = GlobalStoreSpec(builder, topic, key, value)
        return self

    @property
    def global_stores(self) -> dict[str, GlobalStoreSpec]:
        return dict(self._global_stores)

    def connect_processor_and_state_stores(self, processor_name: str, *store_names: str) -> Topology:
        node = self._nodes.get(processor_name)
        if not isinstance(node, ProcessorSpec):
            raise TopologyError(f"{processor_name!r} is not a processor of this topology")
        for store in store_names:
            if store not in self._stores and store not in self._global_stores:
                raise TopologyError(
                    f"state store {store!r} is unknown; add it first with add_state_store "
                    f"(known: {sorted(self._stores)})"
                )
            if store not in node.stores:
                node.stores.append(store)
        self._subtopologies = None
        return self

    def add_repartition_topic(self, name: str, partitions: int | None = None) -> None:
        """Marks ``name`` as an internal repartition topic (created by the app, prefixed with its id)."""
        self._repartition_topics[name] = partitions

    def add_copartition_group(self, *node_names: str) -> None:
        """The source topics feeding these nodes must have the same partition count (joins)."""
        self._copartition_groups.append(tuple(node_names))

    def copartition_groups(self) -> list[list[str]]:
        """For each join, the topics feeding it (found by walking parents back to the sources)."""
        groups = []
        for names in self._copartition_groups:
            topics: list[str] = []
            todo = list(names)
            seen: set[str] = set()
            while todo:
                name = todo.pop()
                if name in seen:
                    continue
                seen.add(name)
                spec = self._nodes[name]
                if isinstance(spec, SourceSpec):
                    topics.extend(t for t in spec.topics if t not in topics)
                else:
                    todo.extend(getattr(spec, "parents", ()))
            groups.append(topics)
        return groups

    def _add(self, spec: NodeSpec) -> None:
        if spec.name in self._nodes:
            raise TopologyError(f"a node named {spec.name!r} already exists")
        self._nodes[spec.name] = spec
        self._children[spec.name] = []
        for parent in getattr(spec, "parents", ()):
            self._children[parent].append(spec.name)
        self._subtopologies = None

    def _check_parents(self, name: str, parents: Iterable[str]) -> None:
        for parent in parents:
            if parent not in self._nodes:
                raise TopologyError(f"{name!r}: parent {parent!r} does not exist")
            if isinstance(self._nodes[parent], (SinkSpec, ExtractorSinkSpec)):
                raise TopologyError(f"{name!r}: parent {parent!r} is a sink and cannot have children")

    # ---- reading ---------------------------------------------------------------------------------

    @property
    def node_specs(self) -> dict[str, NodeSpec]:
        return dict(self._nodes)

    def children(self, name: str) -> list[str]:
        return list(self._children[name])

    @property
    def store_builders(self) -> dict[str, StoreFactory]:
        return dict(self._stores)

    @property
    def repartition_topics(self) -> dict[str, int | None]:
        """Internal repartition topics (unprefixed names) and their fixed partition count, if any."""
        return dict(self._repartition_topics)

    def is_internal(self, topic: str) -> bool:
        return topic in self._repartition_topics

    def source_topics(self) -> list[str]:
        """Every topic the topology reads, internal ones included (unprefixed)."""
        return [t for n in self._nodes.values() if isinstance(n, SourceSpec) for t in n.topics]

    def subtopologies(self) -> list[SubTopology]:
        """Connected components (parent/child edges and shared stores), numbered in creation order."""
        if self._subtopologies is None:
            self._subtopologies = self._compute_subtopologies()
        return self._subtopologies

    def _compute_subtopologies(self) -> list[SubTopology]:
        parent = {name: name for name in self._nodes}

        def find(x: str) -> str:
            while parent[x] != x:
                parent[x] = parent[parent[x]]
                x = parent[x]
            return x

        def union(a: str, b: str) -> None:
            ra, rb = find(a), find(b)
            if ra != rb:
                parent[rb] = ra

        store_users: dict[str, str] = {}
        for spec in self._nodes.values():
            for p in getattr(spec, "parents", ()):
                union(p, spec.name)
            for store in getattr(spec, "stores", ()):
                if store in self._global_stores:
                    continue
                if store in store_users:
                    union(store_users[store], spec.name)
                store_users[store] = spec.name
        groups: dict[str, list[str]] = {}
        for name in self._nodes:
            groups.setdefault(find(name), []).append(name)
        result = []
        for i, names in enumerate(groups.values()):
            specs = [self._nodes[n] for n in names]
            result.append(
                SubTopology(
                    id=i,
                    nodes=tuple(names),
                    source_topics=tuple(t for s in specs if isinstance(s, SourceSpec) for t in s.topics),
                    sink_topics=tuple(dict.fromkeys(s.topic for s in specs if isinstance(s, SinkSpec))),
                    stores=tuple(
                        dict.fromkeys(
                            st
                            for s in specs
                            if isinstance(s, ProcessorSpec)
                            for st in s.stores
                            if st not in self._global_stores
                        )
                    ),
                )
            )
        return result

    def subtopology_of_store(self, store: str) -> SubTopology:
        for sub in self.subtopologies():
            if store in sub.stores:
                return sub
        raise TopologyError(f"state store {store!r} is not connected to any processor")

    def validate(self) -> None:
        """Checks what can only be checked on the whole graph: stores used, sources present."""
        if not any(isinstance(n, SourceSpec) for n in self._nodes.values()):
            raise TopologyError("the topology has no source: read a topic with stream()/table() or add_source()")
        for store in self._stores:
            self.subtopology_of_store(store)

    def build_task_graph(
        self,
        subtopology: SubTopology,
        default_key_serde: Serde,
        default_value_serde: Serde,
        default_timestamp_extractor: TimestampExtractor,
        serde_configs: Mapping[str, Any] | None = None,
    ) -> TaskGraph:
        """Fresh processor instances for one task of ``subtopology``, wired parent -> children; sources' and
        sinks' serdes configured with ``serde_configs`` (the app's settings: its Schema Registry)."""

        def keys(serde: Serde | None) -> Serde:
            return configure_serde(serde or default_key_serde, serde_configs, True)

        def values(serde: Serde | None) -> Serde:
            return configure_serde(serde or default_value_serde, serde_configs, False)

        nodes: dict[str, ProcessorNode] = {}
        sources: dict[str, SourceNode] = {}
        for name in subtopology.nodes:
            spec = self._nodes[name]
            if isinstance(spec, SourceSpec):
                node: ProcessorNode = SourceNode(
                    name,
                    spec.topics,
                    keys(spec.key_serde),
                    values(spec.value_serde),
                    spec.timestamp_extractor or default_timestamp_extractor,
                )
                for topic in spec.topics:
                    sources[topic] = node  # type: ignore[assignment]
            elif isinstance(spec, SinkSpec):
                node = ProcessorNode(
                    name,
                    SinkProcessor(
                        spec.topic,
                        keys(spec.key_serde),
                        values(spec.value_serde),
                        spec.partitioner,
                    ),
                )
            elif isinstance(spec, ExtractorSinkSpec):
                node = ProcessorNode(
                    name,
                    TopicExtractorSink(
                        spec.topic_extractor,
                        keys(spec.key_serde),
                        values(spec.value_serde),
                        spec.partitioner,
                    ),
                )
            else:
                processor = spec.supplier()
                if not hasattr(processor, "process"):
                    raise TopologyError(f"processor {name!r}: supplier returned {processor!r}, not a Processor")
                node = ProcessorNode(name, processor, tuple(spec.stores))
            nodes[name] = node
        for name, node in nodes.items():
            node.children = [nodes[c] for c in self._children[name]]
        stores = [self._stores[s] for s in subtopology.stores]
        return TaskGraph(sources, list(nodes.values()), stores)

    def describe(self) -> TopologyDescription:
        from kstream_nb.topology.description import TopologyDescription

        return TopologyDescription.of(self)

    def __repr__(self) -> str:
        return str(self.describe())


def _serde(spec: Any) -> Serde | None:
    return None if spec is None else serde_from(spec)


def default_name_factory() -> Callable[[str], str]:
    """Kafka-style generated names: ``PREFIX-0000000007``, one counter for processors and stores."""
    counter = iter(range(10**10))

    def name(prefix: str) -> str:
        return f"{prefix}-{next(counter):010d}"

    return name
