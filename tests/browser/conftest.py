"""Fixtures for the browser test: a JupyterLab server on loopback and headless Debian Chromium via Playwright.

The server (``tests/lab_server.py``) keeps everything it writes in a temp dir and is always stopped;
Chromium is Debian's ``/usr/bin/chromium`` (``bash scripts/install_test_tools.sh``); Playwright never
downloads one. The server log, screenshots and the browser console go to ``artifacts/``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.lab_server import CHROMIUM, CHROMIUM_ARGS, Lab, run_lab

from .notebook import KERNEL_NAME, write_notebook

ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
NOTEBOOK = "live_widgets.ipynb"


@pytest.fixture(scope="module")
def artifacts() -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    for old in ARTIFACTS.glob("*"):
        if old.is_file():
            old.unlink()
    return ARTIFACTS


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory, artifacts: Path) -> Iterator[Lab]:
    import ipykernel  # noqa: F401  (dev extra; a missing one must fail, not skip)
    import jupyterlab  # noqa: F401

    base = tmp_path_factory.mktemp("lab")
    with run_lab(base, None, {}, kernel_name=KERNEL_NAME, log=artifacts / "jupyterlab.log") as server:
        write_notebook(server.root / NOTEBOOK)
        yield server


@pytest.fixture(scope="module")
def browser_context(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    import playwright.sync_api as sync_api

    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"{CHROMIUM} is missing: run `bash scripts/install_test_tools.sh` (installs chromium)")
    profile = tmp_path_factory.mktemp("chromium-profile")
    playwright = sync_api.sync_playwright().start()
    try:
        context = playwright.chromium.launch_persistent_context(
            str(profile),
            executable_path=CHROMIUM,
            headless=True,
            args=CHROMIUM_ARGS,
            viewport={"width": 1400, "height": 1600},
        )
        try:
            yield context
        finally:
            context.close()
    finally:
        playwright.stop()


@pytest.fixture
def page(browser_context: Any, artifacts: Path) -> Iterator[Any]:
    page = browser_context.new_page()
    console: list[str] = []
    page.on("console", lambda m: console.append(f"[{m.type}] {m.text}"))
    page.on("pageerror", lambda e: console.append(f"[pageerror] {e}"))
    try:
        yield page
    finally:
        (artifacts / "browser-console.log").write_text("\n".join(console) + "\n")
        page.close()
