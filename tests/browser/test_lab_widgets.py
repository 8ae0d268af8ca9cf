"""The dashboard of a ``%%kstream`` cell, rendered for real: JupyterLab + headless Debian Chromium.

Opens the test notebook (``notebook.py``) in JupyterLab, runs all its cells from the Run menu, and checks
in the page's DOM that the window chart draws marks (Vega, loaded offline: no network here), the join
table has rows (null-padded ones included), the topology graph and the assignment view are non-empty, and
that they update while the app runs: the records processed and the chart's drawing change between two
reads, and the assignment view shows the stream thread the last cell adds when the test says so.
Screenshots, timings and the server/browser logs go to ``tests/browser/artifacts/`` (git-ignored).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.lab_server import Lab

from .conftest import ARTIFACTS, NOTEBOOK
from .notebook import ADD_THREAD_FLAG

pytestmark = [pytest.mark.browser, pytest.mark.timeout(180)]

# One read of everything the test checks, done in the page. The chart is Vega's canvas (vega-embed's
# default renderer) or SVG: for a canvas, "marks" are the coloured pixels (lines, points, legend symbols;
# axes, grid and text are grey), and a hash of all pixels tells whether the drawing changed.
SNAPSHOT_JS = """
() => {
  const text = (el) => (el ? el.textContent.trim() : null);
  const out = {};
  out.processed = text(document.querySelector('[data-metric="processed"] b'));
  out.threads = text(document.querySelector('[data-metric="threads"] b'));
  const pill = [...document.querySelectorAll('.ks-pill')]
    .find((p) => p.firstChild && p.firstChild.textContent.trim() === 'points');
  out.points = pill ? text(pill.querySelector('b')) : null;
  out.chartError = [...document.querySelectorAll('.vega-embed, .jp-OutputArea-output')]
    .some((e) => e.textContent.includes('JavaScript Error'));
  const marks = document.querySelector('.vega-embed .marks');
  out.chartKind = marks ? marks.tagName.toLowerCase() : null;
  out.marks = 0;
  out.markItems = 0;
  out.chartHash = null;
  if (marks && marks.tagName === 'CANVAS' && marks.width > 0 && marks.height > 0) {
    const data = marks.getContext('2d').getImageData(0, 0, marks.width, marks.height).data;
    let h = 2166136261 >>> 0;
    let colored = 0;
    for (let i = 0; i < data.length; i += 4) {
      const r = data[i], g = data[i + 1], b = data[i + 2], a = data[i + 3];
      if (a > 0 && Math.max(r, g, b) - Math.min(r, g, b) > 60) colored++;
      h = Math.imul(h ^ (r + (g << 8) + (b << 16) + (a << 24)), 16777619) >>> 0;
    }
    out.marks = colored;
    out.chartHash = h;
  } else if (marks) {
    const items = marks.querySelectorAll('.mark-line path, .mark-symbol path');
    out.markItems = [...items].filter((p) => (p.getAttribute('d') || '').length > 0).length;
    out.marks = out.markItems;
    out.chartHash = marks.innerHTML.length + ':' + out.markItems;
  }
  const join = document.querySelector('table.ks-table:not(.ks-assignment)');
  out.joinColumns = join ? [...join.querySelectorAll('thead th')].map((th) => th.textContent) : [];
  out.joinRows = join ? join.querySelectorAll('tbody tr').length : 0;
  out.joinText = join ? join.tBodies[0].textContent : '';
  const assignment = document.querySelector('table.ks-assignment');
  out.assignmentRows = assignment ? assignment.querySelectorAll('tbody tr').length : 0;
  out.assignmentChips = assignment ? assignment.querySelectorAll('.ks-chip').length : 0;
  out.assignmentText = assignment ? assignment.parentElement.textContent : '';
  const topology = document.querySelector('svg.ks-topology');
  out.topologyBoxes = topology ? topology.querySelectorAll('rect').length : 0;
  out.topologyText = topology ? topology.textContent : '';
  return out;
}
"""


READ_FIELDS = ("processed", "points", "chartKind", "marks", "joinRows", "assignmentRows", "topologyBoxes")


def _poll(page: Any, ok: Callable[[dict[str, Any]], bool], timeout: float, what: str) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        snap: dict[str, Any] = page.evaluate(SNAPSHOT_JS)
        if ok(snap):
            return snap
        if time.monotonic() > deadline:
            shown = {k: v for k, v in snap.items() if not k.endswith("Text")}
            message = f"timed out after {timeout}s waiting for {what}; last read: {shown}"
            (ARTIFACTS / "failure.txt").write_text(message + "\n")
            raise AssertionError(message)
        page.wait_for_timeout(250)


def _number(text: str | None) -> int:
    return int(text) if text is not None and text.strip().lstrip("-").isdigit() else -1


def _rendered(s: dict[str, Any]) -> bool:
    return (
        s["marks"] > 0
        and s["joinRows"] > 0
        and s["assignmentChips"] > 0
        and s["topologyBoxes"] > 0
        and _number(s["processed"]) > 0
    )


def _screenshot(page: Any, artifacts: Path, name: str) -> None:
    page.screenshot(path=str(artifacts / f"{name}.png"))
    for part, selector in (
        ("dashboard", ".jp-OutputArea-output:has(.ks-topology)"),
        ("assignment", ".widget-html:has(table.ks-assignment)"),
    ):
        element = page.locator(selector).first
        if element.count():
            element.screenshot(path=str(artifacts / f"{name}-{part}.png"))


def test_dashboard_renders_and_updates_in_jupyterlab(lab: Lab, page: Any, artifacts: Path) -> None:
    started = time.monotonic()
    timings: dict[str, float] = {}
    page.goto(lab.tree_url(NOTEBOOK), wait_until="domcontentloaded")
    page.wait_for_selector(".jp-NotebookPanel .jp-Cell", timeout=60_000)
    page.wait_for_selector("#jp-main-statusbar >> text=Idle", timeout=60_000)  # the kernel is up
    timings["lab open, kernel idle"] = time.monotonic() - started

    page.get_by_role("menuitem", name="Run", exact=True).click()
    page.get_by_role("menuitem", name="Run All Cells", exact=True).click()
    ran_at = time.monotonic()

    try:
        first = _poll(page, _rendered, 60, "the dashboard to render (chart marks, join rows, tasks, topology)")
        timings["run all -> dashboard rendered"] = time.monotonic() - ran_at
        _screenshot(page, artifacts, "1-rendered")

        assert not first["chartError"], "the chart shows a JavaScript error (Vega not loaded offline?)"
        # join table: both sides and the record timestamp; users 4 and 5 have no users row -> null-padded
        assert {"timestamp", "key", "page", "name", "tier"} <= set(first["joinColumns"]), first["joinColumns"]
        # topology graph: the source topics, the stores and the sink topic are drawn
        for name in ("clicks", "users", "clicks-per-second", "enriched"):
            assert name in first["topologyText"], f"{name!r} missing from the topology graph"
        assert first["assignmentRows"] == 1
        (lab.root / ADD_THREAD_FLAG).touch()  # go-ahead: the notebook's last cell now adds a stream thread

        def updated(s: dict[str, Any]) -> bool:
            return (
                _rendered(s)
                and _number(s["processed"]) > _number(first["processed"])
                and s["chartHash"] != first["chartHash"]
                and s["points"] != first["points"]
                and s["assignmentRows"] >= 2  # the thread the last cell adds
                and _number(s["threads"]) == 2  # the metrics bar refreshes on its own schedule
                and "null" in s["joinText"]
            )

        second = _poll(page, updated, 45, "the widgets to update while the app runs")
        timings["dashboard rendered -> updates seen"] = (
            time.monotonic() - ran_at - timings["run all -> dashboard rendered"]
        )
        _screenshot(page, artifacts, "2-updated")
    except BaseException:
        with contextlib.suppress(Exception):
            _screenshot(page, artifacts, "failure")
        raise

    assert _number(second["threads"]) == 2
    # the assignment view moved from one thread to two while we watched
    assert second["assignmentRows"] == 2 and first["assignmentText"] != second["assignmentText"]
    timings["total"] = time.monotonic() - started
    summary = ", ".join(f"{k}: {v:.1f}s" for k, v in timings.items())
    reads = "\n".join(
        f"{label} read: " + " ".join(f"{k}={snap[k]}" for k in READ_FIELDS)
        for label, snap in (("first", first), ("second", second))
    )
    (artifacts / "timings.txt").write_text(f"{summary}\n{reads}\n")
    print(summary)
