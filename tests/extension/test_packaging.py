"""The wheel ships the prebuilt JupyterLab extension; JupyterLab finds it enabled; a fresh build matches."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BUILT = ROOT / "kstream_nb" / "labextension"
SHARE = "share/jupyter/labextensions/kstream-nb"


def committed_files() -> list[str]:
    return sorted(str(p.relative_to(BUILT)) for p in BUILT.rglob("*") if p.is_file())


def test_committed_build_is_complete() -> None:
    meta = json.loads((BUILT / "package.json").read_text())
    assert meta["name"] == "kstream-nb"
    load = meta["jupyterlab"]["_build"]["load"]
    assert (BUILT / load).is_file(), f"{load} named in package.json is missing"
    source = json.loads((ROOT / "extension" / "package.json").read_text())
    assert meta["version"] == source["version"]
    # JupyterLab 4.0+ (Binder's base image has 4.4): no ranges that need a newer core
    for name, spec in source["dependencies"].items():
        if name.startswith("@jupyterlab/") and name != "@jupyterlab/services":
            assert spec == "^4.0.0", (name, spec)


def test_wheel_ships_the_extension_as_data_files(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    shipped = sorted(n.split(f"{SHARE}/", 1)[1] for n in names if f".data/data/{SHARE}/" in n)
    assert shipped == sorted([*committed_files(), "install.json"])
    assert not [n for n in names if n.startswith("kstream_nb/labextension/")], "shipped twice"


def test_pip_install_puts_it_where_jupyterlab_looks(installed_prefix: Path) -> None:
    target = installed_prefix / SHARE
    assert (target / "package.json").is_file() and (target / "install.json").is_file()
    for rel in committed_files():
        assert (target / rel).read_bytes() == (BUILT / rel).read_bytes(), rel


def test_jupyter_labextension_list_shows_it_enabled(jupyter_env: dict[str, str]) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "jupyter", "labextension", "list"],
        env={**jupyter_env, "NO_COLOR": "1"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    text = re.sub(r"\x1b\[[0-9;]*m", "", result.stdout + result.stderr)
    line = next((ln for ln in text.splitlines() if "kstream-nb" in ln), None)
    assert line is not None, text
    assert "v0.1.0" in line and "enabled" in line and "OK" in line, line
    assert "(python, kstream_nb)" in line, line


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_fresh_npm_build_matches_the_committed_output() -> None:
    if shutil.which("npm") is None:
        pytest.fail("npm is missing: the extension is built from scratch in CI (Debian: apt-get install -y npm)")
    result = subprocess.run(
        ["bash", str(ROOT / "scripts" / "build_extension.sh"), "--check"],
        capture_output=True,
        text=True,
        timeout=580,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "fresh build matches" in result.stdout
    assert "Tests  24 passed" in result.stdout or " passed" in result.stdout  # vitest ran
