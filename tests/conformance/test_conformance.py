"""One test per Kafka Streams conformance case found in ``KSNB_CONFORMANCE_DIRS`` and tests/conformance/cases."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.conformance.harness import run_case

HERE = Path(__file__).parent
DEFAULT_DIRS = [HERE.parents[1].parent / "shared" / "conformance", HERE / "cases"]


def case_dirs() -> list[Path]:
    env = os.environ.get("KSNB_CONFORMANCE_DIRS")
    dirs = [Path(d) for d in env.split(os.pathsep) if d] if env else DEFAULT_DIRS
    return [d for d in dirs if d.is_dir()]


def load_cases() -> list[dict]:
    cases: dict[str, dict] = {}
    for directory in case_dirs():
        for path in sorted(directory.glob("*.json")):
            for case in json.loads(path.read_text()):
                cases.setdefault(case["id"], case)
    return list(cases.values())


CASES = load_cases()


def test_cases_were_found():
    assert CASES, f"no conformance cases found in {case_dirs() or DEFAULT_DIRS}"


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_conformance(case: dict) -> None:
    run_case(case)


WINDOWED_CASES = [c for c in CASES if any(n["op"] == "windowedBy" or "windows" in n for n in c["topology"])]


@pytest.mark.parametrize("case", WINDOWED_CASES, ids=[c["id"] for c in WINDOWED_CASES])
def test_windowed_conformance_on_rocksdb(case: dict) -> None:
    """Windowed aggregations and stream-stream joins give Kafka's results on RocksDB window stores too."""
    run_case(case, {"default_dsl_store": "rocksdb"})
