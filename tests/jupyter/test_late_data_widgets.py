"""Late data in the widgets: the window chart's stream-time and oldest-open-window rules, and the dashboard's
"Dropped (late)" section listing the records dropped for closed windows (checked on data and spec, not pixels).

Hand-worked: tumbling windows of 10 ms with 5 ms grace close at ``end + 5``. Records a@1, a@12, b@25 bring
stream time to 25 (close time 20): [0,10) and [10,20) are closed, [20,30) is the oldest open window; a@8 then
misses [0,10) by 25 - (10 + 5) = 10 ms.
"""

from __future__ import annotations

from typing import Any

import kstream_nb as ks
from kstream_nb.jupyter import Dashboard, DroppedTable, WindowChart
from kstream_nb.processor.windows import TimeWindows


def _windowed_counts() -> ks.Topology:
    b = ks.StreamsBuilder()
    windows = TimeWindows(10, grace_ms=5)  # retention 1 s: queries still see the closed windows
    b.stream("clicks").group_by_key().windowed_by(windows).count(store="per-10ms", retention=1_000).to_stream().to(
        "counts"
    )
    return b.build()


def _late_app(make_app: Any, url: str) -> ks.KafkaStreams:
    records = [ks.Record("a", 1, 1), ks.Record("a", 1, 12), ks.Record("b", 1, 25), ks.Record("a", 1, 8)]
    ks.produce("clicks", records, bootstrap_servers=url)
    app = make_app(_windowed_counts()).start()
    app.wait_until_running().wait_until_idle()
    return app


def _layers_data(spec: dict[str, Any]) -> list[list[dict[str, Any]]]:
    """Each layer's data values, whether inline or moved to the spec's top-level datasets."""
    out = []
    for layer in spec["layer"]:
        data = layer.get("data", {})
        out.append(data["values"] if "values" in data else spec["datasets"][data["name"]])
    return out


def test_window_chart_draws_stream_time_and_the_oldest_open_window(make_app: Any, url: str) -> None:
    app = _late_app(make_app, url)
    chart = WindowChart(app, "per-10ms", autostart=False, offline=False)
    chart.refresh(force=True)
    assert chart.time_marks == [
        {"task": "0_0", "mark": "stream time", "start": 25, "end": None},
        {"task": "0_0", "mark": "oldest open window", "start": 20, "end": 30},
    ]
    spec = chart.chart.chart.to_dict()
    assert [
        layer["mark"]["type"] if isinstance(layer["mark"], dict) else layer["mark"] for layer in spec["layer"]
    ] == [
        "line",
        "rule",
    ]
    lines, rules = _layers_data(spec)
    assert {(d["key"], d["start"]): d["value"] for d in lines} == {("a", 0): 1, ("a", 10): 1, ("b", 20): 1}
    assert rules == chart.time_marks
    assert "stream time<b>25</b>" in chart.header.value
    assert "oldest open window<b>[20, 30]</b>" in chart.header.value
    assert "dropped late records<b>1</b>" in chart.header.value


def test_dropped_table_lists_the_late_record_with_its_window_and_lateness(make_app: Any, url: str) -> None:
    app = _late_app(make_app, url)
    table = DroppedTable(app, autostart=False)
    table.refresh(force=True)
    (row,) = table.rows
    assert (row["task"], row["key"], row["timestamp"], row["window"]) == ("0_0", "a", 8, "[0, 10]")
    assert (row["late by (ms)"], row["stream time"], row["from"]) == (10, 25, "clicks-0@3")
    assert "Dropped (late)" in table.html.value
    assert 'data-metric="late-shown">late records shown<b>1</b>' in table.html.value
    assert "<td>[0, 10]</td>" in table.html.value


def test_dashboard_has_a_dropped_section_for_windowed_apps_only(make_app: Any, url: str) -> None:
    app = _late_app(make_app, url)
    dash = Dashboard(app, autostart=False)
    assert list(dash.views) == ["metrics", "chart", "dropped", "table", "topology", "tasks"]
    dash.refresh()
    assert [r["key"] for r in dash["dropped"].rows] == ["a"]
    b = ks.StreamsBuilder()
    b.stream("clicks").filter(lambda k, v: v > 0).to("kept")
    plain = make_app(b.build(), "plain")
    assert "dropped" not in Dashboard(plain, autostart=False).views
