"""Notebook reprs of streams, tables and window/session store views (issue 24: they were plain text): a
KStream/KTable shows its place in the topology, a store view its first rows."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pandas as pd

import kstream_nb as ks
from kstream_nb.topology.place_html import node_place_html

HIGHLIGHT = re.compile(r"<span style='background:#fde68a'>(.*?)</span>")


class _Cells(HTMLParser):
    """The text of every table row's cells (header rows included)."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[str]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: object) -> None:
        if tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None:
            self.rows[-1].append("".join(self._cell).strip())
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def table_rows(html: str) -> list[list[str]]:
    parser = _Cells()
    parser.feed(html)
    return parser.rows


def test_stream_and_table_show_their_node_sub_topology_and_upstream_topics() -> None:
    b = ks.StreamsBuilder()
    words = b.stream("sentences").flat_map_values(str.split)
    counts = words.group_by(lambda k, w: w).count(store="counts")
    description = b.topology.describe().to_dict()
    sub_of = {n["name"]: s["id"] for s in description["subtopologies"] for n in s["nodes"]}

    html = words._repr_html_()
    assert f"<b>KStream</b> at node <code>{words.node}</code> (sub-topology {sub_of[words.node]})" in html
    assert "reads from: <code>sentences</code></div>" in html
    # the node's own lines of describe() are the highlighted ones
    node = next(n for s in description["subtopologies"] for n in s["nodes"] if n["name"] == words.node)
    assert [ln for ln in HIGHLIGHT.findall(html) if ln.strip()] == [
        f"    Processor: {words.node} (stores: [])",
        f"      --&gt; {', '.join(node['successors'])}",
        f"      &lt;-- {', '.join(node['predecessors'])}",
    ]

    html = counts._repr_html_()
    assert sub_of[counts.node] == 1
    assert f"<b>KTable</b> at node <code>{counts.node}</code> (sub-topology 1), store <code>counts</code>" in html
    # through the repartition topic back to the input topic
    assert "reads from: <code>counts-repartition</code> (repartition), <code>sentences</code>" in html
    assert HIGHLIGHT.findall(html)[0] == f"    Processor: {counts.node} (stores: [counts])"
    # a sink ending sub-topology 0: its lines only, not the next sub-topology's title
    sink = b.topology.describe().to_dict()["subtopologies"][0]["nodes"][-1]["name"]
    assert sink == "counts-repartition-sink"
    assert HIGHLIGHT.findall(node_place_html(b.topology, sink, "KStream")) == [
        f"    Sink: {sink} (topic: counts-repartition)",
        "      &lt;-- counts-repartition-filter",
    ]
    assert "Sub-topology: 0" in html and "Sub-topology: 1" in html


def test_names_are_escaped() -> None:
    stream = ks.StreamsBuilder().stream("<b>odd</b>")
    html = stream._repr_html_()
    assert "<code>&lt;b&gt;odd&lt;/b&gt;</code>" in html and "<b>odd</b>" not in html


CLICKS = [("alice", 1_000), ("alice", 3_000), ("bob", 4_000), ("alice", 12_000), ("bob", 14_000), ("bob", 30_000)]


def test_window_and_session_store_views_show_their_first_rows(url, make_app) -> None:
    ks.produce("clicks", [(k, 1) for k, _ in CLICKS], bootstrap_servers=url, timestamps=[t for _, t in CLICKS])
    b = ks.StreamsBuilder()
    grouped = b.stream("clicks").group_by_key()
    grouped.windowed_by(ks.TimeWindows.of("10s").grace("1h")).count(store="per-10s")
    grouped.windowed_by(ks.SessionWindows.with_gap("5s").grace("1h")).count(store="sessions")
    app = make_app(b.build(), application_id="reprs")
    app.start().wait_until_running().wait_until_idle()

    frame = pd.DataFrame(CLICKS, columns=["key", "ts"])
    frame["start"] = frame.ts // 10_000 * 10_000
    tumbling = frame.groupby(["key", "start"]).size()
    want = [[k, str(s), str(s + 10_000), str(n)] for (k, s), n in tumbling.items()]
    html = app.store("per-10s")._repr_html_()
    assert html.startswith("<p>window store <code>per-10s</code></p>")
    assert table_rows(html) == [["key", "start", "end", "value"], *want]

    # pandas sessions: a key's next click more than 5 s after its previous one starts a new session
    sessions = []
    for key, group in frame.sort_values("ts").groupby("key"):
        for _, part in group.groupby((group.ts.diff() > 5_000).cumsum()):
            sessions.append([key, str(part.ts.min()), str(part.ts.max()), str(len(part))])
    assert table_rows(app.store("sessions")._repr_html_())[1:] == sessions


def test_a_window_store_view_shows_twenty_rows_and_says_how_many(url, make_app) -> None:
    ks.produce("clicks", [("k", 1)] * 25, bootstrap_servers=url, timestamps=list(range(25)))
    b = ks.StreamsBuilder()
    b.stream("clicks").group_by_key().windowed_by(ks.TimeWindows.of("1ms").grace("1h")).count(store="tiny")
    app = make_app(b.build(), application_id="many")
    app.start().wait_until_running().wait_until_idle()
    view = app.store("tiny")
    html = view._repr_html_()
    assert len(table_rows(html)) == 1 + 20
    assert f"<p>{len(view.all())} windows, showing 20</p>" in html
    app.stop(10)
    assert view._repr_html_() is None  # not available: the plain repr says so
