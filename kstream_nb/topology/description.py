"""``Topology.describe()``: Kafka Streams' text form, a dict for widgets, and Mermaid."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kstream_nb.processor.topic_extractor_sink import describe_extractor
from kstream_nb.topology.topology import ExtractorSinkSpec, ProcessorSpec, SinkSpec, SourceSpec

if TYPE_CHECKING:
    from kstream_nb.topology.topology import Topology


@dataclass(frozen=True)
class TopologyDescription:
    """Sub-topologies with their nodes, topics and stores (internal topics unprefixed, as in Kafka)."""

    subtopologies: tuple[dict[str, Any], ...]
    repartition_topics: tuple[str, ...]
    changelog_stores: tuple[str, ...]

    @classmethod
    def of(cls, topology: Topology) -> TopologyDescription:
        specs = topology.node_specs
        subs = []
        for sub in topology.subtopologies():
            nodes = []
            for name in sub.nodes:
                spec = specs[name]
                node: dict[str, Any] = {"name": name, "successors": topology.children(name)}
                if isinstance(spec, SourceSpec):
                    node.update(type="source", topics=list(spec.topics), predecessors=[])
                elif isinstance(spec, SinkSpec):
                    node.update(type="sink", topic=spec.topic, predecessors=list(spec.parents))
                elif isinstance(spec, ExtractorSinkSpec):
                    extractor = describe_extractor(spec.topic_extractor)
                    node.update(type="sink", topic=None, topic_extractor=extractor)
                    node.update(predecessors=list(spec.parents))
                else:
                    assert isinstance(spec, ProcessorSpec)
                    node.update(type="processor", stores=list(spec.stores), predecessors=list(spec.parents))
                nodes.append(node)
            subs.append({"id": sub.id, "nodes": nodes, "stores": list(sub.stores)})
        logged = tuple(n for n, b in topology.store_builders.items() if getattr(b, "logging_enabled", False))
        return cls(tuple(subs), tuple(topology.repartition_topics), logged)

    def to_dict(self) -> dict[str, Any]:
        return {
            "subtopologies": [dict(s) for s in self.subtopologies],
            "repartition_topics": list(self.repartition_topics),
            "changelog_stores": list(self.changelog_stores),
        }

    def __str__(self) -> str:
        lines = ["Topologies:"]
        for sub in self.subtopologies:
            lines.append(f"   Sub-topology: {sub['id']}")
            for node in sub["nodes"]:
                if node["type"] == "source":
                    lines.append(f"    Source: {node['name']} (topics: [{', '.join(node['topics'])}])")
                elif node["type"] == "sink" and node["topic"] is None:  # Kafka prints the extractor
                    lines.append(f"    Sink: {node['name']} (extractor class: {node['topic_extractor']})")
                elif node["type"] == "sink":
                    lines.append(f"    Sink: {node['name']} (topic: {node['topic']})")
                else:
                    lines.append(f"    Processor: {node['name']} (stores: [{', '.join(node['stores'])}])")
                if node["type"] != "sink":
                    lines.append(f"      --> {', '.join(node['successors']) or 'none'}")
                if node["type"] != "source":
                    lines.append(f"      <-- {', '.join(node['predecessors'])}")
            lines.append("")
        return "\n".join(lines)

    def to_mermaid(self) -> str:
        """A Mermaid flowchart: one subgraph per sub-topology, topics as stadiums, stores as cylinders."""
        ids: dict[str, str] = {}

        def nid(kind: str, name: str) -> str:
            return ids.setdefault(f"{kind}:{name}", f"n{len(ids)}")

        lines = ["flowchart TD"]
        edges: list[str] = []
        for sub in self.subtopologies:
            lines.append(f'  subgraph st{sub["id"]}["Sub-topology {sub["id"]}"]')
            for node in sub["nodes"]:
                lines.append(f'    {nid("node", node["name"])}["{node["name"]}"]')
                for child in node["successors"]:
                    edges.append(f"  {nid('node', node['name'])} --> {nid('node', child)}")
                for store in node.get("stores", []):
                    edges.append(f"  {nid('node', node['name'])} --- {nid('store', store)}")
                for topic in node.get("topics", []):
                    edges.append(f"  {nid('topic', topic)} --> {nid('node', node['name'])}")
                if node["type"] == "sink" and node["topic"] is not None:
                    edges.append(f"  {nid('node', node['name'])} --> {nid('topic', node['topic'])}")
            lines.append("  end")
        for key, ident in list(ids.items()):
            kind, name = key.split(":", 1)
            if kind == "topic":
                lines.append(f'  {ident}(["{name}"])')
            elif kind == "store":
                lines.append(f'  {ident}[("{name}")]')
        return "\n".join(lines + edges)

    def __repr__(self) -> str:
        return str(self)
