"""The Streams panel in a real JupyterLab + headless Debian Chromium (Playwright).

A notebook starts an app fed by a background producer; the panel lists it with a rising record count;
its topology and assignment open in the main area; the topic browser shows the topic's profile and recent
records; Stop in the panel stops it, and a later cell confirms in the kernel that the app is NOT_RUNNING.
A second test measures JupyterLab's page load with and without the extension, in the same run.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.lab_server import CHROMIUM, CHROMIUM_ARGS, run_lab

pytestmark = [pytest.mark.slow, pytest.mark.browser, pytest.mark.timeout(420)]

APP = "clickstream"
START_CELL = f"""\
%load_ext kstream_nb.jupyter.comm
import threading, time
import kstream_nb as ks

SERVERS = "memory://panel-test"
stop_feed = threading.Event()

def feed(seconds=180):
    n, deadline = 0, time.monotonic() + seconds
    while not stop_feed.is_set() and time.monotonic() < deadline:
        ks.produce("clicks", [(f"user-{{(n + i) % 5}}", {{"n": n + i}}) for i in range(40)],
                   bootstrap_servers=SERVERS, partitions=2)
        n += 40
        stop_feed.wait(0.1)

ks.produce("clicks", [("user-0", {{"n": -1}})], bootstrap_servers=SERVERS, partitions=2)
threading.Thread(target=feed, name="click-feed", daemon=True).start()
b = ks.StreamsBuilder()
b.stream("clicks").filter(lambda k, v: v["n"] % 2 == 0).group_by_key().count(store="per-user")
app = ks.KafkaStreams(b.build(), "{APP}", SERVERS, poll_ms=20, commit_interval_ms=200).start()
print("STARTED", app.application_id)
"""
CHECK_CELL = """\
stop_feed.set()
print("KERNEL-STATE", app.state.value, "RUNNING-APPS", [a.application_id for a in ks.running_apps()])
"""


def _load_playwright() -> Any:
    import playwright.sync_api as sync_api

    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"{CHROMIUM} is missing: run `bash scripts/install_test_tools.sh` (installs chromium)")
    return sync_api


@pytest.fixture
def browser() -> Iterator[Any]:
    sync_api = _load_playwright()
    playwright = sync_api.sync_playwright().start()
    try:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()
    finally:
        playwright.stop()


def _poll(fn: Callable[[], Any], timeout: float, what: str, interval: float = 0.25) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")


def _run_cell(page: Any, index: int) -> None:
    """Runs cell ``index`` (Shift+Enter in it); retried while its prompt shows it did not start."""
    cell = page.locator(".jp-Notebook .jp-Cell").nth(index)
    prompt = cell.locator(".jp-InputPrompt")
    for _ in range(5):
        cell.locator(".jp-InputArea-editor").click()
        page.keyboard.press("Shift+Enter")
        try:
            _poll(lambda: (prompt.inner_text() or "").strip() not in ("", "[ ]:"), 5, "the cell to start")
            return
        except AssertionError:
            continue
    raise AssertionError(f"cell {index} never started")


def _output(page: Any, index: int) -> str:
    text: str = page.locator(".jp-Notebook .jp-Cell").nth(index).locator(".jp-OutputArea").inner_text()
    return text


def _row(page: Any) -> dict[str, Any] | None:
    result: dict[str, Any] | None = page.evaluate(
        """(name) => {
            const tr = document.querySelector(`#kstream-nb-panel tr.kstream-app-row[data-name="${name}"]`);
            if (!tr) return null;
            return {state: tr.dataset.state, processed: Number(tr.dataset.processed),
                    tasks: tr.querySelector('.kstream-app-tasks').textContent,
                    rate: tr.querySelector('.kstream-app-rate').textContent};
        }""",
        APP,
    )
    return result


def test_panel_lists_app_live_and_stops_it(
    installed_prefix: Path, tmp_path: Path, browser: Any, request: pytest.FixtureRequest
) -> None:
    shots = tmp_path / "screenshots"
    shots.mkdir()
    console: list[str] = []
    with run_lab(
        tmp_path / "lab", installed_prefix / "share" / "jupyter", {"panel.ipynb": [START_CELL, CHECK_CELL]}
    ) as lab:
        page = browser.new_page(viewport={"width": 1500, "height": 1000})
        page.on("console", lambda m: console.append(f"[{m.type}] {m.text}"))
        page.on("pageerror", lambda e: console.append(f"[pageerror] {e}"))
        try:
            page.goto(lab.tree_url("panel.ipynb"))
            page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
            # the panel's tab is in the left side bar
            page.locator('.jp-SideBar .lm-TabBar-tab[data-id="kstream-nb-panel"]').click()
            page.wait_for_selector("#kstream-nb-panel", state="visible", timeout=10_000)
            _poll(
                lambda: "Idle" in page.locator(".jp-StatusBar-Widget").all_inner_texts().__str__(),
                60,
                "the kernel to be idle",
            )
            _run_cell(page, 0)
            _poll(lambda: "STARTED" in _output(page, 0), 60, "the start cell")

            first = _poll(
                lambda: (r := _row(page)) and r["state"] == "RUNNING" and r["processed"] > 0 and r,
                30,
                "the app in the panel",
            )
            later = _poll(
                lambda: (r := _row(page)) and r["processed"] > first["processed"] and r,
                15,
                "a rising record count",
            )
            assert later["tasks"] == "2"
            page.screenshot(path=str(shots / "panel-running.png"))

            # topology + assignment in the main area
            page.locator(f'#kstream-nb-panel tr.kstream-app-row[data-name="{APP}"] .kstream-app-label').click()
            page.wait_for_selector(".kstream-app-view svg.kstream-topology", timeout=15_000)
            page.wait_for_selector(".kstream-app-view .kstream-assignment-table tbody tr", timeout=15_000)
            assert page.locator(".kstream-app-view .kstream-assignment-table tbody tr").count() == 2
            assert page.locator(".kstream-app-view .kstream-node-store").count() == 1
            page.screenshot(path=str(shots / "app-view.png"))

            # topic browser: the input topic's recent records
            link = page.locator('#kstream-nb-panel tr[data-topic="clicks"] .kstream-topic-link')
            link.wait_for(timeout=15_000)
            link.click()
            page.wait_for_selector(".kstream-topic-view .kstream-records tbody tr", timeout=15_000)
            assert page.locator(".kstream-topic-view .kstream-records tbody tr").count() >= 10
            # ... and its profile: a row per partition, the formats, the 5 keys the feed writes, the columns
            assert page.locator(".kstream-topic-view .kstream-profile-partitions tbody tr").count() == 2
            formats = page.locator(".kstream-topic-view .kstream-profile-formats").inner_text()
            assert formats.startswith("Key formats: string ") and "Value formats: json " in formats
            keys = page.locator(".kstream-topic-view .kstream-profile-keys").inner_text()
            assert keys.startswith("5 distinct keys in the sample of "), keys
            columns = page.locator(".kstream-topic-view .kstream-profile-columns tbody tr").all_inner_texts()
            assert [c.split() for c in columns] == [["n", "int64", "0", "0.0%"]]
            page.screenshot(path=str(shots / "topic-view.png"))

            # stop from the panel
            page.locator(f'#kstream-nb-panel tr.kstream-app-row[data-name="{APP}"] button.kstream-stop').click()
            _poll(lambda: (r := _row(page)) and r["state"] == "NOT_RUNNING", 30, "NOT_RUNNING in the panel")
            page.screenshot(path=str(shots / "panel-stopped.png"))

            # ... and in the kernel
            _run_cell(page, 1)
            out = _poll(lambda: "KERNEL-STATE" in (o := _output(page, 1)) and o, 30, "the check cell")
            assert "KERNEL-STATE NOT_RUNNING" in out, out
            assert f"'{APP}'" not in out, out
            errors = [
                c for c in console if c.startswith("[pageerror]") or ("kstream" in c.lower() and "[error]" in c)
            ]
            assert not errors, errors
        except BaseException:
            page.screenshot(path=str(shots / "failure.png"))
            for i in range(2):
                print(f"cell {i} output:\n{_output(page, i)[-3000:]}")
            print("browser console:\n" + "\n".join(console[-50:]))
            print("lab log:\n" + lab.log.read_text()[-4000:])
            raise
        finally:
            print(f"screenshots in {shots}")
            page.close()


def _load_seconds(browser: Any, url: str, with_panel: bool) -> float:
    context = browser.new_context(viewport={"width": 1400, "height": 900})  # cold cache each time
    page = context.new_page()
    try:
        t0 = time.monotonic()
        page.goto(url)
        page.wait_for_selector(".jp-Notebook .jp-Cell .jp-InputArea-editor", timeout=120_000)
        elapsed = time.monotonic() - t0
        has_panel = page.locator('.jp-SideBar .lm-TabBar-tab[data-id="kstream-nb-panel"]').count() > 0
        assert has_panel == with_panel
        return elapsed
    finally:
        context.close()


def test_page_load_with_and_without_the_extension(installed_prefix: Path, tmp_path: Path, browser: Any) -> None:
    """Same run, same machine: JupyterLab opening a notebook with and without kstream-nb (cold cache)."""
    rounds = 3
    times: dict[str, list[float]] = {"with": [], "without": []}
    nb = {"load.ipynb": ["1 + 1"]}
    with (
        run_lab(tmp_path / "with", installed_prefix / "share" / "jupyter", nb) as with_ext,
        run_lab(tmp_path / "without", None, nb) as without_ext,
    ):
        _load_seconds(browser, with_ext.tree_url("load.ipynb"), True)  # warm both servers once
        _load_seconds(browser, without_ext.tree_url("load.ipynb"), False)
        for _ in range(rounds):
            times["with"].append(_load_seconds(browser, with_ext.tree_url("load.ipynb"), True))
            times["without"].append(_load_seconds(browser, without_ext.tree_url("load.ipynb"), False))
    summary = {
        k: {"median_s": round(statistics.median(v), 3), "runs_s": [round(x, 3) for x in v]}
        for k, v in times.items()
    }
    print("page load (goto -> first notebook cell editor):", json.dumps(summary))
    # the extension is ~45 KB of JS: it must not make the page noticeably slower
    # (generous bound: 2 shared cores, other tests may run at the same time)
    assert summary["with"]["median_s"] < summary["without"]["median_s"] * 2 + 2.0, summary
