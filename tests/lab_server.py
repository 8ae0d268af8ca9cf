"""A JupyterLab server on loopback for the browser tests (widgets, extension), and headless Debian Chromium.

Everything the server writes lives in a temp dir (root dir, kernelspec running this Python, config,
runtime, IPython, settings: the project's shipped ones, ``jupyter-settings/``, with the news toast off, and
the update check off). The kstream-nb extension, when wanted, comes
from the wheel installed under a prefix (``JUPYTER_PATH``), exactly as ``pip install`` lays it out;
without that prefix the same server runs without the extension. The server is stopped whatever the test
does: ``POST /api/shutdown`` (which also shuts its kernels down), then SIGTERM/SIGKILL of its process
group, then SIGKILL of any kernel still running from its private runtime dir. Chromium is Debian's
``/usr/bin/chromium`` (``bash scripts/install_test_tools.sh``); Playwright never downloads one.
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
KERNEL_NAME = "kstream-ext-test"
#: the settings the wheel ships into <prefix>/share/jupyter/lab/settings/overrides.d/
SHIPPED_SETTINGS = Path(__file__).resolve().parents[1] / "jupyter-settings" / "kstream-nb.json"
OVERRIDES = {"@jupyterlab/apputils-extension:notification": {"checkForUpdates": False}}


@dataclass
class Lab:
    url: str
    token: str
    root: Path
    log: Path

    def tree_url(self, notebook: str) -> str:
        return f"{self.url}/lab/tree/{notebook}?token={self.token}"

    def api(self, path: str, method: str = "GET", timeout: float = 5.0) -> Any:
        request = urllib.request.Request(
            f"{self.url}{path}", method=method, headers={"Authorization": f"token {self.token}"}
        )
        with urllib.request.urlopen(request, timeout=timeout) as response:
            body = response.read()
        return json.loads(body) if body else None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def write_notebook(path: Path, cells: list[str], kernel_name: str = KERNEL_NAME) -> None:
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(src) for src in cells]
    nb.metadata["kernelspec"] = {
        "name": kernel_name,
        "display_name": "kstream_nb (extension test)",
        "language": "python",
    }
    nbformat.write(nb, str(path))


@contextlib.contextmanager
def run_lab(
    base: Path,
    share_jupyter: Path | None,
    notebooks: dict[str, list[str]],
    *,
    kernel_name: str = KERNEL_NAME,
    log: Path | None = None,
    app_settings_dir: Path | None = None,
) -> Iterator[Lab]:
    """A JupyterLab on 127.0.0.1 with ``notebooks`` in its root; the extension iff ``share_jupyter``.

    ``kernel_name`` is the kernelspec (running this Python) the notebooks name; the server logs to ``log``;
    ``app_settings_dir``: where the lab reads its default settings (e.g. an installed prefix's), else a
    temp dir with the shipped settings and the update check off.
    """
    dirs = {d: base / d for d in ("root", "data", "config", "runtime", "settings", "user", "ws", "ipython")}
    for d in dirs.values():
        d.mkdir(parents=True, exist_ok=True)
    for name, cells in notebooks.items():
        write_notebook(dirs["root"] / name, cells, kernel_name)
    kernel_dir = dirs["data"] / "kernels" / kernel_name
    kernel_dir.mkdir(parents=True, exist_ok=True)
    (kernel_dir / "kernel.json").write_text(
        json.dumps(
            {
                "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": "kstream_nb (extension test)",
                "language": "python",
            }
        )
    )
    if app_settings_dir is None:
        app_settings_dir = dirs["settings"]
        (app_settings_dir / "overrides.d").mkdir(exist_ok=True)
        (app_settings_dir / "overrides.d" / SHIPPED_SETTINGS.name).write_bytes(SHIPPED_SETTINGS.read_bytes())
        (app_settings_dir / "overrides.json").write_text(json.dumps(OVERRIDES))
    env = {
        **os.environ,
        "JUPYTER_DATA_DIR": str(dirs["data"]),
        "JUPYTER_CONFIG_DIR": str(dirs["config"]),
        "JUPYTER_RUNTIME_DIR": str(dirs["runtime"]),
        "IPYTHONDIR": str(dirs["ipython"]),
        "JUPYTER_PLATFORM_DIRS": "0",
        "PYTHONUNBUFFERED": "1",
    }
    env.pop("JUPYTER_PATH", None)
    if share_jupyter is not None:
        env["JUPYTER_PATH"] = str(share_jupyter)
    port, token = free_port(), secrets.token_hex(16)
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
        f"--ServerApp.root_dir={dirs['root']}",
        f"--LabApp.app_settings_dir={app_settings_dir}",
        f"--LabApp.user_settings_dir={dirs['user']}",
        f"--LabApp.workspaces_dir={dirs['ws']}",
    ]
    log = log or base / "jupyterlab.log"
    with log.open("w") as log_file:
        proc = subprocess.Popen(
            command, cwd=dirs["root"], env=env, stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True
        )
        lab = Lab(f"http://127.0.0.1:{port}", token, dirs["root"], log)
        try:
            deadline = time.monotonic() + 60
            while True:
                if proc.poll() is not None:
                    raise RuntimeError(f"jupyter lab exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
                try:
                    lab.api("/api/status", timeout=2)
                    break
                except (urllib.error.URLError, OSError):
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"jupyter lab did not answer within 60 s: see {log}") from None
                    time.sleep(0.2)
            yield lab
        finally:
            _stop(proc, lab, str(dirs["runtime"]))


def _stop(proc: subprocess.Popen[bytes], lab: Lab, runtime_dir: str) -> None:
    if proc.poll() is None:
        with contextlib.suppress(urllib.error.URLError, OSError):
            lab.api("/api/shutdown", method="POST", timeout=5)
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
    # kernels run in sessions of their own: kill any left over from this server (its private runtime dir)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if runtime_dir in cmdline:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(entry.name), signal.SIGKILL)
