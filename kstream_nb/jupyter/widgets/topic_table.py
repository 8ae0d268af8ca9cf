"""``JoinTable`` (alias ``TopicTable``): the last records of a join output, or any topic, as a live table."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import Any

import ipywidgets as widgets

from kstream_nb.cluster.topic_io import read_topic
from kstream_nb.errors import StreamsError
from kstream_nb.jupyter.refresher import DEFAULT_RATE_HZ
from kstream_nb.jupyter.widgets.live import STYLE, LiveWidget, html_table
from kstream_nb.runtime.app import KafkaStreams


def _app_of(source: Any) -> KafkaStreams | None:
    return source if isinstance(source, KafkaStreams) else None


class JoinTable(LiveWidget):
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
        start: int | None = None,
    ) -> None:
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        app = _app_of(source)
        self.bootstrap_servers = app.config.bootstrap_servers if app is not None else str(source)
        self.topic = topic
        self.n = n
        #: epoch ms: records older than this (by the topic's time index) are never shown (``tail --since``)
        self.start = start
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
            frame = read_topic(
                self.topic, self.bootstrap_servers, from_beginning=False, max_records=self.n, start=self.start
            )
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
