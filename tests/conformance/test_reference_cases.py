"""Regression cases found by the reference diff (tests/reference/SPEC.md): each file holds a minimal case and what
Kafka Streams 4.4's TopologyTestDriver produced for it; kstream_nb must produce the same.

A file is a minimal-case file as ``python -m tests.reference.diff`` writes it (``case``, ``kafka_streams``, ...);
``tests/reference/test_reference_diff.py`` checks the recorded results against the Java runner again.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.reference import python_runner
from tests.reference.diff import differences

CASES_DIR = Path(__file__).parent / "reference_cases"


def load() -> list[dict[str, Any]]:
    return [json.loads(path.read_text()) for path in sorted(CASES_DIR.glob("*.json"))]


CASES = load()


def test_regression_cases_were_found() -> None:
    assert CASES, f"no reference regression cases in {CASES_DIR}"


@pytest.mark.parametrize("entry", CASES, ids=[e["case"]["id"] for e in CASES])
def test_kstream_nb_matches_kafka_streams(entry: dict[str, Any]) -> None:
    got = python_runner.run(entry["case"])
    assert differences(entry["kafka_streams"], got) == [], entry.get("note", "")
