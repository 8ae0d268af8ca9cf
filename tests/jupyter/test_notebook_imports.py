"""The labs use the public ``ks.`` names, not the modules behind them (issue 24: notebooks imported
``from kstream_nb.processor.windows import ...``)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import kstream_nb as ks

NOTEBOOKS = sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("*.ipynb"))
#: the layers under the public surface (DESIGN.md): a user reaches their names through ``ks.``
INTERNAL = re.compile(r"^\s*(?:from|import)\s+kstream_nb\.(processor|dsl|runtime|topology|state)\b", re.M)


def test_no_lab_imports_an_internal_module() -> None:
    assert NOTEBOOKS
    found = []
    for path in NOTEBOOKS:
        for cell in json.loads(path.read_text())["cells"]:
            source = "".join(cell["source"])
            if cell["cell_type"] == "code":
                found += [f"{path.name}: {m.group(0).strip()}" for m in INTERNAL.finditer(source)]
    assert found == []


def test_the_names_the_labs_use_are_public() -> None:
    for name in ("TimeWindows", "SessionWindows", "SlidingWindows", "JoinWindows", "until_window_closes"):
        assert name in ks.__all__ and getattr(ks, name) is not None
