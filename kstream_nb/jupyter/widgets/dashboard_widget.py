"""``Dashboard``: metrics, window chart, late records, output table, topology and assignment of one app, one
thread."""

from __future__ import annotations

from collections.abc import Iterable
from html import escape
from typing import Any

import ipywidgets as widgets

from kstream_nb.jupyter.refresher import DEFAULT_RATE_HZ, Refresher
from kstream_nb.jupyter.widgets.assignment_view import AssignmentView
from kstream_nb.jupyter.widgets.dropped_table import DroppedTable
from kstream_nb.jupyter.widgets.metrics_bar import MetricsBar
from kstream_nb.jupyter.widgets.topic_table import JoinTable
from kstream_nb.jupyter.widgets.topology_graph import TopologyGraph
from kstream_nb.jupyter.widgets.window_chart import WindowChart
from kstream_nb.runtime.app import KafkaStreams

SHOW_ALL = ("metrics", "chart", "dropped", "table", "topology", "tasks")


def window_stores(app: KafkaStreams) -> list[str]:
    """Names of the app's window/session stores (what ``WindowChart`` draws best)."""
    return [name for name in app.topology.store_builders if hasattr(app.store(name), "fetch")]


def output_topics(app: KafkaStreams) -> list[str]:
    """Sink topics of the topology that are not repartition topics, in topology order."""
    d = app.topology.describe().to_dict()
    internal = set(d["repartition_topics"])
    out: list[str] = []
    for sub in d["subtopologies"]:
        for node in sub["nodes"]:
            topic = node.get("topic")
            if node["type"] == "sink" and topic is not None and topic not in internal and topic not in out:
                out.append(topic)
    return out


class Dashboard(widgets.VBox):
    """Metrics, window chart, output table, topology and assignment of one app, refreshed by ONE thread.

    ``show`` picks the parts (``metrics, chart, dropped, table, topology, tasks``); ``store`` the store to
    chart (default: the first window store, else the first store) and ``topic`` the output topic to tail
    (default: the last sink topic). ``dropped`` ("Dropped (late)": the last records dropped for closed windows)
    is there when the app has window or session stores. The thread stops when the app stops, or with ``stop()``.
    """

    def __init__(
        self,
        app: KafkaStreams,
        show: Iterable[str] = SHOW_ALL,
        store: str | None = None,
        topic: str | None = None,
        top_n: int = 10,
        rows: int = 20,
        max_rate_hz: float = DEFAULT_RATE_HZ,
        autostart: bool = True,
    ) -> None:
        parts = [s.strip() for s in show if s.strip()]
        unknown = [p for p in parts if p not in SHOW_ALL]
        if unknown:
            raise ValueError(f"unknown dashboard part(s) {unknown}; choose from {', '.join(SHOW_ALL)}")
        self.app = app
        self.views: dict[str, Any] = {}
        title = widgets.HTML(
            value=f'<div style="font:bold 13px sans-serif">kstream app <code>{escape(app.application_id)}</code> '
            f"on <code>{escape(app.config.bootstrap_servers)}</code></div>"
        )
        children: list[widgets.Widget] = [title]
        for part in parts:
            view: Any = None
            if part == "metrics":
                view = MetricsBar(app, max_rate_hz, autostart=False)
            elif part == "chart":
                name = (
                    store or next(iter(window_stores(app)), None) or next(iter(app.topology.store_builders), None)
                )
                if name is not None:
                    view = WindowChart(app, name, top_n=top_n, max_rate_hz=max_rate_hz, autostart=False)
            elif part == "dropped":
                if window_stores(app):
                    view = DroppedTable(app, n=rows, max_rate_hz=max_rate_hz, autostart=False)
            elif part == "table":
                name = topic or next(reversed(output_topics(app)), None)
                if name is not None:
                    view = JoinTable(app, name, n=rows, max_rate_hz=max_rate_hz, autostart=False)
            elif part == "topology":
                view = TopologyGraph(app)
            elif part == "tasks":
                view = AssignmentView(app, max_rate_hz, autostart=False)
            if view is not None:
                self.views[part] = view
                children.append(view)
        super().__init__(children)
        self.refresher = Refresher(
            self.views.values(), app, max_rate_hz, name=f"kstream-dashboard-{app.application_id}"
        )
        if autostart:
            self.refresher.start()

    def __getitem__(self, part: str) -> Any:
        return self.views[part]

    def refresh(self, force: bool = True) -> None:
        self.refresher.refresh_once(force=force)

    def stop(self, timeout: float = 5.0) -> bool:
        return self.refresher.stop(timeout)


def dashboard(app: KafkaStreams, **options: Any) -> Dashboard:
    """``Dashboard(app, ...)``: what ``app.dashboard()`` shows."""
    return Dashboard(app, **options)
