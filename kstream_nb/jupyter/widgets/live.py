"""What every live widget shares: the CSS, HTML tables, offline Altair charts, and ``LiveWidget``, the base
of a widget refreshed from a background thread (a ``Refresher``) at a bounded rate."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Sequence
from html import escape
from typing import Any

import ipywidgets as widgets

from kstream_nb.jupyter.refresher import Refresher, Throttle, describe_error
from kstream_nb.runtime.app import KafkaStreams

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


class LiveWidget(widgets.VBox):
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
