"""Where a KStream/KTable sits in the topology being built, as HTML for notebooks (``_repr_html_``): its node,
its sub-topology, the topics it reads from upstream, and ``describe()`` with its node highlighted.

Plain ``html.escape`` only: the DSL's reprs use it without importing the Jupyter layer.
"""

from __future__ import annotations

from html import escape
from typing import TYPE_CHECKING

from kstream_nb.topology.topology import SinkSpec, SourceSpec

if TYPE_CHECKING:
    from kstream_nb.topology.topology import Topology


def upstream_topics(topology: Topology, node: str) -> list[str]:
    """The topics ``node`` reads from, nearest first: its sub-topology's sources above it, then (through a
    repartition topic) the sources of the sub-topology that writes that topic, and so on."""
    specs = topology.node_specs
    writers = {spec.topic: name for name, spec in specs.items() if isinstance(spec, SinkSpec)}
    topics: list[str] = []
    seen: set[str] = set()
    todo = [node]
    while todo:
        name = todo.pop(0)
        if name in seen or name not in specs:
            continue
        seen.add(name)
        spec = specs[name]
        if isinstance(spec, SourceSpec):
            for topic in spec.topics:
                if topic not in topics:
                    topics.append(topic)
                if topic in writers:  # an internal topic this topology writes: keep going upstream
                    todo.append(writers[topic])
        else:
            todo.extend(getattr(spec, "parents", ()))
    return topics


def node_place_html(topology: Topology, node: str, kind: str, extra: str = "") -> str:
    """``kind`` (KStream/KTable) at ``node``: sub-topology, upstream topics, the highlighted description."""
    sub = next((s.id for s in topology.subtopologies() if node in s.nodes), None)
    internal = set(topology.repartition_topics)
    topics = ", ".join(
        f"<code>{escape(t)}</code>" + (" (repartition)" if t in internal else "")
        for t in upstream_topics(topology, node)
    )
    lines = []
    highlight = False
    for line in str(topology.describe()).splitlines():
        stripped = line.strip()
        if stripped.startswith(("Source:", "Processor:", "Sink:")):
            highlight = stripped.split()[1] == node
        elif not stripped.startswith(("-->", "<--")):  # a sub-topology's title or the blank line after it
            highlight = False
        style = " style='background:#fde68a'" if highlight and stripped else ""
        lines.append(f"<span{style}>{escape(line)}</span>")
    where = f"sub-topology {sub}" if sub is not None else "no sub-topology yet"
    return (
        f"<div style='font:13px sans-serif'><b>{escape(kind)}</b> at node <code>{escape(node)}</code> "
        f"({where}){extra}<br>reads from: {topics or '<i>no source yet</i>'}</div>"
        "<details open><summary style='font:12px sans-serif'>topology so far (this node highlighted)</summary>"
        f"<pre style='font-size:11px'>{chr(10).join(lines)}</pre></details>"
    )
