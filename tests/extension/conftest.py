"""Fixtures for the JupyterLab extension tests: the wheel, built once, and a prefix it is installed into."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PIP = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """kstream_nb's wheel, built from this checkout (with build isolation: a current setuptools)."""
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([*PIP, "wheel", "--no-deps", "-w", str(out), str(ROOT)], check=True, timeout=300)
    subprocess.run(["rm", "-rf", str(ROOT / "build")], check=False)  # setuptools' scratch dir
    (path,) = out.glob("kstream_nb-*.whl")
    assert zipfile.is_zipfile(path)
    return path


@pytest.fixture(scope="session")
def installed_prefix(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel pip-installed (no deps) under a fresh prefix: its share/jupyter is what a venv would get."""
    prefix = tmp_path_factory.mktemp("prefix")
    # --ignore-installed: never uninstall the kstream_nb of the running environment (pip would, for --prefix)
    subprocess.run(
        [*PIP, "install", "--no-deps", "--ignore-installed", "--prefix", str(prefix), str(wheel)],
        check=True,
        timeout=300,
    )
    return prefix


@pytest.fixture
def jupyter_env(installed_prefix: Path, tmp_path: Path) -> Iterator[dict[str, str]]:
    """Environment for jupyter commands that see the installed extension and nothing of the user's config."""
    env = dict(os.environ)
    env["JUPYTER_PATH"] = str(installed_prefix / "share" / "jupyter")
    env["JUPYTER_CONFIG_DIR"] = str(tmp_path / "config")
    env["JUPYTER_RUNTIME_DIR"] = str(tmp_path / "runtime")
    env["JUPYTERLAB_SETTINGS_DIR"] = str(tmp_path / "settings")
    env["JUPYTERLAB_WORKSPACES_DIR"] = str(tmp_path / "workspaces")
    env.pop("JUPYTER_DATA_DIR", None)
    yield env
