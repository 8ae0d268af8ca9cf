"""Checks the Java reference runner (tests/reference/java, Kafka Streams 4.4) on the transcribed conformance cases.

Every case of ``tests/conformance/cases/*.json`` and ``/work/shared/conformance/*.json`` goes to one JVM (with
``--trace``, which adds per-step output counts and store contents and the inputs that were dropped); each case's
``expect`` is then checked on the Java results with ``tests.conformance.harness.check`` — the same check-and-clear
semantics the Python conformance suite uses — plus ``expect_metrics`` and ``expect_dropped_inputs``.

    python -m tests.reference.java_check [--jar PATH] [--show-passing]

Build the jar first: ``mvn -q -f tests/reference/java/pom.xml -DskipTests package``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import kstream_nb as ks
from kstream_nb.processor.windows import Windowed
from tests.conformance.harness import check

HERE = Path(__file__).parent
ROOT = HERE.parent.parent
JAR = HERE / "java" / "target" / "reference-runner.jar"
VOCABULARY = HERE / "vocabulary.json"
CASE_DIRS = [ROOT / "tests" / "conformance" / "cases", Path("/work/shared/conformance")]
JVM_OPTIONS = ["-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xss4m"]  # C1 only: many short cases


def load_cases() -> list[tuple[str, dict[str, Any]]]:
    """(file, case) for every case of every ``*.json`` file of the case folders."""
    cases = []
    for folder in CASE_DIRS:
        for path in sorted(folder.glob("*.json")):
            for case in json.loads(path.read_text()):
                cases.append((str(path), case))
    return cases


def run_java(cases: list[dict[str, Any]], jar: Path) -> tuple[list[dict[str, Any]], float]:
    """One JVM for all cases; results in case order, and the wall time of the run."""
    lines = "".join(json.dumps(c) + "\n" for c in cases)
    cmd = ["java", *JVM_OPTIONS, "-jar", str(jar), "--vocabulary", str(VOCABULARY), "--trace"]
    start = time.monotonic()
    proc = subprocess.run(cmd, input=lines.encode(), capture_output=True, check=False)
    elapsed = time.monotonic() - start
    results = [json.loads(line) for line in proc.stdout.decode().splitlines() if line.strip()]
    if proc.returncode != 0 or len(results) != len(cases):
        sys.exit(
            f"the Java runner failed (exit {proc.returncode}, {len(results)} results for {len(cases)} cases):\n"
            + proc.stderr.decode(errors="replace")[-3000:]
        )
    return results, elapsed


def _record(r: dict[str, Any]) -> ks.Record:
    key = r["key"]
    if "window_start_ms" in r:
        key = Windowed(key, r["window_start_ms"], r["window_end_ms"])
    return ks.Record(key, r["value"], r["timestamp_ms"])


class JavaRun:
    """What ``harness.check`` reads of a run (``captured``, ``stores``, ``table_entry``), from a Java result."""

    def __init__(self, case: dict[str, Any]) -> None:
        self.captured: dict[str, list[ks.Record]] = defaultdict(list)
        self.stores: dict[str, str] = {
            n["id"]: n["store"]["name"] for n in case["topology"] if (n.get("store") or {}).get("name")
        }
        self.store_rows: dict[str, list[dict[str, Any]]] = {}

    def table_entry(self, store: str, key: Any) -> Any:
        for row in self.store_rows.get(store, []):
            if row["key"] == key and "window_start_ms" not in row:
                return SimpleNamespace(value=row["value"], timestamp=row["timestamp_ms"])
        return None


def check_case(case: dict[str, Any], result: dict[str, Any]) -> None:
    """Raises AssertionError when the Java result breaks one of the case's expectations."""
    assert result.get("error") is None, f"runner error: {result['error']}"
    run = JavaRun(case)
    outputs = result["outputs"]
    trace = result["trace"]
    fed: dict[str, int] = defaultdict(int)
    history: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for i, step in enumerate(case["steps"]):
        point = trace["steps"][i]
        for node, count in point["output_counts"].items():
            run.captured[node].extend(_record(r) for r in outputs[node][fed[node] : count])
            fed[node] = count
        run.store_rows = point["stores"]
        for node, expectation in step.get("expect", {}).items():
            check(run, node, expectation, history)
    metrics = case.get("expect_metrics") or {}
    if "dropped_records_total" in metrics:
        got = result["dropped_records_total"]
        assert got == metrics["dropped_records_total"], f"dropped_records_total {got}, expected {metrics}"
    if "expect_dropped_inputs" in case:
        got = trace["dropped_inputs"]
        assert got == case["expect_dropped_inputs"], (
            f"dropped inputs {got}, expected {case['expect_dropped_inputs']}"
        )


@dataclass
class Report:
    unsupported: list[tuple[str, str, str]] = field(default_factory=list)  # (file, id, reason)
    passed: list[tuple[str, str]] = field(default_factory=list)
    failed: list[tuple[str, str, str]] = field(default_factory=list)  # (file, id, why)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jar", type=Path, default=JAR)
    parser.add_argument("--show-passing", action="store_true")
    args = parser.parse_args(argv)
    if not args.jar.is_file():
        sys.exit(f"{args.jar} is missing: mvn -q -f tests/reference/java/pom.xml -DskipTests package")
    cases = load_cases()
    results, elapsed = run_java([c for _, c in cases], args.jar)
    report = Report()
    for (path, case), result in zip(cases, results, strict=True):
        assert result.get("id") == case["id"], (result.get("id"), case["id"])
        if "unsupported" in result:
            report.unsupported.append((path, case["id"], result["unsupported"]))
            continue
        try:
            check_case(case, result)
            report.passed.append((path, case["id"]))
        except AssertionError as e:
            report.failed.append((path, case["id"], str(e)))
    supported = len(report.passed) + len(report.failed)
    print(f"{len(cases)} transcribed cases, one JVM: {elapsed:.1f} s")
    print(f"supported: {supported}, pass: {len(report.passed)}, fail: {len(report.failed)}, "
          f"unsupported: {len(report.unsupported)}")  # fmt: skip
    for path, cid, reason in report.unsupported:
        print(f"  unsupported {cid} ({Path(path).name}): {reason}")
    for path, cid, why in report.failed:
        print(f"  FAIL {cid} ({Path(path).name}): {why}")
    if args.show_passing:
        for path, cid in report.passed:
            print(f"  pass {cid} ({Path(path).name})")
    return 1 if report.failed else 0


if __name__ == "__main__":
    sys.exit(main())
