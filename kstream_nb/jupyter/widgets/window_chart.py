"""``WindowChart``: a windowed KTable's values as a live Altair line chart, one line per key, with each task's
stream time and oldest open window as rules (windows left of that rule are closed: late records are dropped)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from html import escape
from typing import Any

import ipywidgets as widgets

from kstream_nb.jupyter.refresher import DEFAULT_RATE_HZ, FINAL_STATES
from kstream_nb.jupyter.widgets.live import STYLE, LiveWidget, enable_offline_charts
from kstream_nb.processor.windows import Windowed
from kstream_nb.runtime.app import KafkaStreams


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


class WindowChart(LiveWidget):
    """Windowed KTable values over window start, one line per key (the ``top_n`` largest keys).

    Reads ``app.store(store)`` (a window store; a key-value store is drawn as bars per key) at most
    ``max_rate_hz`` times a second, keeps at most ``top_n`` keys x ``max_windows`` windows, and shows the
    app's dropped-late-records counter and, per task, the stream time and the start of the oldest open window
    of the processor writing this store (``app.metrics()["task-time"]``) as rules. ``value`` picks the number
    out of dict values (field name or function). The chart is an Altair ``JupyterChart`` whose JavaScript is
    loaded offline.
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
        #: the rules drawn: {"task", "mark": "stream time" | "oldest open window", "start": ms, "end": ms}
        self.time_marks: list[dict[str, Any]] = []
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
        temporal = any(d["start"] > 100_000_000_000 for d in [*data, *self.time_marks])
        x = alt.X("start:T", title="window start") if temporal else alt.X("start:Q", title="window start (ms)")
        lines = (
            alt.Chart(source)
            .mark_line(point=True)
            .encode(
                x=x,
                y=alt.Y("value:Q", title="value"),
                color=alt.Color("key:N", title="key"),
                tooltip=["key:N", "start:Q", "end:Q", "value:Q"],
            )
        )
        rules = (
            alt.Chart(alt.Data(values=self.time_marks))
            .mark_rule()
            .encode(
                x=x,
                strokeDash=alt.StrokeDash("mark:N", title="time", sort=["stream time", "oldest open window"]),
                tooltip=["task:N", "mark:N", "start:Q", "end:Q"],
            )
        )
        return alt.layer(lines, rules, title=self.title).properties(width=420, height=200)

    def _times(self, metrics: dict[str, Any]) -> list[dict[str, Any]]:
        """Per task, its stream time and oldest open window for this store, from ``metrics()["task-time"]``."""
        marks: list[dict[str, Any]] = []
        for task, times in sorted((metrics.get("task-time") or {}).items()):
            for w in times["windows"]:
                if w["store"] != self.store_name:
                    continue
                marks.append({"task": task, "mark": "stream time", "start": w["stream-time"], "end": None})
                marks.append({"task": task, "mark": "oldest open window", "start": w["start"], "end": w["end"]})
                break
        return marks

    def _header_html(self, note: str = "") -> str:
        state = self._state_text() if hasattr(self, "app") else "CREATED"
        keys = len({d["key"] for d in self.data})
        warn = " ks-warn" if self.dropped else ""
        stream_times = [m["start"] for m in self.time_marks if m["mark"] == "stream time"]
        oldest = min(
            (m for m in self.time_marks if m["mark"] == "oldest open window"),
            key=lambda m: m["start"],
            default=None,
        )
        times = (
            f'<span class="ks-pill" data-metric="stream-time">stream time<b>{max(stream_times)}</b></span>'
            if stream_times
            else ""
        ) + (
            f'<span class="ks-pill" data-metric="oldest-open-window">oldest open window'
            f"<b>[{oldest['start']}, {oldest['end']}]</b></span>"
            if oldest is not None
            else ""
        )
        return (
            f'<span class="ks-pill">store<b>{escape(self.store_name)}</b></span>'
            f'<span class="ks-pill">state<b>{escape(state)}</b></span>'
            f'<span class="ks-pill">keys shown<b>{keys}</b></span>'
            f'<span class="ks-pill">points<b>{len(self.data)}</b></span>'
            f'<span class="ks-pill ks-dropped{warn}">dropped late records<b>{self.dropped}</b></span>'
            + times
            + (f'<span class="ks-pill ks-warn">{escape(note)}</span>' if note else "")
        )

    def _update(self) -> None:
        assert self.app is not None
        metrics = self.app.metrics()
        self.dropped = int(metrics.get("dropped-records-total", 0))
        if self.app.state in FINAL_STATES:
            self.header.value = STYLE + self._header_html("app stopped: showing the last values")
            return
        data = self.bound_rows(self._read())
        marks = self._times(metrics) if self.windowed else []
        if data != self.data or marks != self.time_marks:
            self.data, self.time_marks = data, marks
            self.chart.chart = self._make_chart(data)
            self.chart_updates += 1
            if self.first_update_at is None and data:
                self.first_update_at = time.monotonic()
        self.header.value = STYLE + self._header_html()

    def _show_error(self, message: str) -> None:
        self.header.value = STYLE + self._header_html(message)
