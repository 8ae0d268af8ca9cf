"""Live widgets for a running ``KafkaStreams`` app: window chart, join/topic table, topology graph,
task assignment, metrics bar, and a dashboard that holds them.

Every widget reads only the app's public surface (``store()``, ``metrics()``, ``lag()``,
``assignment()``, ``group_assignment()``, ``topology.describe()``) and output topics through
``read_topic``. Widgets are ipywidgets ``VBox``es: display them like any widget. Live ones are refreshed
by ONE background thread (a ``Refresher``) per widget or per dashboard, at a bounded rate; the thread
stops when the app stops. Nothing here prints or displays from a thread: it only sets widget traits.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from html import escape
from typing import Any

import ipywidgets as widgets

from kstream_nb.cluster.topic_io import read_topic
from kstream_nb.errors import StreamsError
from kstream_nb.jupyter.refresher import DEFAULT_RATE_HZ, FINAL_STATES, Refresher, Throttle, describe_error
from kstream_nb.jupyter.svg import topology_svg
from kstream_nb.processor.windows import Windowed
from kstream_nb.runtime.app import KafkaStreams
from kstream_nb.topology.description import TopologyDescription
from kstream_nb.topology.topology import Topology

SHOW_ALL = ("metrics", "chart", "table", "topology", "tasks")

STYLE = """<style>
.ks-table{border-collapse:collapse;font-size:12px;font-family:sans-serif}
.ks-table th,.ks-table td{border:1px solid #d1d5db;padding:2px 6px;text-align:left;vertical-align:top}
.ks-table th{background:#f3f4f6}
.ks-null{color:#9ca3af;font-style:italic}
.ks-moved{background:#fef08a}
.ks-chip{display:inline-block;margin:1px 3px;padding:1px 6px;border-radius:9px;background:#e0e7ff;font-size:11px}
.ks-chip.ks-moved{background:#fde047;font-weight:bold}
.ks-pill{display:inline-block;margin:2px 6px 2px 0;padding:2px 8px;border-radius:10px;background:#f3f4f6;
 font-size:12px;font-family:sans-serif}
.ks-pill b{margin-left:4px}
.ks-warn{background:#fee2e2}
</style>"""

_OFFLINE_LOCK = threading.Lock()
_OFFLINE_DONE = False


def enable_offline_charts() -> bool:
    """Makes Altair's JupyterChart load its Vega JavaScript from a local bundle (vl-convert), once.

    Without it the chart's JavaScript comes from a CDN and, with no network, renders nothing.
    Returns False (charts still work online) when vl-convert-python is not installed.
    """
    global _OFFLINE_DONE
    with _OFFLINE_LOCK:
        if _OFFLINE_DONE:
            return True
        import altair as alt

        try:
            alt.JupyterChart.enable_offline()
        except (ImportError, ValueError):
            return False
        _OFFLINE_DONE = True
        return True


def _app_of(source: Any) -> KafkaStreams | None:
    return source if isinstance(source, KafkaStreams) else None


def _cell(value: Any) -> str:
    if value is None:
        return '<span class="ks-null">null</span>'
    if isinstance(value, dict | list | tuple):
        try:
            text = json.dumps(value, default=str, sort_keys=True)
        except (TypeError, ValueError):
            text = repr(value)
        return escape(text)
    return escape(str(value))


def html_table(columns: Sequence[str], rows: Iterable[Sequence[Any]], row_classes: Sequence[str] = ()) -> str:
    head = "".join(f"<th>{escape(c)}</th>" for c in columns)
    body = []
    for i, row in enumerate(rows):
        cls = f' class="{row_classes[i]}"' if i < len(row_classes) and row_classes[i] else ""
        body.append(f"<tr{cls}>" + "".join(f"<td>{_cell(v)}</td>" for v in row) + "</tr>")
    return f'<table class="ks-table"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


class _Live(widgets.VBox):
    """A widget refreshed from a background thread; standalone ones own their ``Refresher``."""

    def _init_live(self, app: KafkaStreams | None, max_rate_hz: float, autostart: bool, name: str) -> None:
        self.app = app
        self.throttle = Throttle(max_rate_hz)
        self.refreshes = 0
        self.error: str | None = None
        self.refresher: Refresher | None = None
        if autostart:
            self.refresher = Refresher([self], app, max_rate_hz, name=name).start()

    def refresh(self, force: bool = False) -> None:
        if not force and not self.throttle.ready():
            return
        self.refreshes += 1
        try:
            self._update()
            self.error = None
        except Exception as e:  # shown in the widget, never printed from the thread
            self.error = describe_error(e)
            self._show_error(self.error)

    def _update(self) -> None:
        raise NotImplementedError

    def _show_error(self, message: str) -> None:
        pass

    def stop(self, timeout: float = 5.0) -> bool:
        """Stops this widget's own refresher thread (a dashboard's widgets are stopped by the dashboard)."""
        return self.refresher.stop(timeout) if self.refresher is not None else True

    def _state_text(self) -> str:
        return self.app.state.value if self.app is not None else "-"


# ---- a. window aggregates as a live chart ------------------------------------------------------------


def _number(value: Any, field: str | Callable[[Any], Any] | None) -> float | None:
    if callable(field):
        value = field(value)
    elif field is not None and isinstance(value, dict):
        value = value.get(field)
    elif isinstance(value, dict):
        value = next((v for v in value.values() if isinstance(v, int | float) and not isinstance(v, bool)), None)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


class WindowChart(_Live):
    """Windowed KTable values over window start, one line per key (the ``top_n`` largest keys).

    Reads ``app.store(store)`` (a window store; a key-value store is drawn as bars per key) at most
    ``max_rate_hz`` times a second, keeps at most ``top_n`` keys x ``max_windows`` windows, and shows the
    app's dropped-late-records counter. ``value`` picks the number out of dict values (field name or
    function). The chart is an Altair ``JupyterChart`` whose JavaScript is loaded offline.
    """

    def __init__(
        self,
        app: KafkaStreams,
        store: str,
        top_n: int = 10,
        max_rate_hz: float = DEFAULT_RATE_HZ,
        value: str | Callable[[Any], Any] | None = None,
        max_windows: int = 60,
        title: str | None = None,
        autostart: bool = True,
        offline: bool = True,
    ) -> None:
        import altair as alt

        if offline:
            enable_offline_charts()
        if top_n < 1 or max_windows < 1:
            raise ValueError("top_n and max_windows must be >= 1")
        app.store(store)  # fails at once, naming the known stores, when there is no such store
        self.store_name = store
        self.top_n = top_n
        self.max_windows = max_windows
        self.value_field = value
        self.title = title or f"{app.application_id}: {store}"
        self.data: list[dict[str, Any]] = []
        self.dropped = 0
        self.windowed = True
        self.chart_updates = 0
        self.first_update_at: float | None = None
        self.created_at = time.monotonic()
        self.header = widgets.HTML(value=STYLE + self._header_html())
        self.chart = alt.JupyterChart(self._make_chart([]))
        super().__init__([self.header, self.chart])
        self._init_live(app, max_rate_hz, autostart, f"kstream-chart-{app.application_id}")

    @property
    def bound(self) -> int:
        """The most points the chart ever holds."""
        return self.top_n * self.max_windows

    def _read(self) -> list[tuple[Any, int | None, int | None, Any]]:
        assert self.app is not None
        store = self.app.store(self.store_name)
        if hasattr(store, "fetch"):  # a window/session store: (key, start, end, value)
            self.windowed = True
            return [(r[0], r[1], r[2], r[3]) for r in store.all()]
        rows: list[tuple[Any, int | None, int | None, Any]] = []
        for kv in store.all():
            key, value = kv
            if isinstance(key, Windowed):
                rows.append((key.key, key.start, key.end, value))
            else:
                rows.append((key, None, None, value))
        self.windowed = any(r[1] is not None for r in rows)
        return rows

    def bound_rows(self, rows: Iterable[tuple[Any, int | None, int | None, Any]]) -> list[dict[str, Any]]:
        """The top ``top_n`` keys (by total), each with its latest ``max_windows`` windows, as chart rows."""
        per_key: dict[str, list[tuple[int, int, float]]] = {}
        for key, start, end, value in rows:
            number = _number(value, self.value_field)
            if number is None:
                continue
            per_key.setdefault(str(key), []).append((start or 0, end or 0, number))
        ranked = sorted(per_key, key=lambda k: (-sum(v for _, _, v in per_key[k]), k))[: self.top_n]
        out: list[dict[str, Any]] = []
        for key in sorted(ranked):
            windows = sorted(per_key[key])[-self.max_windows :]
            out.extend({"key": key, "start": s, "end": e, "value": v} for s, e, v in windows)
        return out

    def _make_chart(self, data: list[dict[str, Any]]) -> Any:
        import altair as alt

        source = alt.Data(values=data)
        if not self.windowed:
            return (
                alt.Chart(source, title=self.title)
                .mark_bar()
                .encode(
                    x=alt.X("key:N", title="key"), y=alt.Y("value:Q", title="value"), tooltip=["key:N", "value:Q"]
                )
                .properties(width=420, height=200)
            )
        temporal = any(d["start"] > 100_000_000_000 for d in data)
        x = alt.X("start:T", title="window start") if temporal else alt.X("start:Q", title="window start (ms)")
        return (
            alt.Chart(source, title=self.title)
            .mark_line(point=True)
            .encode(
                x=x,
                y=alt.Y("value:Q", title="value"),
                color=alt.Color("key:N", title="key"),
                tooltip=["key:N", "start:Q", "end:Q", "value:Q"],
            )
            .properties(width=420, height=200)
        )

    def _header_html(self, note: str = "") -> str:
        state = self._state_text() if hasattr(self, "app") else "CREATED"
        keys = len({d["key"] for d in self.data})
        warn = " ks-warn" if self.dropped else ""
        return (
            f'<span class="ks-pill">store<b>{escape(self.store_name)}</b></span>'
            f'<span class="ks-pill">state<b>{escape(state)}</b></span>'
            f'<span class="ks-pill">keys shown<b>{keys}</b></span>'
            f'<span class="ks-pill">points<b>{len(self.data)}</b></span>'
            f'<span class="ks-pill ks-dropped{warn}">dropped late records<b>{self.dropped}</b></span>'
            + (f'<span class="ks-pill ks-warn">{escape(note)}</span>' if note else "")
        )

    def _update(self) -> None:
        assert self.app is not None
        self.dropped = int(self.app.metrics().get("dropped-records-total", 0))
        if self.app.state in FINAL_STATES:
            self.header.value = STYLE + self._header_html("app stopped: showing the last values")
            return
        data = self.bound_rows(self._read())
        if data != self.data:
            self.data = data
            self.chart.chart = self._make_chart(data)
            self.chart_updates += 1
            if self.first_update_at is None and data:
                self.first_update_at = time.monotonic()
        self.header.value = STYLE + self._header_html()

    def _show_error(self, message: str) -> None:
        self.header.value = STYLE + self._header_html(message)


# ---- b. join output (or any topic) as a live table ------------------------------------------------


class JoinTable(_Live):
    """The last ``n`` records of an output topic, newest first; dict values are split into columns.

    ``source`` is the app (its cluster; the table stops with the app) or a bootstrap string such as
    ``"memory://"`` (then ``stop()`` ends it). Null values and null fields - the padded side of a left or
    outer join - show as ``null``. Reads the topic like any consumer (``read_topic``), never the app's
    internals.
    """

    def __init__(
        self,
        source: KafkaStreams | str,
        topic: str,
        n: int = 20,
        max_rate_hz: float = DEFAULT_RATE_HZ,
        columns: Sequence[str] | None = None,
        autostart: bool = True,
    ) -> None:
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        app = _app_of(source)
        self.bootstrap_servers = app.config.bootstrap_servers if app is not None else str(source)
        self.topic = topic
        self.n = n
        self.fixed_columns = list(columns) if columns else None
        self.rows: list[dict[str, Any]] = []
        self.columns: list[str] = []
        self.total_seen = 0
        self.html = widgets.HTML(value=STYLE + f"<i>waiting for topic {escape(topic)}…</i>")
        super().__init__([self.html])
        self._init_live(app, max_rate_hz, autostart, f"kstream-table-{topic}")

    def read(self) -> list[dict[str, Any]]:
        """The last ``n`` records, newest first, as flat dicts."""
        try:
            frame = read_topic(self.topic, self.bootstrap_servers, from_beginning=False, max_records=self.n)
        except StreamsError as e:
            if "does not exist" in str(e):
                return []
            raise
        frame = frame.sort_values(["timestamp", "partition", "offset"]).tail(self.n)
        rows = []
        for rec in reversed(frame.to_dict("records")):
            row: dict[str, Any] = {
                "timestamp": rec["timestamp"],
                "partition": rec["partition"],
                "offset": rec["offset"],
                "key": rec["key"],
            }
            value = rec["value"]
            if isinstance(value, dict):
                for k, v in value.items():
                    row[str(k)] = v
            else:
                row["value"] = value
            rows.append(row)
        return rows

    def _update(self) -> None:
        rows = self.read()
        if not rows and not self.rows:
            return
        if rows == self.rows:
            return
        self.rows = rows
        cols = self.fixed_columns or []
        if not cols:
            seen: dict[str, None] = {}
            for row in rows:
                for c in row:
                    seen.setdefault(c, None)
            cols = list(seen)
        self.columns = cols
        caption = (
            f'<div style="font:12px sans-serif;margin-bottom:3px"><b>{escape(self.topic)}</b>: last '
            f"{len(rows)} record(s), newest first</div>"
        )
        self.html.value = STYLE + caption + html_table(cols, ([row.get(c) for c in cols] for row in rows))

    def _show_error(self, message: str) -> None:
        self.html.value = STYLE + f'<span class="ks-pill ks-warn">{escape(message)}</span>'


TopicTable = JoinTable


# ---- c. topology graph --------------------------------------------------------------------------------


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


# ---- d. task / partition assignment --------------------------------------------------------------------


class AssignmentView(_Live):
    """Instances x threads x active tasks (with their partitions), refreshed on every rebalance.

    Tasks that changed owner in the last rebalance are highlighted for ``highlight_s`` seconds; ``moves``
    keeps the latest moves (task, from, to). Other instances of the same application id show their tasks
    from the group's last assignment (their partitions are known to them only).
    """

    def __init__(
        self,
        app: KafkaStreams,
        max_rate_hz: float = DEFAULT_RATE_HZ,
        highlight_s: float = 5.0,
        autostart: bool = True,
    ) -> None:
        self.highlight_s = highlight_s
        self.owners: dict[str, tuple[str, str]] = {}
        self.partitions: dict[str, list[str]] = {}
        self.moves: deque[dict[str, Any]] = deque(maxlen=50)
        self.rebalances = 0
        self._moved_at: dict[str, float] = {}
        self.html = widgets.HTML(value=STYLE + "<i>waiting for the first assignment…</i>")
        super().__init__([self.html])
        self._init_live(app, max_rate_hz, autostart, f"kstream-tasks-{app.application_id}")

    def snapshot(self) -> tuple[dict[str, tuple[str, str]], dict[str, list[str]]]:
        """task -> (instance, thread), task -> partitions, from the app's public assignment views."""
        assert self.app is not None
        owners: dict[str, tuple[str, str]] = {}
        partitions: dict[str, list[str]] = {}
        local = self.app.assignment()
        for task, info in self.app.group_assignment().items():
            owners[task] = (str(info.get("instance", "?")), str(info.get("thread", "?")))
        for thread, tasks in local.items():
            for task, parts in tasks.items():
                owners[task] = (self.app.process_id, thread)
                partitions[task] = list(parts)
        return owners, partitions

    def _update(self) -> None:
        assert self.app is not None
        if self.app.state in FINAL_STATES:
            owners: dict[str, tuple[str, str]] = {}
            partitions: dict[str, list[str]] = {}
        else:
            owners, partitions = self.snapshot()
        now = time.monotonic()
        if owners != self.owners:
            if owners:
                self.rebalances += 1
            for task, owner in owners.items():
                before = self.owners.get(task)
                if before is not None and before != owner:
                    self.moves.append({"task": task, "from": before, "to": owner, "at": time.time()})
                    self._moved_at[task] = now
            self.owners = owners
        self.partitions = partitions
        self.html.value = STYLE + self._render(now)

    def moved(self, now: float | None = None) -> set[str]:
        """Tasks highlighted now (moved within ``highlight_s``)."""
        now = time.monotonic() if now is None else now
        return {t for t, at in self._moved_at.items() if now - at < self.highlight_s}

    def _render(self, now: float) -> str:
        assert self.app is not None
        moved = self.moved(now)
        by_owner: dict[tuple[str, str], list[str]] = {}
        for task, owner in self.owners.items():
            by_owner.setdefault(owner, []).append(task)
        for thread in self.app.assignment():  # threads without tasks still show
            by_owner.setdefault((self.app.process_id, thread), [])
        rows = []
        for (instance, thread), tasks in sorted(by_owner.items()):
            chips = []
            for task in sorted(tasks, key=_task_order):
                parts = self.partitions.get(task)
                label = escape(task) + (f" [{escape(', '.join(parts))}]" if parts else "")
                cls = "ks-chip ks-moved" if task in moved else "ks-chip"
                chips.append(f'<span class="{cls}" data-task="{escape(task)}">{label}</span>')
            here = " (this instance)" if instance == self.app.process_id else ""
            rows.append(
                f"<tr><td>{escape(instance)}{here}</td><td>{escape(thread)}</td>"
                f"<td>{len(tasks)}</td><td>{''.join(chips) or '<span class=ks-null>none</span>'}</td></tr>"
            )
        head = (
            f'<div style="font:12px sans-serif;margin-bottom:3px"><b>{escape(self.app.application_id)}</b>: '
            f"state {escape(self._state_text())}, {len(self.owners)} task(s), rebalances seen {self.rebalances}"
            + (f", last move: {escape(_move_text(self.moves[-1]))}" if self.moves else "")
            + "</div>"
        )
        table = (
            '<table class="ks-table ks-assignment"><thead><tr><th>instance</th><th>thread</th><th>tasks</th>'
            "<th>active tasks [partitions]</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>"
        )
        return head + table

    def _show_error(self, message: str) -> None:
        self.html.value = STYLE + f'<span class="ks-pill ks-warn">{escape(message)}</span>'


def _task_order(task: str) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in task.split("_"))
    except ValueError:
        return (1 << 30,)


def _move_text(move: dict[str, Any]) -> str:
    return f"task {move['task']}: {move['from'][1]} -> {move['to'][1]}"


# ---- e. metrics bar -----------------------------------------------------------------------------------


class MetricsBar(_Live):
    """State, threads, tasks, records processed and records/s, lag (total and per partition), dropped
    late records, restored records and restore progress, from ``app.metrics()``."""

    def __init__(self, app: KafkaStreams, max_rate_hz: float = DEFAULT_RATE_HZ, autostart: bool = True) -> None:
        self.metrics: dict[str, Any] = {}
        self.html = widgets.HTML(value=STYLE + self._render({"state": app.state.value}))
        super().__init__([self.html])
        self._init_live(app, max_rate_hz, autostart, f"kstream-metrics-{app.application_id}")

    def _update(self) -> None:
        assert self.app is not None
        self.metrics = self.app.metrics()
        self.html.value = STYLE + self._render(self.metrics)

    @staticmethod
    def _render(m: dict[str, Any]) -> str:
        lag: dict[str, int] = m.get("lag") or {}
        total_lag = sum(lag.values())
        worst = sorted(lag.items(), key=lambda kv: (-kv[1], kv[0]))[:6]
        lag_detail = ", ".join(f"{escape(p)}={n}" for p, n in worst)
        dropped = m.get("dropped-records-total", 0)
        restore = m.get("restore-progress") or {}
        restore_text = ", ".join(f"{escape(str(s))} {_progress(p)}" for s, p in sorted(restore.items())[:4])

        def pill(name: str, value: Any, cls: str = "") -> str:
            return f'<span class="ks-pill {cls}" data-metric="{name}">{name}<b>{escape(str(value))}</b></span>'

        parts = [
            pill("state", m.get("state", "?"), "ks-warn" if m.get("state") in ("ERROR", "PENDING_ERROR") else ""),
            pill("threads", m.get("threads", 0)),
            pill("tasks", m.get("tasks", 0)),
            pill("processed", m.get("process-total", 0)),
            pill("records/s", f"{float(m.get('process-rate', 0.0)):.0f}"),
            pill("lag", total_lag),
            pill("dropped", dropped, "ks-warn" if dropped else ""),
            pill("restored", m.get("restored-records-total", 0)),
        ]
        if lag_detail:
            parts.append(f'<span class="ks-pill">lag per partition<b>{lag_detail}</b></span>')
        if restore_text:
            parts.append(f'<span class="ks-pill">restore<b>{restore_text}</b></span>')
        if m.get("missing-source-topics"):
            parts.append(pill("waiting for topics", ", ".join(m["missing-source-topics"]), "ks-warn"))
        if m.get("error"):
            parts.append(pill("error", m["error"], "ks-warn"))
        return "<div>" + "".join(parts) + "</div>"


def _progress(p: Any) -> str:
    if isinstance(p, tuple | list) and len(p) == 2 and p[1]:
        return f"{p[0]}/{p[1]} ({100 * p[0] / p[1]:.0f}%)"
    return str(p)


# ---- the dashboard ------------------------------------------------------------------------------------


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

    ``show`` picks the parts (``metrics, chart, table, topology, tasks``); ``store`` the store to chart
    (default: the first window store, else the first store) and ``topic`` the output topic to tail
    (default: the last sink topic). The thread stops when the app stops, or with ``stop()``.
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
