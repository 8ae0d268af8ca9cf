"""Differential test of kstream_nb against Kafka Streams 4.4 (tests/reference/SPEC.md).

Runs a batch of cases (generated, or ``--cases-file`` / ``KSNB_REFERENCE_CASES``) through the Java reference
runner (one JVM for the whole batch, cases streamed as JSON lines) and through the Python runner, compares the
results, shrinks every differing case (fewer inputs, steps and ops, while it stays valid and still differs the
same way; the candidates of all differing cases go through one JVM call per round) and writes each minimal
case with both results to ``--out``/``<id>.json``.

    python -m tests.reference.diff [--cases N] [--seed S] [--out DIR] [--cases-file F] [--no-shrink]

The last line printed is ``reference diff: N cases, A agree, D differ``; the exit status is 0 iff D == 0.
"""

from __future__ import annotations

import argparse
import atexit
import copy
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from tests.reference import python_runner
from tests.reference.generate import generate
from tests.reference.schema import CaseError, validate

HERE = Path(__file__).parent
JAVA_DIR = HERE / "java"
JAR = JAVA_DIR / "target" / "reference-runner.jar"
VOCABULARY = HERE / "vocabulary.json"
DEFAULT_OUT = Path("/tmp/reference-diff")
#: C1 only: the JIT time of C2 costs more than it saves on batches of small cases (about 2x faster here)
JVM_OPTIONS = ["-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xss4m"]

Case = dict[str, Any]
Result = dict[str, Any]
#: runs a batch of cases, one result per case, in order
Side = Callable[[list[Case]], list[Result]]


# ---- the two sides ------------------------------------------------------------------------------


class JavaRunnerError(RuntimeError):
    """The Java runner could not run (no jar, JVM failure)."""


def snapshot(jar: Path, wait_s: float = 300.0) -> Path:
    """A private copy of ``jar`` (a rebuild of the shared one during a run does not break the run); waits while
    the jar is being written (no manifest with a Main-Class yet)."""
    deadline = time.monotonic() + wait_s
    while True:
        if not jar.is_file():
            raise JavaRunnerError(f"{jar} is missing: build it with scripts/reference_diff.sh (mvn package)")
        fd, name = tempfile.mkstemp(prefix="ksnb-reference-runner-", suffix=".jar")
        os.close(fd)
        copy_path = Path(name)
        shutil.copyfile(jar, copy_path)
        try:
            with zipfile.ZipFile(copy_path) as z:
                if b"Main-Class" in z.read("META-INF/MANIFEST.MF"):
                    atexit.register(copy_path.unlink, missing_ok=True)
                    return copy_path
        except (zipfile.BadZipFile, KeyError, OSError):
            pass
        copy_path.unlink(missing_ok=True)
        if time.monotonic() > deadline:
            raise JavaRunnerError(f"{jar} is not a runnable jar (still being built?)")
        time.sleep(2)


def java_side(jar: Path = JAR, timeout_s: float = 3600.0, options: tuple[str, ...] = ()) -> Side:
    """The Java reference runner: one JVM per batch, cases written to its stdin while results are read (from a
    private copy of the jar, made at the first batch)."""
    private: list[Path] = []

    def run(cases: list[Case]) -> list[Result]:
        if not cases:
            return []
        if not private:
            private.append(snapshot(jar))
        cmd = ["java", *JVM_OPTIONS, "-jar", str(private[0]), "--vocabulary", str(VOCABULARY), *options]
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        stdin, stderr_chunks = proc.stdin, []

        def feed() -> None:
            try:
                for case in cases:
                    stdin.write(orjson.dumps(case) + b"\n")
                stdin.close()
            except BrokenPipeError:
                pass

        def drain_stderr() -> None:
            assert proc.stderr is not None
            stderr_chunks.append(proc.stderr.read())

        threads = [threading.Thread(target=feed, daemon=True), threading.Thread(target=drain_stderr, daemon=True)]
        for t in threads:
            t.start()
        timer = threading.Timer(timeout_s, proc.kill)
        timer.start()
        by_id: dict[str, Result] = {}
        try:
            for line in proc.stdout:
                if line.strip():
                    result = orjson.loads(line)
                    by_id[str(result.get("id"))] = result
            proc.wait()
        finally:
            timer.cancel()
            for t in threads:
                t.join(timeout=5)
        stderr = b"".join(stderr_chunks).decode("utf-8", "replace").strip()
        if not by_id:
            raise JavaRunnerError(f"the Java runner answered nothing (exit {proc.returncode}): {stderr[-2000:]}")
        missing = f"runner: no result from the Java runner (exit {proc.returncode}): {stderr[-500:]}"
        return [by_id.get(str(c["id"]), {"id": c["id"], "error": missing, "runner_failed": True}) for c in cases]

    return run


def python_side(cases: list[Case]) -> list[Result]:
    return [python_runner.run(c) for c in cases]


def run_both(java: Side, python: Side, cases: list[Case]) -> tuple[list[Result], list[Result], float, float]:
    """Both sides' results; the JVM runs while Python does. Returns (java, python, java_s, python_s)."""
    box: dict[str, Any] = {}

    def java_thread() -> None:
        start = time.monotonic()
        try:
            box["results"] = java(cases)
        except BaseException as e:  # re-raised below, in the caller's thread
            box["error"] = e
        box["seconds"] = time.monotonic() - start

    thread = threading.Thread(target=java_thread, daemon=True)
    thread.start()
    start = time.monotonic()
    py = python(cases)
    py_s = time.monotonic() - start
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["results"], py, box["seconds"], py_s


# ---- comparing ----------------------------------------------------------------------------------


def error_kind(result: Result) -> str | None:
    error = result.get("error")
    return None if error is None else str(error).split(":", 1)[0]


def _record(r: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in r.items() if not (k == "headers" and not v)}
    return out


def _sorted_store(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    def key(r: dict[str, Any]) -> tuple[Any, ...]:
        return tuple(
            (0, "") if r.get(f) is None else (1, r[f]) for f in ("key", "window_start_ms", "window_end_ms")
        )

    return sorted((_record(r) for r in rows), key=key)


def differences(java: Result, python: Result) -> list[str]:
    """What differs between two results (empty: they agree). Java's ``unsupported`` answers are not compared."""
    if java.get("runner_failed"):
        return [str(java.get("error"))]
    jk, pk = error_kind(java), error_kind(python)
    if jk != pk:
        return [f"error: Kafka Streams {java.get('error')!r}, kstream_nb {python.get('error')!r}"]
    if jk is not None:
        return []
    diffs = []
    j_out, p_out = java.get("outputs") or {}, python.get("outputs") or {}
    for node in sorted(set(j_out) | set(p_out)):
        j = [_record(r) for r in j_out.get(node) or []]
        p = [_record(r) for r in p_out.get(node) or []]
        if j != p:
            diffs.append(f"output {node}: Kafka Streams {j}, kstream_nb {p}")
    j_st, p_st = java.get("stores") or {}, python.get("stores") or {}
    for store in sorted(set(j_st) | set(p_st)):
        j, p = _sorted_store(j_st.get(store) or []), _sorted_store(p_st.get(store) or [])
        if j != p:
            diffs.append(f"store {store}: Kafka Streams {j}, kstream_nb {p}")
    jd, pd = java.get("dropped_records_total") or 0, python.get("dropped_records_total") or 0
    if float(jd) != float(pd):
        diffs.append(f"dropped_records_total: Kafka Streams {jd}, kstream_nb {pd}")
    return diffs


def signature(java: Result, python: Result) -> tuple[Any, ...]:
    """How two results differ, coarsely: a shrunk case must keep it (so shrinking does not drift to another
    difference): the error kinds (with kstream_nb's exception type), or which parts differ."""
    jk, pk = error_kind(java), error_kind(python)
    if jk != pk:
        p_type = str(python.get("error") or "").split(":")[1:2]
        return ("error", jk, pk, tuple(p_type))
    return ("result",)


# ---- shrinking ----------------------------------------------------------------------------------


def inputs_of(case: Case) -> list[dict[str, Any]]:
    return [r for step in case.get("steps") or [] for r in step.get("input") or []]


def size(case: Case) -> tuple[int, int, int]:
    return (len(case["topology"]), len(inputs_of(case)), len(case.get("steps") or []))


def _with_inputs(case: Case, keep: Callable[[int, dict[str, Any]], bool]) -> Case:
    out = copy.deepcopy(case)
    i = 0
    steps = []
    for step in out.get("steps") or []:
        kept = []
        for record in step.get("input") or []:
            if keep(i, record):
                kept.append(record)
            i += 1
        if kept:
            steps.append({**step, "input": kept})
    out["steps"] = steps
    return out


def _without_inputs(case: Case, drop: range) -> Case:
    return _with_inputs(case, lambda i, r: i not in drop)


def _refs(node: dict[str, Any]) -> list[str]:
    refs = [node[f] for f in ("from", "left", "right") if isinstance(node.get(f), str)]
    return refs + list(node.get("inputs") or [])


def prune(case: Case) -> Case:
    """Drops nodes no output reads from (and inputs of topics no source reads any more)."""
    nodes = case["topology"]
    provides: dict[str, dict[str, Any]] = {}
    for n in nodes:
        provides[n["id"]] = n
        for b in n.get("branches") or []:
            provides[b["id"]] = n
    live: set[int] = set()
    stack = [n for n in nodes if n["op"] in ("to", "capture")]
    while stack:
        n = stack.pop()
        if id(n) in live:
            continue
        live.add(id(n))
        stack.extend(provides[r] for r in _refs(n) if r in provides)
    out = copy.deepcopy(case)
    out["topology"] = [copy.deepcopy(n) for n in nodes if id(n) in live]
    for n in out["topology"]:
        if n["op"] == "split":
            n["branches"] = [b for b in n["branches"] if any(b["id"] in _refs(m) for m in out["topology"])]
    out["topology"] = [n for n in out["topology"] if n["op"] != "split" or n["branches"]]
    topics = {n["topic"] for n in out["topology"] if n["op"] in ("stream", "table", "globalTable")}
    return _with_inputs(out, lambda i, r: r.get("topic") in topics)


def _bypass(case: Case, index: int) -> list[Case]:
    """Cases without node ``index``: its readers read its input instead (each input of a join/merge)."""
    node = case["topology"][index]
    if node["op"] in ("stream", "table", "globalTable", "to", "capture"):
        return []
    ids = [node["id"]] + [b["id"] for b in node.get("branches") or []]
    out = []
    for replacement in dict.fromkeys(_refs(node)):
        candidate = copy.deepcopy(case)
        del candidate["topology"][index]
        for n in candidate["topology"]:
            for f in ("from", "left", "right"):
                if n.get(f) in ids:
                    n[f] = replacement
            if n.get("inputs"):
                n["inputs"] = [replacement if i in ids else i for i in n["inputs"]]
        for n in candidate["topology"]:  # a merge left with one input is that input
            if n["op"] == "merge" and len(set(n["inputs"])) < 2:
                only = n["inputs"][0]
                candidate["topology"].remove(n)
                for m in candidate["topology"]:
                    for f in ("from", "left", "right"):
                        if m.get(f) == n["id"]:
                            m[f] = only
                break
        out.append(candidate)
    return out


def _chains(case: Case, index: int) -> list[Case]:
    """Cases without a chain of 2-5 nodes starting at node ``index`` (each the only reader of the one before,
    e.g. groupByKey windowedBy count toStream): the last one's readers read the chain's input."""
    nodes = case["topology"]
    first = nodes[index]
    if first["op"] in ("stream", "table", "globalTable", "to", "capture", "split", "merge") or "from" not in first:
        return []
    chain = [first]
    out = []
    while len(chain) < 5:
        readers = [n for n in nodes if chain[-1]["id"] in _refs(n)]
        if len(readers) != 1 or readers[0].get("from") != chain[-1]["id"] or readers[0]["op"] in ("to", "capture"):
            break
        chain.append(readers[0])
        ids = {n["id"] for n in chain}
        candidate = copy.deepcopy(case)
        candidate["topology"] = [copy.deepcopy(n) for n in nodes if n["id"] not in ids]
        for n in candidate["topology"]:
            for f in ("from", "left", "right"):
                if n.get(f) == chain[-1]["id"]:
                    n[f] = first["from"]
            if n.get("inputs"):
                n["inputs"] = [first["from"] if i == chain[-1]["id"] else i for i in n["inputs"]]
        out.append(candidate)
    return out


def candidates(case: Case, granularity: int) -> list[Case]:
    """Smaller variants of ``case`` (valid ones only), smallest first."""
    found: list[Case] = []
    outputs = [i for i, n in enumerate(case["topology"]) if n["op"] in ("to", "capture")]
    if len(outputs) > 1:
        for i in outputs:
            c = copy.deepcopy(case)
            del c["topology"][i]
            found.append(c)
    for i in range(len(case["topology"])):
        found.extend(_bypass(case, i))
        found.extend(_chains(case, i))
    records = inputs_of(case)
    n = len(records)
    if n > 1:
        chunk = max(1, n // granularity)
        for start in range(0, n, chunk):
            found.append(_without_inputs(case, range(start, start + chunk)))
    if len(case.get("steps") or []) > 1:
        found.append({**copy.deepcopy(case), "steps": [{"input": records}]})
    if (case.get("config") or {}).get("cache"):
        found.append({**copy.deepcopy(case), "config": {**case["config"], "cache": False}})
    valid: dict[str, Case] = {}
    for c in found:
        c = prune(c)
        try:
            validate(c)
        except (CaseError, KeyError, TypeError):
            continue
        if size(c) < size(case) or c.get("config") != case.get("config") or len(c["steps"]) < len(case["steps"]):
            valid.setdefault(json.dumps(c, sort_keys=True), c)
    return sorted(valid.values(), key=size)


Verdict = tuple[Result, Result]


class Shrinker:
    """Shrinks one case keeping its difference ``sig``: ``batch()`` gives the next candidates to run (at most
    ``per_round``, smallest first), ``feed()`` their results; ``current`` is the smallest case found so far."""

    def __init__(self, case: Case, sig: tuple[Any, ...], per_round: int = 12) -> None:
        self.original_id = case["id"]
        self.current = case
        self.sig = sig
        self.per_round = per_round
        self.granularity = 2
        self.tried: set[str] = set()
        self.queue: list[Case] = []
        self.pending: list[Case] = []
        self.serial = 0
        self._refill()

    def _refill(self) -> None:
        while True:
            fresh = []
            for c in candidates(self.current, self.granularity):
                key = json.dumps({k: v for k, v in c.items() if k != "id"}, sort_keys=True)
                if key not in self.tried:
                    self.tried.add(key)
                    fresh.append(c)
            self.queue = fresh
            if fresh or self.granularity >= len(inputs_of(self.current)):
                return
            self.granularity = min(len(inputs_of(self.current)), self.granularity * 2)

    @property
    def done(self) -> bool:
        return not self.queue

    def batch(self) -> list[Case]:
        self.pending, self.queue = self.queue[: self.per_round], self.queue[self.per_round :]
        for c in self.pending:
            self.serial += 1
            c["id"] = f"{self.original_id}~{self.serial}"
        return self.pending

    def feed(self, verdicts: list[Verdict]) -> None:
        for c, (j, p) in zip(self.pending, verdicts):
            if "unsupported" not in j and differences(j, p) and signature(j, p) == self.sig:
                self.current = c
                self.granularity = max(2, self.granularity - 1)
                self._refill()
                return
        if not self.queue:
            if self.granularity < len(inputs_of(self.current)):
                self.granularity = min(len(inputs_of(self.current)), self.granularity * 2)
            self._refill()

    def result(self) -> Case:
        out = copy.deepcopy(self.current)
        out["id"] = self.original_id
        return out


def shrink_all(java: Side, python: Side, todo: list[tuple[Case, tuple[Any, ...]]], budget_s: float = 600.0,
               log: Callable[[str], None] = print) -> list[Case]:  # fmt: skip
    """Shrinks every case at once: each round, one batch holds the next candidates of every shrinker; stops
    after ``budget_s`` seconds with the smallest cases found by then."""
    shrinkers = [Shrinker(c, sig) for c, sig in todo]
    start = time.monotonic()
    rounds = 0
    while True:
        active = [s for s in shrinkers if not s.done]
        if not active:
            break
        if time.monotonic() - start > budget_s:
            log(f"  shrinking stopped after {budget_s:.0f} s ({len(active)} cases not minimal)")
            break
        rounds += 1
        batches = [s.batch() for s in active]
        flat = [c for b in batches for c in b]
        j_res, p_res, _, _ = run_both(java, python, flat)
        offset = 0
        for s, b in zip(active, batches):
            s.feed(list(zip(j_res[offset : offset + len(b)], p_res[offset : offset + len(b)])))
            offset += len(b)
        if rounds % 5 == 0:
            log(f"  shrink round {rounds}: {len(flat)} candidates for {len(active)} cases, "
                f"{time.monotonic() - start:.0f} s")  # fmt: skip
    return [s.result() for s in shrinkers]


# ---- the command --------------------------------------------------------------------------------


@dataclass
class Report:
    cases: int = 0
    agree: int = 0
    unsupported: list[tuple[str, str]] = field(default_factory=list)
    differ: list[dict[str, Any]] = field(default_factory=list)  # {"case", "java", "python", "differences", ...}
    java_s: float = 0.0
    python_s: float = 0.0

    def summary(self) -> str:
        return f"reference diff: {self.cases} cases, {self.agree} agree, {len(self.differ)} differ"


def load_cases(path: Path) -> list[Case]:
    """Cases from a .jsonl file (one per line), a JSON list, one case, or a diff output file ({"case": ...})."""
    text = path.read_text()
    if path.suffix == ".jsonl":
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    data = json.loads(text)
    items = data if isinstance(data, list) else [data]
    return [item["case"] if "case" in item and "topology" not in item else item for item in items]


def aspects(java: Result, python: Result) -> tuple[str, ...]:
    """Which parts of two results differ: error, output, store, dropped_records_total."""
    return tuple(sorted({d.split(":")[0].split(" ")[0] for d in differences(java, python)}))


def ops_of(case: Case) -> str:
    return " ".join(n["op"] for n in case["topology"])


def pick_for_shrinking(differing: list[tuple[Case, Result, Result]], pool: list[int], limit: int) -> list[int]:
    """At most ``limit`` indexes of ``pool`` (into ``differing``), spread over their kinds of difference (error
    kinds, differing parts): one of each kind first, then a second of each, ..."""
    by_kind: dict[tuple[Any, ...], list[int]] = {}
    for i in pool:
        _, j, p = differing[i]
        by_kind.setdefault((signature(j, p), aspects(j, p)), []).append(i)
    chosen: list[int] = []
    queues = list(by_kind.values())
    while len(chosen) < limit and any(queues):
        for q in queues:
            if q and len(chosen) < limit:
                chosen.append(q.pop(0))
    return sorted(chosen)


def _ops(case: Case) -> Counter[str]:
    return Counter(n["op"] for n in case["topology"])


Pattern = tuple[Counter[str], tuple[str, ...], bool, int]  # ops, differing parts, cache on, index


def explained_by(case: Case, parts: tuple[str, ...], patterns: list[Pattern]) -> int | None:
    """The index of a minimal case whose ops all occur in ``case``, whose differing parts it shares and whose
    cache setting it has when the minimal case caches (so ``case`` likely differs for the same reason), or None."""
    ops = _ops(case)
    cache = bool((case.get("config") or {}).get("cache"))
    for small_ops, small_parts, small_cache, index in patterns:
        if not small_ops - ops and set(small_parts) <= set(parts) and (cache or not small_cache):
            return index
    return None


def compare(cases: list[Case], java: Side, python: Side, out: Path | None, shrink: bool = True,
            budget_s: float = 600.0, max_shrink: int = 60, wave: int = 30,
            log: Callable[[str], None] = print) -> Report:  # fmt: skip
    """Runs ``cases`` on both sides; shrinks (at most ``max_shrink`` of) the differing ones and writes them to
    ``out`` as ``<id>.json`` with both results.

    Shrinking goes in waves of ``wave`` cases: after each, a differing case whose ops contain a minimal case's
    ops (with the same differing parts) counts as explained by it; the next wave picks among the unexplained
    ones, until none is left, ``max_shrink`` cases were shrunk or ``budget_s`` seconds went by.
    """
    report = Report(cases=len(cases))
    j_res, p_res, report.java_s, report.python_s = run_both(java, python, cases)
    differing = []
    for case, j, p in zip(cases, j_res, p_res):
        if "unsupported" in j:
            report.unsupported.append((str(case["id"]), str(j["unsupported"])))
        elif differences(j, p):
            differing.append((case, j, p))
        else:
            report.agree += 1
    minimal = [c for c, _, _ in differing]
    finals = {i: (differing[i][1], differing[i][2]) for i in range(len(differing))}
    shrunk: list[int] = []
    patterns: list[Pattern] = []
    explained: dict[int, int] = {}
    start = time.monotonic()
    while shrink and len(shrunk) < max_shrink and time.monotonic() - start < budget_s:
        pool = [i for i in range(len(differing)) if i not in shrunk and i not in explained]
        for i in list(pool):
            found = explained_by(differing[i][0], aspects(*finals[i]), patterns)
            if found is not None:
                explained[i] = found
                pool.remove(i)
        if not pool:
            break
        picked = pick_for_shrinking(differing, pool, min(wave, max_shrink - len(shrunk)))
        log(f"shrinking {len(picked)} of {len(pool)} unexplained differing cases ({len(differing)} differ)")
        todo = [(differing[i][0], signature(*finals[i])) for i in picked]
        left = budget_s - (time.monotonic() - start)
        for i, small in zip(picked, shrink_all(java, python, todo, left, log)):
            minimal[i] = small
        j_min, p_min, _, _ = run_both(java, python, [minimal[i] for i in picked])
        for k, i in enumerate(picked):
            if differences(j_min[k], p_min[k]):  # else (a flaky side?) the original case stays
                finals[i] = (j_min[k], p_min[k])
            else:
                minimal[i] = differing[i][0]
            patterns.append(
                (_ops(minimal[i]), aspects(*finals[i]), bool((minimal[i].get("config") or {}).get("cache")), i)
            )
        shrunk.extend(picked)
        patterns.sort(key=lambda p: sum(p[0].values()))
    if out is not None and differing:
        out.mkdir(parents=True, exist_ok=True)
    paths: dict[int, str] = {}
    for i, (case, _, _) in enumerate(differing):
        jm, pm = finals[i]
        entry: dict[str, Any] = {
            "id": case["id"], "case": minimal[i], "kafka_streams": jm, "kstream_nb": pm,
            "differences": differences(jm, pm), "shrunk": i in shrunk, "original_size": list(size(case)),
            "size": list(size(minimal[i])),
        }  # fmt: skip
        if out is not None:
            path = out / f"{case['id']}.json"
            paths[i] = entry["path"] = str(path)
        entry["group"] = (ops_of(minimal[i]), aspects(jm, pm)) if i in shrunk else None
        report.differ.append(entry)
    for i, entry in enumerate(report.differ):
        if i in explained:
            entry["explained_by"] = paths.get(explained[i], differing[explained[i]][0]["id"])
        if out is not None:
            Path(entry["path"]).write_text(json.dumps({k: v for k, v in entry.items() if k != "group"}, indent=1)
                                           + "\n")  # fmt: skip
    return report


def groups(report: Report) -> list[list[dict[str, Any]]]:
    """The shrunk differences grouped by (ops of the minimal case, differing parts), largest group first."""
    by: dict[Any, list[dict[str, Any]]] = {}
    for entry in report.differ:
        if entry["group"] is not None:
            by.setdefault(entry["group"], []).append(entry)
    return sorted(by.values(), key=lambda g: (-len(g), g[0]["group"]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=500, help="generated cases (default 500)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"where minimal cases go ({DEFAULT_OUT})")
    parser.add_argument("--cases-file", type=Path, default=None, help="run these cases (.jsonl/.json) instead")
    parser.add_argument("--no-shrink", action="store_true", help="write differing cases as they are")
    parser.add_argument("--shrink-budget", type=float, default=900.0, help="seconds of shrinking at most (900)")
    parser.add_argument("--max-shrink", type=int, default=200, help="differing cases shrunk at most (200), in "
                        "waves, each among the cases no minimal case explains yet")  # fmt: skip
    parser.add_argument("--jar", type=Path, default=JAR)
    args = parser.parse_args(argv)
    cases_file = args.cases_file or (Path(os.environ["KSNB_REFERENCE_CASES"]) if os.environ.get(
        "KSNB_REFERENCE_CASES") else None)  # fmt: skip
    if cases_file is not None:
        cases = load_cases(cases_file)
        print(f"{len(cases)} cases from {cases_file}")
    else:
        cases = list(generate(args.seed, args.cases))
        print(f"{len(cases)} generated cases (seed {args.seed})")
    start = time.monotonic()
    report = compare(cases, java_side(args.jar), python_side, args.out, not args.no_shrink, args.shrink_budget,
                     args.max_shrink)  # fmt: skip
    for entry in report.differ:
        print(f"DIFFER {entry['id']} ({'minimal: ' if entry['shrunk'] else ''}{ops_of(entry['case'])}; "
              f"{entry['size'][1]} inputs) -> {entry.get('path')}")  # fmt: skip
        for line in entry["differences"]:
            print(f"    {line[:400]}")
    grouped = groups(report)
    if grouped:
        print(f"{len(grouped)} groups of minimal cases (ops, differing parts; cases shrunk + explained by them):")
        by_path = Counter(e.get("explained_by") for e in report.differ)
        for g in grouped:
            ops, parts = g[0]["group"]
            smallest = min(g, key=lambda e: e["size"])
            explains = sum(by_path[e.get("path")] for e in g)
            print(f"  {len(g):3d} + {explains:3d} x [{ops}] differ in {', '.join(parts)}: {smallest.get('path')}")
        unexplained = [e for e in report.differ if not e["shrunk"] and "explained_by" not in e]
        if unexplained:
            print(f"  {len(unexplained)} differing cases neither shrunk nor explained by a minimal case")
    print(f"time: Kafka Streams {report.java_s:.1f} s, kstream_nb {report.python_s:.1f} s (run in parallel); "
          f"total with shrinking {time.monotonic() - start:.1f} s")  # fmt: skip
    if report.unsupported:
        print(f"{len(report.unsupported)} unsupported")
    print(report.summary())
    return 0 if not report.differ else 1


if __name__ == "__main__":
    sys.exit(main())
