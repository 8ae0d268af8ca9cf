"""Fixtures for the browser test: a JupyterLab server on loopback and headless Debian Chromium via Playwright.

JupyterLab runs from this environment's Python with everything it writes in a temp dir: the notebook
(root dir), a kernelspec that runs this Python (``JUPYTER_DATA_DIR``), config, runtime, IPython, user
settings and workspaces, and ``overrides.json`` that turns off the news and update-check toasts. Chromium
is Debian's ``/usr/bin/chromium`` (``bash scripts/install_browser.sh``); Playwright never downloads one.
Both are stopped by the fixtures whatever the test does: the server through ``POST /api/shutdown`` (which
also shuts its kernels down), then SIGTERM/SIGKILL of its process group, then SIGKILL of any kernel
process still running from this server's runtime dir.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from .notebook import KERNEL_NAME, write_notebook

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
NOTEBOOK = "live_widgets.ipynb"
LAB_SETTINGS_OVERRIDES = {
    "@jupyterlab/apputils-extension:notification": {"checkForUpdates": False, "fetchNews": "false"},
}


@dataclass
class Lab:
    url: str
    token: str
    root: Path
    notebook: str
    log: Path

    def notebook_url(self) -> str:
        return f"{self.url}/lab/tree/{self.notebook}?token={self.token}"

    def api(self, path: str, method: str = "GET", timeout: float = 5.0) -> Any:
        request = urllib.request.Request(
            f"{self.url}{path}", method=method, headers={"Authorization": f"token {self.token}"}
        )
        with urllib.request.urlopen(request, timeout=timeout) as response:
            body = response.read()
        return json.loads(body) if body else None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _pids_using(marker: str) -> list[int]:
    """Processes whose command line mentions ``marker`` (this server's private runtime dir)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker in cmdline:
            pids.append(int(entry.name))
    return pids


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
    root, data, config, runtime, settings, user_settings, workspaces, ipython = (
        base / d
        for d in ("root", "data", "config", "runtime", "settings", "user-settings", "workspaces", "ipython")
    )
    for d in (root, data, config, runtime, settings, user_settings, workspaces, ipython):
        d.mkdir()
    write_notebook(root / NOTEBOOK)
    kernel_dir = data / "kernels" / KERNEL_NAME
    kernel_dir.mkdir(parents=True)
    (kernel_dir / "kernel.json").write_text(
        json.dumps(
            {
                "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": "kstream_nb (browser test)",
                "language": "python",
            }
        )
    )
    (settings / "overrides.json").write_text(json.dumps(LAB_SETTINGS_OVERRIDES))
    env = {
        **os.environ,
        "JUPYTER_DATA_DIR": str(data),
        "JUPYTER_CONFIG_DIR": str(config),
        "JUPYTER_RUNTIME_DIR": str(runtime),
        "IPYTHONDIR": str(ipython),
        "JUPYTER_PLATFORM_DIRS": "0",
        "PYTHONUNBUFFERED": "1",
    }
    port, token = _free_port(), secrets.token_hex(16)
    command = [
        sys.executable,
        "-m",
        "jupyterlab",
        "--no-browser",
        "--allow-root",
        "--ip=127.0.0.1",
        f"--port={port}",
        "--port-retries=0",
        f"--ServerApp.token={token}",
        f"--ServerApp.root_dir={root}",
        f"--LabApp.app_settings_dir={settings}",
        f"--LabApp.user_settings_dir={user_settings}",
        f"--LabApp.workspaces_dir={workspaces}",
    ]
    log = artifacts / "jupyterlab.log"
    log_file = log.open("w")
    proc = subprocess.Popen(
        command, cwd=root, env=env, stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True
    )
    server = Lab(f"http://127.0.0.1:{port}", token, root, NOTEBOOK, log)
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                raise RuntimeError(
                    f"jupyter lab exited with {proc.returncode}: see {log}\n{log.read_text()[-3000:]}"
                )
            try:
                server.api("/api/status", timeout=2)
                break
            except (urllib.error.URLError, OSError):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"jupyter lab did not answer within 60 s: see {log}") from None
                time.sleep(0.2)
        yield server
    finally:
        _stop_lab(proc, server, str(runtime))
        log_file.close()


def _stop_lab(proc: subprocess.Popen[bytes], server: Lab, runtime_dir: str) -> None:
    if proc.poll() is None:
        with contextlib.suppress(urllib.error.URLError, OSError):
            server.api("/api/shutdown", method="POST", timeout=5)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(20)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if proc.poll() is not None:
            break
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(10)
    # kernels run in sessions of their own: kill any left over from this server (their connection file
    # lies in our private runtime dir)
    for pid in _pids_using(runtime_dir):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


@pytest.fixture(scope="module")
def browser_context(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    import playwright.sync_api as sync_api

    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"{CHROMIUM} is missing: run `bash scripts/install_browser.sh` (installs Debian's chromium)")
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
