"""The settings the project ships to JupyterLab (``jupyter-settings/``): no "Would you like to get notified
about official Jupyter news?" toast in a fresh lab (Binder, ``scripts/demo.sh --lab``, a pip install)."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import jupyterlab

from tests.lab_server import SHIPPED_SETTINGS, run_lab

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = "@jupyterlab/apputils-extension:notification"
TARGET = "share/jupyter/lab/settings/overrides.d/kstream-nb.json"


def test_shipped_settings_turn_the_news_toast_off_in_jupyterlabs_schema() -> None:
    shipped = json.loads(SHIPPED_SETTINGS.read_text())
    assert shipped == {PLUGIN: {"fetchNews": "false"}}
    # JupyterLab's own schema of the setting: "false" is "Never"; the default, "none", asks with the toast
    schema_path = Path(jupyterlab.__file__).parent / "schemas" / "@jupyterlab" / "apputils-extension"
    prop = json.loads((schema_path / "notification.json").read_text())["properties"]["fetchNews"]
    assert {c["const"]: c["title"] for c in prop["oneOf"]}["false"] == "Never"
    assert prop["default"] == "none"


def test_wheel_and_demo_put_them_where_jupyterlab_reads_default_settings(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    assert [n for n in names if n.endswith(f".data/data/{TARGET}")], "the wheel does not ship the settings"
    demo = (ROOT / "scripts" / "demo.sh").read_text()  # the editable install links them instead
    assert f'"$ROOT/jupyter-settings/kstream-nb.json" "$VENV/{TARGET}"' in demo


def test_a_lab_on_the_installed_prefix_reads_them(installed_prefix: Path, tmp_path: Path) -> None:
    share = installed_prefix / "share" / "jupyter"
    # the app settings dir of a lab in that prefix (JupyterLab's default: <prefix>/share/jupyter/lab/settings)
    with run_lab(tmp_path, share, {}, app_settings_dir=share / "lab" / "settings") as lab:
        answer = lab.api(f"/lab/api/settings/{PLUGIN}")
    # the lab serves the setting's schema with the shipped value as its default (what the page starts with)
    assert answer["schema"]["properties"]["fetchNews"]["default"] == "false"
    assert answer["settings"] == {}  # no user setting: a user's own choice still wins
