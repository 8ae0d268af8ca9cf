"""``TopologyGraph``: the topology as an SVG with Kafka Streams' text description (static, no thread)."""

from __future__ import annotations

from html import escape
from typing import Any

import ipywidgets as widgets

from kstream_nb.jupyter.svg import topology_svg
from kstream_nb.runtime.app import KafkaStreams
from kstream_nb.topology.description import TopologyDescription
from kstream_nb.topology.topology import Topology


def _description(source: Any) -> tuple[TopologyDescription, str | None]:
    if isinstance(source, KafkaStreams):
        return source.topology.describe(), source.application_id
    if isinstance(source, Topology):
        return source.describe(), None
    if isinstance(source, TopologyDescription):
        return source, None
    raise TypeError(f"TopologyGraph needs a Topology, TopologyDescription or KafkaStreams, got {type(source)}")


class TopologyGraph(widgets.VBox):
    """The topology as an SVG (sub-topologies, processors, stores, source/sink/repartition/changelog
    topics), with Kafka Streams' text description under a disclosure. Static: no thread."""

    def __init__(self, topology: Topology | TopologyDescription | KafkaStreams, show_text: bool = True) -> None:
        description, app_id = _description(topology)
        self.description = description
        self.svg = topology_svg(description.to_dict(), app_id)
        self.mermaid = description.to_mermaid()
        text = (
            f"<details><summary style='font:12px sans-serif'>text description</summary>"
            f"<pre>{escape(str(description))}</pre></details>"
            if show_text
            else ""
        )
        self.html = widgets.HTML(value=f'<div style="overflow-x:auto">{self.svg}</div>{text}')
        super().__init__([self.html])

    def refresh(self, force: bool = False) -> None:
        """Nothing changes while an app runs; here so a dashboard can treat every view alike."""
