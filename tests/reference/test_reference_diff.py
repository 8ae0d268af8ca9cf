"""kstream_nb against Kafka Streams 4.4 on the same cases (tests/reference/SPEC.md).

The Java reference runner is built by the session (Maven, when its jar is missing or stale) and never skipped:
a failing build fails these tests with Maven's output.
"""

from __future__ import annotations

import copy
import itertools
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.reference import diff, java_check
from tests.reference.build import BuildError, ensure_jar
from tests.reference.generate import generate
from tests.reference.schema import analyse, validate

#: the generated cases of test_generated_cases_agree: seeds and how many cases each
SEEDS = {101: 250, 202: 250}
#: shrinking inside the test: at most this many differing cases, for at most this many seconds
MAX_SHRINK, SHRINK_BUDGET_S = 8, 40.0


@pytest.fixture(scope="session")
def reference_jar() -> Path:
    """The Java reference runner's jar, built now if missing or older than its sources (a private copy: a rebuild
    of the shared jar during the session does not disturb it)."""
    try:
        return diff.snapshot(ensure_jar(quiet=True))
    except (BuildError, diff.JavaRunnerError) as e:
        pytest.fail(f"the Java reference runner does not build:\n{e}", pytrace=False)


@pytest.fixture(scope="session")
def java(reference_jar: Path) -> diff.Side:
    return diff.java_side(reference_jar)


def _describe(report: diff.Report) -> str:
    """The differing cases: the shrunk (minimal) ones with what differs, then the paths of the others."""
    lines = [report.summary()]
    shrunk = [e for e in report.differ if e["shrunk"]]
    for entry in shrunk:
        lines.append(f"  minimal: {entry.get('path')} ({diff.ops_of(entry['case'])}; {entry['size'][1]} inputs)")
        lines.extend(f"      {d[:300]}" for d in entry["differences"][:3])
    others = [e for e in report.differ if not e["shrunk"]]
    if others:
        lines.append(f"  {len(others)} {'more ' if shrunk else ''}differing cases, not shrunk:")
        for e in others:
            lines.append(f"    {e.get('path')}")
            if len(others) <= 30:
                lines.extend(f"      {d[:200]}" for d in e["differences"][:2])
    return "\n".join(lines)


def test_generated_cases_agree(java: diff.Side, tmp_path_factory: pytest.TempPathFactory) -> None:
    """500 generated cases give the same outputs, stores, dropped-records count and error kind on both sides."""
    cases = [c for seed, n in SEEDS.items() for c in generate(seed, n)]
    out = tmp_path_factory.mktemp("reference-diff")
    report = diff.compare(cases, java, diff.python_side, out, shrink=True, budget_s=SHRINK_BUDGET_S,
                          max_shrink=MAX_SHRINK, log=lambda line: None)  # fmt: skip
    assert report.cases == len(cases) >= 500
    assert not report.unsupported, f"generated cases the Java runner does not support: {report.unsupported[:5]}"
    if report.differ:
        pytest.fail(f"kstream_nb differs from Kafka Streams (cases in {out}):\n{_describe(report)}", pytrace=False)


def test_transcribed_cases_pass_on_kafka_streams(reference_jar: Path) -> None:
    """The transcribed conformance cases (tests/conformance) give their expected results on the Java runner,
    where it supports them (tests/reference/java_check.py)."""
    loaded = java_check.load_cases()
    results, _ = java_check.run_java([c for _, c in loaded], reference_jar)
    supported, failures = 0, []
    for (path, case), result in zip(loaded, results, strict=True):
        if "unsupported" in result:
            continue
        supported += 1
        try:
            java_check.check_case(case, result)
        except AssertionError as e:
            failures.append(f"{case['id']} ({Path(path).name}): {str(e)[:500]}")
    assert supported >= len(loaded) // 2, f"only {supported} of {len(loaded)} transcribed cases are supported"
    assert not failures, "Kafka Streams does not give the transcribed expectations:\n" + "\n".join(failures)


def test_transcribed_cases_agree(java: diff.Side, tmp_path_factory: pytest.TempPathFactory) -> None:
    """The supported transcribed cases also give the same result JSON on both sides."""
    cases = [c for _, c in java_check.load_cases()]
    out = tmp_path_factory.mktemp("reference-diff-transcribed")
    report = diff.compare(cases, java, diff.python_side, out, shrink=False)
    if report.differ:
        pytest.fail(f"kstream_nb differs from Kafka Streams on transcribed cases (in {out}):\n{_describe(report)}",
                    pytrace=False)  # fmt: skip


# ---- the generator --------------------------------------------------------------------------------------


def test_generator_is_deterministic_per_seed() -> None:
    first, again = list(generate(7, 60)), list(generate(7, 60))
    assert first == again
    other = list(generate(8, 60))
    assert [c["topology"] for c in other] != [c["topology"] for c in first]
    for case in first:
        validate(case)
        json.dumps(case)  # plain JSON


def _families(case: dict[str, Any]) -> set[str]:
    """The op families a case exercises (join kinds, aggregated kinds and window kinds told apart)."""
    info = analyse(case)
    out = set()
    for n in case["topology"]:
        op = n["op"]
        out.add(op)
        if op in ("join", "leftJoin", "outerJoin"):
            out.add(f"{op}:{info[n['left']].kind}-{info[n['right']].kind}")
        elif op in ("count", "reduce", "aggregate", "groupBy"):
            out.add(f"{op}:{info[n['from']].kind}")
        elif op == "windowedBy":
            out.add("window:" + next(k for k in ("tumbling", "hopping", "sliding", "session") if k in n))
            out.add("emit:" + n.get("emit_strategy", "default"))
        elif op == "suppress":
            out.add("suppress:" + n["until"])
        if (n.get("store") or {}).get("name"):
            out.add("named store")
    if (case.get("config") or {}).get("cache"):
        out.add("cache")
    if any(r["value"] is None for s in case["steps"] for r in s["input"]):
        out.add("null value")
    return out


def test_generator_covers_every_op_family() -> None:
    seen: Counter[str] = Counter()
    for case in generate(11, 400):
        seen.update(_families(case))
    wanted = {
        "stream", "table", "globalTable", "filter", "filterNot", "mapValues", "flatMapValues", "flatMap", "map",
        "selectKey", "repartition", "through", "merge", "split", "groupByKey", "groupBy:stream", "groupBy:table",
        "window:tumbling", "window:hopping", "window:sliding", "window:session", "emit:on_window_close",
        "emit:on_window_update", "count:grouped_stream", "count:grouped_table", "count:windowed_grouped",
        "reduce:grouped_stream", "reduce:grouped_table", "reduce:windowed_grouped", "aggregate:grouped_stream",
        "aggregate:grouped_table", "aggregate:windowed_grouped",
        "suppress:window_closes", "suppress:time_limit", "join:stream-stream", "leftJoin:stream-stream",
        "outerJoin:stream-stream", "join:stream-table", "leftJoin:stream-table", "join:table-table",
        "leftJoin:table-table", "outerJoin:table-table", "join:stream-global", "leftJoin:stream-global", "fkJoin",
        "fkLeftJoin", "process", "toStream", "toTable", "windowKeyToString", "capture", "to", "named store",
        "cache", "null value",
    }  # fmt: skip
    missing = wanted - set(seen)
    assert not missing, f"400 generated cases never use: {sorted(missing)}"


# ---- the comparator and shrinker ------------------------------------------------------------------------


def _one_record_changed(cases: list[diff.Case]) -> list[diff.Result]:
    """Python's results with the first output record of the first output node that has one changed: a
    difference that is not a kstream_nb bug, for testing the comparator and shrinker."""
    results = []
    for result in diff.python_side(cases):
        result = copy.deepcopy(result)
        for node in sorted(result["outputs"]):
            if result["outputs"][node]:
                result["outputs"][node][0]["value"] = "changed"
                break
        results.append(result)
    return results


def test_comparator_finds_and_shrinks_a_difference(tmp_path: Path) -> None:
    """A changed record is found, and its case shrunk to a smaller case that still differs."""
    candidates = (c for c in itertools.islice(generate(23, 200), 200) if diff.size(c)[1] >= 8)
    cases = list(itertools.islice(candidates, 6))
    report = diff.compare(cases, _one_record_changed, diff.python_side, tmp_path, budget_s=60, log=lambda s: None)
    agreeing = [c for c in cases if not any(diff.python_side([c])[0]["outputs"].values())]
    assert len(report.differ) == len(cases) - len(agreeing) > 0
    for entry in report.differ:
        assert entry["shrunk"] and Path(entry["path"]).is_file()
        original = next(c for c in cases if c["id"] == entry["id"])
        small = entry["case"]
        validate(small)
        assert diff.size(small) < diff.size(original)
        assert sum(diff.size(small)[:2]) < sum(diff.size(original)[:2])
        java_like, python = _one_record_changed([small])[0], diff.python_side([small])[0]
        assert diff.differences(java_like, python), f"the shrunk case {small} no longer differs"
        assert json.loads(Path(entry["path"]).read_text())["case"] == small
    assert "reference diff: 6 cases" in report.summary()


def test_identical_results_agree_and_errors_compare_by_kind() -> None:
    a = {"id": "x", "outputs": {"o": [{"key": "a", "value": 1, "timestamp_ms": 0}]}, "stores": {},
         "dropped_records_total": 1, "error": None}  # fmt: skip
    b = copy.deepcopy(a)
    b["dropped_records_total"] = 1.0
    assert diff.differences(a, b) == []
    b["stores"] = {"s": [{"key": "a", "value": 1, "timestamp_ms": 0}]}
    assert diff.differences(a, b) and diff.aspects(a, b) == ("store",)
    crashed_j = {**a, "error": "process: StreamsException: boom"}
    crashed_p = {**a, "outputs": {}, "error": "process: ProcessingError: other"}
    assert diff.differences(crashed_j, crashed_p) == []
    assert diff.differences(crashed_j, {**a, "error": "build: TypeError: no"})


def test_regression_cases_record_what_kafka_streams_does(java: diff.Side) -> None:
    """The Kafka Streams results recorded in tests/conformance/reference_cases are what the Java runner answers."""
    from tests.conformance.test_reference_cases import CASES

    answers = java([entry["case"] for entry in CASES])
    wrong = {e["case"]["id"]: diff.differences(a, e["kafka_streams"]) for e, a in zip(CASES, answers)}
    assert not {k: v for k, v in wrong.items() if v}
