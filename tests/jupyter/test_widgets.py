"""Widgets: throttled updates, bounded data, one refresher thread that stops with the app."""

from __future__ import annotations

import threading
import time
from typing import Any

import kstream_nb as ks
from kstream_nb.jupyter import (
    AssignmentView,
    Dashboard,
    JoinTable,
    MetricsBar,
    Refresher,
    Throttle,
    TopologyGraph,
    WindowChart,
    app_html,
    topology_mimebundle,
)
from kstream_nb.processor.windows import TimeWindows

from .conftest import wait_for


def _windowed_counts(grace_ms: int = 0) -> ks.Topology:
    b = ks.StreamsBuilder()
    (
        b.stream("clicks")
        .group_by_key()
        .windowed_by(TimeWindows(10, grace_ms=grace_ms))
        .count(store="per-10ms", retention=1_000)  # queries see windows within the retention: [0,10) at 100
        .to_stream()
        .to("counts")
    )
    return b.build()


def test_throttle_lets_through_at_most_the_rate() -> None:
    t = Throttle(4)
    times = (0.0, 0.1, 0.2, 0.25, 0.3, 0.49, 0.5)
    assert [t.ready(x) for x in times] == [True, False, False, True, False, False, True]


def test_window_chart_keeps_top_n_keys_and_bounded_windows(make_app: Any) -> None:
    app = make_app(_windowed_counts())
    chart = WindowChart(app, "per-10ms", top_n=3, max_windows=5, autostart=False, offline=False)
    rows = [(f"k{k}", s, s + 10, k + 1) for k in range(10) for s in range(0, 200, 10)]
    data = chart.bound_rows(rows)
    assert len(data) == 15 == chart.bound
    assert {d["key"] for d in data} == {"k9", "k8", "k7"}
    assert [d["start"] for d in data if d["key"] == "k9"] == [150, 160, 170, 180, 190]
    chart.value_field = "amount"
    assert chart.bound_rows([("a", 0, 10, {"amount": 2.5, "n": 1}), ("b", 0, 10, {"n": 3})]) == [
        {"key": "a", "start": 0, "end": 10, "value": 2.5}
    ]


def test_window_chart_updates_are_throttled_and_show_late_drops(make_app: Any, url: str) -> None:
    # key a: 3 records in [0,10), 1 in [100,110); then a record at t=5: its window closed -> dropped
    records = [ks.Record("a", 1, 1), ks.Record("a", 1, 2), ks.Record("b", 1, 3), ks.Record("a", 1, 4)]
    records += [ks.Record("a", 1, 100), ks.Record("a", 1, 5)]
    ks.produce("clicks", records, bootstrap_servers=url)
    app = make_app(_windowed_counts()).start()
    app.wait_until_running().wait_until_idle()
    chart = WindowChart(app, "per-10ms", max_rate_hz=2, autostart=False)
    for _ in range(50):
        chart.refresh()
    assert chart.refreshes == 1 and chart.chart_updates == 1
    assert {(d["key"], d["start"]): d["value"] for d in chart.data} == {("a", 0): 3, ("b", 0): 1, ("a", 100): 1}
    assert chart.dropped == 1
    assert "dropped late records<b>1</b>" in chart.header.value
    time.sleep(0.55)
    chart.refresh()
    assert chart.refreshes == 2 and chart.chart_updates == 1  # same data: the chart is not resent


def test_refresher_thread_stops_when_the_app_stops(make_app: Any, url: str) -> None:
    ks.produce("clicks", [ks.Record("a", 1, 1)], bootstrap_servers=url)
    app = make_app(_windowed_counts()).start()
    dash = Dashboard(app, max_rate_hz=20)
    assert dash.refresher.alive
    named = [t for t in threading.enumerate() if t.name.startswith("kstream-")]
    assert [t.name for t in named] == ["kstream-dashboard-app"]  # ONE thread for all the views
    wait_for(lambda: dash["chart"].data, what="a chart update")
    ticks = dash.refresher.ticks
    time.sleep(0.5)
    assert dash.refresher.ticks - ticks <= 11  # about 20 Hz, never a busy loop
    app.stop()
    wait_for(lambda: not dash.refresher.alive, 3, "the refresher to stop")
    assert "NOT_RUNNING" in dash["metrics"].html.value


def test_refresher_keeps_errors_instead_of_raising() -> None:
    class Broken:
        def refresh(self, force: bool = False) -> None:
            raise RuntimeError("boom")

    r = Refresher([Broken()], None, max_rate_hz=50).start()
    wait_for(lambda: r.errors, 3, "an error")
    assert r.alive and "boom" in r.errors[-1]
    assert r.stop()


def test_join_table_shows_null_padded_left_join_results(make_app: Any, url: str) -> None:
    ks.produce("users", [("u1", {"city": "Paris"})], bootstrap_servers=url, timestamps=0)
    orders = [("u1", {"item": "book"}), ("u2", {"item": "pen"}), ("u1", {"item": "cup"})]
    ks.produce("orders", orders, bootstrap_servers=url, timestamps=10)
    b = ks.StreamsBuilder()
    b.stream("orders").left_join(b.table("users"), lambda o, u: {"order": o, "user": u}).to("enriched")
    app = make_app(b.build(), "join").start()
    app.wait_until_running().wait_until_idle()
    table = JoinTable(app, "enriched", n=2, autostart=False)
    table.refresh(force=True)
    assert [(r["key"], r["user"]) for r in table.rows] == [("u1", {"city": "Paris"}), ("u2", None)]
    assert len(table.rows) == 2  # the last n only, newest first
    assert '<span class="ks-null">null</span>' in table.html.value
    missing = JoinTable(url, "not-yet", autostart=False)
    missing.refresh(force=True)
    assert missing.rows == [] and "waiting" in missing.html.value


def test_assignment_view_highlights_moved_tasks(make_app: Any, url: str) -> None:
    ks.produce("clicks", [ks.Record("a", 1, 1)], bootstrap_servers=url, partitions=4)
    app = make_app(_windowed_counts()).start()
    app.wait_until_running()
    view = AssignmentView(app, autostart=False, highlight_s=60)
    view.refresh(force=True)
    assert sorted(view.owners) == ["0_0", "0_1", "0_2", "0_3"]
    assert not view.moves and not view.moved()
    app.add_stream_thread()
    wait_for(lambda: len(app.assignment()) == 2 and all(app.assignment().values()), what="a rebalance")
    app.wait_until_running()
    view.refresh(force=True)
    assert view.moves and view.moved() == {m["task"] for m in view.moves}
    assert {m["to"][1] for m in view.moves} == {"app-StreamThread-2"}
    assert "ks-moved" in view.html.value and "app-StreamThread-2" in view.html.value


def test_metrics_bar_shows_rate_lag_drops(make_app: Any, url: str) -> None:
    ks.produce("clicks", [ks.Record("a", 1, 100), ks.Record("a", 1, 1)], bootstrap_servers=url)
    app = make_app(_windowed_counts()).start()
    app.wait_until_running().wait_until_idle()
    bar = MetricsBar(app, autostart=False)
    bar.refresh(force=True)
    assert bar.metrics["process-total"] == 2
    for name in ("records/s", "lag", "dropped", "restored", "processed"):
        assert f'data-metric="{name}"' in bar.html.value
    assert 'data-metric="dropped">dropped<b>1</b>' in bar.html.value


def test_topology_graph_and_reprs(make_app: Any) -> None:
    b = ks.StreamsBuilder()
    (
        b.stream("orders")
        .select_key(lambda k, v: v["item"])
        .group_by_key()
        .count(store="per-item")
        .to_stream()
        .to("item-counts")
    )
    topology = b.build()
    graph = TopologyGraph(topology)
    for text in ("Sub-topology 0", "Sub-topology 1", "orders", "per-item", "item-counts", "repartition"):
        assert text in graph.svg, text
    assert 'class="ks-repartition"' in graph.svg and 'class="ks-store"' in graph.svg
    bundle = topology_mimebundle(topology)
    assert bundle["text/html"].count("<svg") == 1 and "Sub-topology: 0" in bundle["text/plain"]
    app = make_app(topology, "shop")
    assert "shop-per-item-changelog" in TopologyGraph(app).svg
    assert "CREATED" in app_html(app)
    app.start().wait_until_running()
    html = app_html(app)
    assert "RUNNING" in html and "shop-StreamThread-1" in html
