"""Running the engines and the raw consumer: peer venvs, child processes, timing and peak RSS."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .common import (
    CONSUMER_CONFIG,
    GRACE_MS,
    KAFKA_STREAMS,
    KS_VARIANTS,
    PARTITIONS,
    PEER_IMPORT,
    PEER_PACKAGES,
    PEERS,
    ROOT,
    THRESHOLD,
    VENVS,
    WINDOW_MS,
    Result,
    per_round,
)
from .data import Data, check_output, expected_outputs
from .kafka_streams import java_config

# ---- peer venvs ------------------------------------------------------------------------------------


def ensure_venv(name: str, log_dir: Path) -> tuple[str | None, str]:
    """(python of the peer's venv or None, note). Creates bench/.venvs/<name> when missing."""
    venv = VENVS / name
    python = venv / "bin" / "python"
    VENVS.mkdir(exist_ok=True)
    (VENVS / ".gitignore").write_text("*\n")
    probe = [
        str(python),
        "-c",
        f"import {PEER_IMPORT[name]}, orjson, confluent_kafka; print({PEER_IMPORT[name]}.__name__)",
    ]
    if python.exists() and subprocess.run(probe, capture_output=True).returncode == 0:
        return str(python), "venv present"
    log = log_dir / f"pip-{name}.log"
    t0 = time.monotonic()
    with log.open("w") as out:
        steps = [
            [sys.executable, "-m", "venv", "--clear", str(venv)],
            [str(python), "-m", "pip", "install", "--disable-pip-version-check", *PEER_PACKAGES[name]],
        ]
        for step in steps:
            try:
                rc = subprocess.run(step, stdout=out, stderr=subprocess.STDOUT, timeout=900).returncode
            except subprocess.TimeoutExpired:
                return None, f"`{' '.join(step[-3:])}` took over 900 s (log: {log})"
            if rc != 0:
                tail = log.read_text(errors="replace").strip().splitlines()[-3:]
                return None, f"`{' '.join(step[-4:])}` failed (exit {rc}): {' | '.join(tail)} (log: {log})"
    if (r := subprocess.run(probe, capture_output=True, text=True)).returncode != 0:
        return None, f"installed but the imports fail: {r.stderr.strip().splitlines()[-1:]}"
    return str(python), f"venv created in {time.monotonic() - t0:.0f} s"


def package_version(python: str, dist: str) -> str:
    """The version of ``dist`` installed for ``python``, or ``?``."""
    r = subprocess.run(
        [python, "-c", f"import importlib.metadata as m; print(m.version({dist!r}))"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    return r.stdout.strip() or "?"


# ---- output watcher ------------------------------------------------------------------------------------


class OutputWatcher(threading.Thread):
    """Reads an output topic from the beginning while a runner writes it; keeps (key, value) bytes."""

    def __init__(self, bootstrap: str, topic: str, expected: int) -> None:
        super().__init__(daemon=True)
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"watch-{topic}",
                "enable.auto.commit": False,
                "fetch.wait.max.ms": 10,
                "fetch.error.backoff.ms": 10,
            }
        )
        self.consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        self.expected = expected
        self.records: list[tuple[bytes | None, bytes | None]] = []
        self.first_at: float | None = None
        self.last_at: float | None = None
        self.done = threading.Event()  # expected count reached
        self.stop_flag = threading.Event()
        self.errors: list[str] = []

    def run(self) -> None:
        records, consume = self.records, self.consumer.consume
        while not self.stop_flag.is_set():
            batch = consume(10_000, 0.05)
            if not batch:
                continue
            now = time.monotonic()
            for msg in batch:
                if msg.error() is None:
                    records.append((msg.key(), msg.value()))
                else:
                    self.errors.append(str(msg.error()))
            if self.first_at is None and records:
                self.first_at = now
            self.last_at = now
            if len(records) >= self.expected:
                self.done.set()
        self.consumer.close()

    def finish(self, settle: float = 0.0) -> None:
        """Stops reading (after ``settle`` seconds more, to catch records beyond the expected count)."""
        time.sleep(settle)
        self.stop_flag.set()
        self.join(10)


# ---- child processes ----------------------------------------------------------------------------------


def _reader(stream: Any, lines: list[str], started: threading.Event) -> None:
    """Collects a runner's stdout lines."""
    for raw in iter(stream.readline, b""):
        line = raw.decode(errors="replace").rstrip()
        lines.append(line)
        if line.startswith("STARTED "):
            started.set()


def vm_hwm_mib(pid: int) -> float | None:
    """Peak resident set size of a live process (VmHWM), in MiB. Not ru_maxrss: a child's ru_maxrss also
    counts the forked copy of this (big) driver process from before its exec."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except (OSError, ValueError):
        pass
    return None


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of a live process (all its threads), in seconds."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(") ", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


@dataclass
class ChildRun:
    """What ``run_child`` saw of one child process."""

    lines: list[str]  # its stdout
    status: int | None  # exit status, None when we stopped it
    peak_rss_mib: float  # VmHWM, sampled every 20 ms and last read just before the child is stopped
    cpu_seconds: float | None  # user + system, from its start until it was told to stop (or exited)
    error: str


def run_child(cmd: list[str], log_path: Path, until: Any, timeout: float) -> ChildRun:
    """Runs ``cmd``; calls ``until(exited: bool) -> bool`` every 20 ms until it says stop (or ``timeout`` after
    STARTED); then stops the child (SIGTERM, SIGKILL after 5 s)."""
    lines: list[str] = []
    started = threading.Event()
    # the kstream_nb runner imports the package from this checkout, installed into the venv or not
    env = {**os.environ, "PYTHONPATH": str(ROOT)} if cmd[0] == sys.executable else None
    with log_path.open("wb") as err:
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL, cwd=PEERS, env=env
        )
    reader = threading.Thread(target=_reader, args=(proc.stdout, lines, started), daemon=True)
    reader.start()
    status: int | None = None
    reaped = False
    peak = 0.0
    cpu: float | None = None
    t_spawn = time.monotonic()
    error = ""
    while True:
        peak = max(peak, vm_hwm_mib(proc.pid) or 0.0)
        pid, st, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            status, reaped = os.waitstatus_to_exitcode(st), True
            cpu = usage.ru_utime + usage.ru_stime
        t_started = stamp(lines)
        elapsed = time.monotonic() - (t_started or t_spawn)
        if until(pid != 0):
            break
        if pid:
            if status != 0:
                error = f"exited with {status}"
            break
        if elapsed > timeout:
            error = f"timed out after {timeout:.0f} s"
            break
        time.sleep(0.02)
    if not reaped:  # still running: we stop it
        peak = max(peak, vm_hwm_mib(proc.pid) or 0.0)
        cpu = cpu_seconds(proc.pid)
        os.kill(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 5
        while not os.wait4(proc.pid, os.WNOHANG)[0]:
            if time.monotonic() > deadline:
                os.kill(proc.pid, signal.SIGKILL)
                os.wait4(proc.pid, 0)
                break
            time.sleep(0.05)
    proc.returncode = status if status is not None else -signal.SIGTERM  # reaped by hand above
    reader.join(5)
    if error:
        tail = log_path.read_text(errors="replace").strip().splitlines()[-3:]
        error = f"{error}: {' | '.join(tail)} (log: {log_path})"
    return ChildRun(lines, status, peak, cpu, error)


def stamp(lines: list[str], tag: str = "STARTED") -> float | None:
    """The time on the first ``<tag> <time.monotonic()>`` line a runner printed, if any."""
    for line in lines:
        if line.startswith(tag + " "):
            return float(line.split()[1])
    return None


def run_raw(
    bootstrap: str, data: Data, decoder: str, extra: dict[str, Any], log_dir: Path, timeout: float
) -> Result:
    label = f"raw + {decoder}.loads, ks defaults" if extra else f"raw confluent-kafka + {decoder}.loads"
    res = Result(label, "consume", inputs=data.n_events + PARTITIONS, extra={"tuned": bool(extra)})
    cmd = [
        sys.executable,
        str(PEERS / "raw_consume.py"),
        bootstrap,
        "events",
        json.dumps({**CONSUMER_CONFIG, "fetch.wait.max.ms": 10, **extra}),
        decoder,
    ]
    log = log_dir / f"raw-{decoder}{'-tuned' if extra else ''}.log"
    child = run_child(cmd, log, lambda exited: exited, timeout)
    lines, error = child.lines, child.error
    res.peak_rss_mib, res.cpu_seconds = child.peak_rss_mib, child.cpu_seconds
    done = [ln for ln in lines if ln.startswith("DONE ")]
    if error or not done:
        res.error = error or "no DONE line"
        return res
    _, t1, n = done[0].split()
    res.seconds = float(t1) - (stamp(lines) or float(t1))
    res.steady_seconds = res.seconds
    res.outputs = int(n)
    res.check = "ok" if int(n) == res.inputs else f"read {n} of {res.inputs}"
    return res


def runner_command(engine: str, python: str) -> list[str]:
    """The start of a Python runner's command line (kstream_nb's variants share one runner)."""
    runner = "kstream_nb" if engine in KS_VARIANTS else engine
    return [python, str(PEERS / f"{runner}_run.py")]


def run_engine(
    engine: str,
    launcher: list[str],
    workload: str,
    bootstrap: str,
    data: Data,
    log_dir: Path,
    timeout: float,
    stall: float,
    ks_store: str,
    round_: int = 0,
    first_timeout: float = 180.0,
) -> Result:
    """Runs ``launcher`` + the workload's arguments until the output is complete (or stalls); times it."""
    inputs = data.n_sentences if workload == "wordcount" else data.n_events + PARTITIONS
    res = Result(engine, workload, inputs=inputs)
    output = per_round(f"out-{workload}-{engine}", round_)
    expected = expected_outputs(workload, data)
    watcher = OutputWatcher(bootstrap, output, expected)
    watcher.start()
    state_dir = tempfile.mkdtemp(prefix=f"bench-{engine}-{workload}-")
    config = java_config(CONSUMER_CONFIG) if engine == KAFKA_STREAMS else CONSUMER_CONFIG
    cmd = [
        *launcher,
        "--workload", workload,
        "--bootstrap", bootstrap,
        "--input", "sentences" if workload == "wordcount" else "events",
        "--output", output,
        "--group", per_round(f"bench-{engine}-{workload}", round_),
        "--config", json.dumps(config),
        "--state-dir", state_dir,
        "--threshold", str(THRESHOLD),
        "--window-ms", str(WINDOW_MS),
        "--grace-ms", str(GRACE_MS),
        "--store", ks_store,
        *KS_VARIANTS.get(engine, []),
    ]  # fmt: skip
    exited_at: list[float] = []
    t_spawn = time.monotonic()

    def until(exited: bool) -> bool:
        if watcher.done.is_set():
            return True
        now = time.monotonic()
        if watcher.first_at is None and now - t_spawn > first_timeout:
            return True
        last = watcher.last_at or now
        if exited:  # Bytewax ends with its input: give the sink a moment, then judge what arrived
            exited_at.append(exited_at[0] if exited_at else now)
            return now - max(last, exited_at[0]) > 3
        return watcher.last_at is not None and now - last > stall

    try:
        log = log_dir / f"{per_round(f'{engine}-{workload}', round_)}.log"
        child = run_child(cmd, log, until, timeout)
        watcher.finish(settle=1.0)
    finally:
        shutil.rmtree(state_dir, ignore_errors=True)
    lines, status, error = child.lines, child.status, child.error
    res.peak_rss_mib, res.cpu_seconds = child.peak_rss_mib, child.cpu_seconds
    res.outputs = len(watcher.records)
    t0 = stamp(lines)
    if (t_running := stamp(lines, "RUNNING")) is not None and t0 is not None:
        res.join_seconds = t_running - t0
    if status not in (None, 0) or (error and not watcher.records):
        res.error = error or f"exited with {status}"
    if t0 is not None and watcher.last_at is not None:
        res.seconds = watcher.last_at - t0
        res.first_output = (watcher.first_at or watcher.last_at) - t0
        if watcher.first_at is not None and watcher.last_at > watcher.first_at:
            res.steady_seconds = watcher.last_at - watcher.first_at
    if not watcher.done.is_set() and not res.error:
        res.error = f"incomplete: {res.outputs} of {expected} output records"
        if watcher.first_at is None and not error:
            res.error += f" (none within {first_timeout:.0f} s)"
        if error:
            res.error += f" ({error})"
    res.check = check_output(workload, watcher.records, data, res)
    return res
