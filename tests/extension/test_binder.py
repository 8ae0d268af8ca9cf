"""Binder: a fresh venv built from binder/ the way repo2docker builds it, then every notebook under nbval.

repo2docker cannot run here (no Docker engine), so this does what its Python build pack does: a venv of
the Python that runtime.txt names, `pip install -r binder/requirements.txt` from the repository root.
Then nbval (not part of the image: installed after) runs every notebook in that venv's kernel, and
`jupyter labextension list` there must show the prebuilt extension enabled.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BINDER = ROOT / "binder"
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def test_binder_files_are_what_repo2docker_reads() -> None:
    runtime = (BINDER / "runtime.txt").read_text().strip()
    assert re.fullmatch(r"python-3\.\d+", runtime), runtime
    requirements = [
        ln.strip()
        for ln in (BINDER / "requirements.txt").read_text().splitlines()
        if ln.strip() and not ln.startswith("#")
    ]
    # the project itself, not editable (an editable install skips the prebuilt JupyterLab extension)
    assert any(r.startswith(".[") or r == "." for r in requirements), requirements
    assert not any(r.startswith("-e") for r in requirements), requirements
    apt = (BINDER / "apt.txt").read_text().split()
    spark_notebooks = [p for p in NOTEBOOKS if "spark" in p.read_text().lower()]
    assert ("openjdk-17-jre-headless" in apt) == bool(spark_notebooks)
    for name in ("postBuild", "start", "environment.yml"):
        assert not (BINDER / name).exists(), f"binder/{name} is not needed; see binder/requirements.txt"


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_fresh_binder_venv_runs_every_notebook(tmp_path: Path) -> None:
    runtime = (BINDER / "runtime.txt").read_text().strip().removeprefix("python-")
    python = shutil.which(f"python{runtime}") or sys.executable
    version = subprocess.run(
        [python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    if version != runtime:
        pytest.fail(f"Binder uses python{runtime} (binder/runtime.txt) but this machine has {version}")
    venv = tmp_path / "venv"
    subprocess.run([python, "-m", "venv", str(venv)], check=True, timeout=120)
    vpy = str(venv / "bin" / "python")
    pip = [vpy, "-m", "pip", "install", "--disable-pip-version-check", "-q"]
    try:
        # what repo2docker runs (from the repository root)
        subprocess.run([*pip, "-r", str(BINDER / "requirements.txt")], cwd=ROOT, check=True, timeout=900)
    finally:
        shutil.rmtree(ROOT / "build", ignore_errors=True)  # setuptools' scratch dir from building "."
    listed = subprocess.run(
        [vpy, "-m", "jupyter", "labextension", "list"], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    text = re.sub(r"\x1b\[[0-9;]*m", "", listed.stdout + listed.stderr)
    assert re.search(r"kstream-nb v\S+ enabled\s+OK", text), text

    subprocess.run([*pip, "pytest>=8", "pytest-timeout>=2.3", "nbval>=0.11"], check=True, timeout=300)
    result = subprocess.run(
        [
            vpy,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--nbval-lax",
            "--nbval-current-env",
            f"--rootdir={ROOT}",
            *[str(p) for p in NOTEBOOKS],
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    tail = (result.stdout + result.stderr)[-6000:]
    assert result.returncode == 0, tail
    assert re.search(r"\d+ passed", tail), tail
