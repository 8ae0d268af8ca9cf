"""Draws a topology (``Topology.describe().to_dict()``) as a self-contained SVG: no JavaScript needed.

One column per sub-topology; inside it, rows by depth from the sources: source topics on top, then
source/processor/sink nodes, stores beside the processors that use them, sink topics below the sinks.
Repartition topics are amber, stores with a changelog say so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from html import escape
from typing import Any

from kstream_nb.topology.naming import changelog_topic

BOX_W, BOX_H = 196, 34
COL_W, ROW_H = 214, 64
PAD, HEADER = 14, 26
MAX_LABEL = 30

FILL = {
    "topic": "#dbeafe",
    "sink-topic": "#dcfce7",
    "repartition": "#fde68a",
    "source": "#e0e7ff",
    "sink": "#e0e7ff",
    "processor": "#f3f4f6",
    "store": "#fce7f3",
}


@dataclass
class _Item:
    ident: str
    kind: str
    label: str
    row: int
    col: int = 0
    note: str = ""
    x: float = 0.0
    y: float = 0.0


@dataclass
class _Sub:
    sid: Any
    items: dict[str, _Item] = field(default_factory=dict)
    edges: list[tuple[str, str, bool]] = field(default_factory=list)
    width: float = 0.0
    height: float = 0.0


def _short(label: str, limit: int = MAX_LABEL) -> str:
    return label if len(label) <= limit else label[: limit - 1] + "…"


def _layout_sub(sub: dict[str, Any], repartition: set[str], changelog: set[str], app_id: str | None) -> _Sub:
    out = _Sub(sub["id"])
    nodes = {n["name"]: n for n in sub["nodes"]}
    depth: dict[str, int] = {}

    def depth_of(name: str, seen: frozenset[str] = frozenset()) -> int:
        if name in depth:
            return depth[name]
        preds = [p for p in nodes[name].get("predecessors", []) if p in nodes and p not in seen]
        d = 0 if not preds else 1 + max(depth_of(p, seen | {name}) for p in preds)
        depth[name] = d
        return d

    for name, node in nodes.items():
        row = depth_of(name) + 1
        out.items[f"node:{name}"] = _Item(f"node:{name}", node["type"], name, row)
        for topic in node.get("topics", []):
            kind = "repartition" if topic in repartition else "topic"
            out.items.setdefault(f"topic:{topic}", _Item(f"topic:{topic}", kind, topic, 0))
            out.edges.append((f"topic:{topic}", f"node:{name}", False))
        if node["type"] == "sink" and node["topic"] is not None:  # (None: the topic is chosen per record)
            topic = node["topic"]
            kind = "repartition" if topic in repartition else "sink-topic"
            out.items.setdefault(f"sinktopic:{topic}", _Item(f"sinktopic:{topic}", kind, topic, row + 1))
            out.edges.append((f"node:{name}", f"sinktopic:{topic}", False))
        for store in node.get("stores", []):
            if f"store:{store}" not in out.items:
                note = ""
                if store in changelog:
                    note = changelog_topic(app_id, store) if app_id else "+ changelog topic"
                out.items[f"store:{store}"] = _Item(f"store:{store}", "store", store, row, note=note)
            out.edges.append((f"node:{name}", f"store:{store}", True))
        for child in node.get("successors", []):
            if child in nodes:
                out.edges.append((f"node:{name}", f"node:{child}", False))
    rows: dict[int, list[_Item]] = {}
    for item in out.items.values():
        rows.setdefault(item.row, []).append(item)
    order = {"topic": 0, "repartition": 0, "source": 1, "processor": 1, "sink": 1, "sink-topic": 2, "store": 3}
    ncols = 1
    for row_items in rows.values():
        row_items.sort(key=lambda it: order.get(it.kind, 1))
        for col, item in enumerate(row_items):
            item.col = col
        ncols = max(ncols, len(row_items))
    nrows = max(rows) + 1 if rows else 1
    for item in out.items.values():
        item.x = PAD + item.col * COL_W
        item.y = HEADER + PAD + item.row * ROW_H
    out.width = 2 * PAD + ncols * COL_W - (COL_W - BOX_W)
    out.height = HEADER + 2 * PAD + nrows * ROW_H - (ROW_H - BOX_H)
    return out


def _shape(item: _Item, dx: float) -> str:
    x, y = item.x + dx, item.y
    fill = FILL.get(item.kind, "#f3f4f6")
    full = f"{item.kind}: {item.label}" + (f" (changelog topic {item.note})" if item.note else "")
    title = f"<title>{escape(full)}</title>"
    label_y = y + (BOX_H / 2 + 4 if not item.note else 14)
    text = (
        f'<text x="{x + BOX_W / 2:.0f}" y="{label_y:.0f}" text-anchor="middle" font-size="11">'
        f"{escape(_short(item.label))}</text>"
    )
    if item.note:
        text += (
            f'<text x="{x + BOX_W / 2:.0f}" y="{y + 27:.0f}" text-anchor="middle" font-size="9" '
            f'fill="#6b7280">{escape(_short(item.note, 38))}</text>'
        )
    cls = f'class="ks-{item.kind}"'
    if item.kind in ("topic", "sink-topic", "repartition"):
        body = (
            f'<rect {cls} x="{x:.0f}" y="{y:.0f}" width="{BOX_W}" height="{BOX_H}" rx="17" '
            f'fill="{fill}" stroke="#64748b"/>'
        )
    elif item.kind == "store":
        body = (
            f'<path {cls} d="M{x:.0f},{y + 6:.0f} a{BOX_W / 2:.0f},6 0 0,0 {BOX_W},0 '
            f"v{BOX_H - 12} a{BOX_W / 2:.0f},6 0 0,1 -{BOX_W},0 z "
            f'M{x:.0f},{y + 6:.0f} a{BOX_W / 2:.0f},6 0 0,1 {BOX_W},0" fill="{fill}" stroke="#9d174d"/>'
        )
    else:
        body = (
            f'<rect {cls} x="{x:.0f}" y="{y:.0f}" width="{BOX_W}" height="{BOX_H}" rx="4" '
            f'fill="{fill}" stroke="#475569"/>'
        )
    return f"<g>{title}{body}{text}</g>"


def _edge(a: _Item, b: _Item, dashed: bool, dx: float) -> str:
    dash = ' stroke-dasharray="4 3"' if dashed else ' marker-end="url(#ks-arrow)"'
    if a.row == b.row and abs(a.col - b.col) > 1:  # around the boxes in between: a curve below them
        x1, x2 = a.x + BOX_W / 2 + dx, b.x + BOX_W / 2 + dx
        y = a.y + BOX_H
        return (
            f'<path d="M{x1:.0f},{y:.0f} Q{(x1 + x2) / 2:.0f},{y + 26:.0f} {x2:.0f},{y:.0f}" fill="none" '
            f'stroke="#475569"{dash}/>'
        )
    if a.row == b.row:
        left, right = (a, b) if a.col < b.col else (b, a)
        x1, y1 = left.x + BOX_W + dx, left.y + BOX_H / 2
        x2, y2 = right.x + dx, right.y + BOX_H / 2
        if b is left:
            x1, x2 = x2, x1
    else:
        x1, y1 = a.x + BOX_W / 2 + dx, a.y + BOX_H
        x2, y2 = b.x + BOX_W / 2 + dx, b.y
    return f'<line x1="{x1:.0f}" y1="{y1:.0f}" x2="{x2:.0f}" y2="{y2:.0f}" stroke="#475569"{dash}/>'


def topology_svg(description: dict[str, Any], application_id: str | None = None) -> str:
    """An SVG string for ``describe().to_dict()``; ``application_id`` names the changelog topics."""
    repartition = set(description.get("repartition_topics", []))
    changelog = set(description.get("changelog_stores", []))
    subs = [_layout_sub(s, repartition, changelog, application_id) for s in description.get("subtopologies", [])]
    parts: list[str] = []
    dx = 0.0
    height = max([s.height for s in subs], default=60.0)
    for sub in subs:
        parts.append(
            f'<rect x="{dx + 4:.0f}" y="4" width="{sub.width - 8:.0f}" height="{sub.height - 8:.0f}" rx="8" '
            f'fill="none" stroke="#cbd5e1" class="ks-subtopology"/>'
            f'<text x="{dx + PAD:.0f}" y="{HEADER:.0f}" font-size="12" font-weight="bold">'
            f"Sub-topology {escape(str(sub.sid))}</text>"
        )
        for a_id, b_id, dashed in sub.edges:
            parts.append(_edge(sub.items[a_id], sub.items[b_id], dashed, dx))
        parts.extend(_shape(item, dx) for item in sub.items.values())
        dx += sub.width + 10
    if not subs:
        parts.append('<text x="10" y="30" font-size="12">(empty topology)</text>')
    width = max(dx, 200.0)
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="ks-topology" width="{width:.0f}" height="{height:.0f}" '
        f'viewBox="0 0 {width:.0f} {height:.0f}" font-family="sans-serif">'
        '<defs><marker id="ks-arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
        'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#475569"/></marker></defs>'
        + "".join(parts)
        + "</svg>"
    )
