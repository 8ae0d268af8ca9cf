"""Rich reprs for notebooks: a topology shows its graph, an app its state and task assignment.

Two ways to hook them, both reading only public attributes:

- as methods on the classes (any Jupyter frontend, no registration):
  ``Topology._repr_mimebundle_ = lambda self, include=None, exclude=None: topology_mimebundle(self)``
  (and the same with ``description_mimebundle`` / ``app_mimebundle``), each importing lazily;
- or ``register_formatters(shell)`` (done by ``%load_ext kstream_nb``): IPython's HTML formatter renders
  Topology, TopologyDescription and KafkaStreams with these functions.
"""

from __future__ import annotations

from html import escape
from typing import Any

from kstream_nb.jupyter.svg import topology_svg
from kstream_nb.runtime.app import KafkaStreams
from kstream_nb.topology.description import TopologyDescription
from kstream_nb.topology.topology import Topology


def description_html(description: TopologyDescription, application_id: str | None = None) -> str:
    svg = topology_svg(description.to_dict(), application_id)
    return (
        f'<div class="ks-topology-repr" style="overflow-x:auto">{svg}</div>'
        "<details><summary style='font:12px sans-serif'>text description</summary>"
        f"<pre>{escape(str(description))}</pre></details>"
    )


def description_mimebundle(description: TopologyDescription, **_: Any) -> dict[str, str]:
    return {
        "text/plain": str(description),
        "text/html": description_html(description),
        "text/markdown": f"```mermaid\n{description.to_mermaid()}\n```",
    }


def topology_mimebundle(topology: Topology, **_: Any) -> dict[str, str]:
    """text/plain: Kafka Streams' description; text/html: the graph as SVG (no JavaScript)."""
    return description_mimebundle(topology.describe())


def app_html(app: KafkaStreams) -> str:
    """The app's id, state, threads and its assignment (thread x task x partitions) as an HTML table."""
    try:
        assignment = app.assignment()
    except Exception:  # the app is mid-rebalance or stopping: show what is certain
        assignment = {}
    rows = []
    for thread, tasks in sorted(assignment.items()):
        if not tasks:
            rows.append(f"<tr><td>{escape(thread)}</td><td colspan=2><i>no tasks</i></td></tr>")
        for task, parts in sorted(tasks.items()):
            rows.append(
                f"<tr><td>{escape(thread)}</td><td>{escape(task)}</td><td>{escape(', '.join(parts))}</td></tr>"
            )
    colour = {"RUNNING": "#16a34a", "REBALANCING": "#ca8a04", "ERROR": "#dc2626"}.get(app.state.value, "#6b7280")
    error = f"<div style='color:#dc2626'>{escape(str(app.error))}</div>" if app.error is not None else ""
    table = (
        "<table class='ks-table' style='border-collapse:collapse;font-size:12px'>"
        "<thead><tr><th style='text-align:left'>thread</th><th style='text-align:left'>task</th>"
        "<th style='text-align:left'>partitions</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>"
        if rows
        else ""
    )
    return (
        f"<div style='font:13px sans-serif'><b>KafkaStreams</b> <code>{escape(app.application_id)}</code> "
        f"<span style='color:{colour};font-weight:bold'>{escape(app.state.value)}</span> "
        f"on <code>{escape(app.config.bootstrap_servers)}</code>, {len(assignment)} thread(s)</div>"
        f"{error}{table}"
    )


def app_mimebundle(app: KafkaStreams, **_: Any) -> dict[str, str]:
    return {"text/plain": repr(app), "text/html": app_html(app)}


def register_formatters(shell: Any) -> None:
    """Registers the HTML reprs with an IPython shell's display formatter."""
    html = shell.display_formatter.formatters["text/html"]
    html.for_type(Topology, lambda t: description_html(t.describe()))
    html.for_type(TopologyDescription, description_html)
    html.for_type(KafkaStreams, app_html)
