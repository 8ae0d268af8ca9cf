"""``DroppedTable``: the dashboard's "Dropped (late)" section, the last records an app dropped for closed
windows (``app.dropped_records()``), so that "why is my output missing" has an answer at a glance."""

from __future__ import annotations

from html import escape
from typing import Any

import ipywidgets as widgets

from kstream_nb.jupyter.refresher import DEFAULT_RATE_HZ, FINAL_STATES
from kstream_nb.jupyter.widgets.live import STYLE, LiveWidget, html_table
from kstream_nb.runtime.app import KafkaStreams

COLUMNS = ["task", "key", "timestamp", "window", "late by (ms)", "stream time", "processor", "from"]


class DroppedTable(LiveWidget):
    """The last ``n`` late records, newest first: key, timestamp, the window they missed, by how much (stream
    time - window close), the task and processor, and the input record (topic-partition@offset)."""

    def __init__(
        self, app: KafkaStreams, n: int = 20, max_rate_hz: float = DEFAULT_RATE_HZ, autostart: bool = True
    ) -> None:
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        self.n = n
        self.rows: list[dict[str, Any]] = []
        self.dropped_total = 0
        self.html = widgets.HTML(value=STYLE + self._render())
        super().__init__([self.html])
        self._init_live(app, max_rate_hz, autostart, f"kstream-dropped-{app.application_id}")

    def read(self) -> list[dict[str, Any]]:
        """The last ``n`` late records as table rows (``app.dropped_records(n)``)."""
        assert self.app is not None
        rows = []
        for r in self.app.dropped_records(self.n).to_dict("records"):
            rows.append(
                {
                    "task": r["task"],
                    "key": r["key"],
                    "timestamp": r["timestamp"],
                    "window": f"[{r['window_start']}, {r['window_end']}]",
                    "late by (ms)": r["lateness_ms"],
                    "stream time": r["stream_time"],
                    "processor": r["processor"],
                    "from": f"{r['topic']}-{r['partition']}@{r['offset']}" if r["topic"] is not None else "-",
                }
            )
        return rows

    def _update(self) -> None:
        assert self.app is not None
        if self.app.state in FINAL_STATES:  # the stopped app's tasks are gone: keep what was shown
            return
        self.dropped_total = int(self.app.metrics().get("dropped-records-total", 0))
        self.rows = self.read()
        self.html.value = STYLE + self._render()

    def _render(self, note: str = "") -> str:
        def pill(name: str, label: str, value: Any, cls: str = "") -> str:
            return f'<span class="ks-pill {cls}" data-metric="{name}">{label}<b>{escape(str(value))}</b></span>'

        head = (
            '<div style="font:bold 12px sans-serif;margin-bottom:3px">Dropped (late)</div>'
            + pill("late-shown", "late records shown", len(self.rows), "ks-warn" if self.rows else "")
            + pill("dropped-total", "dropped (all reasons)", self.dropped_total)
            + (f'<span class="ks-pill ks-warn">{escape(note)}</span>' if note else "")
        )
        if not self.rows:
            return head + "<div><i>no record dropped for a closed window</i></div>"
        return head + html_table(COLUMNS, ([row[c] for c in COLUMNS] for row in self.rows))

    def _show_error(self, message: str) -> None:
        self.html.value = STYLE + self._render(message)
