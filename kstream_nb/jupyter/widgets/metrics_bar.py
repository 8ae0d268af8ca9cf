"""``MetricsBar``: an app's state, throughput, lag, dropped and restored records from ``app.metrics()``."""

from __future__ import annotations

from html import escape
from typing import Any

import ipywidgets as widgets

from kstream_nb.jupyter.refresher import DEFAULT_RATE_HZ
from kstream_nb.jupyter.widgets.live import STYLE, LiveWidget
from kstream_nb.runtime.app import KafkaStreams


class MetricsBar(LiveWidget):
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
