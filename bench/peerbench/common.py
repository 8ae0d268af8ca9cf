"""Constants and the per-run record shared by the modules of ``bench/bench_peers.py``."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent.parent  # bench/
ROOT = HERE.parent
PEERS = HERE / "peers"
VENVS = HERE / ".venvs"
PARTITIONS = 4
WORKLOADS = ("filter", "wordcount", "window")
KAFKA_STREAMS = "kafka-streams"
ENGINES = (
    "kstream_nb",
    "kstream_nb-columns",
    "kstream_nb-eos",
    "kstream_nb-eos-1s",
    KAFKA_STREAMS,
    "quix",
    "bytewax",
)
#: kstream_nb variants: (runner, extra arguments). "columns": the filter as pandas-style column expressions
#: (evaluated a batch at a time); "eos": processing_guarantee=exactly_once_v2 (Kafka transactions), with
#: Kafka's default 100 ms commit interval; "eos-1s": the same with at_least_once's 1 s commits in the window
#: workload, which separates what the transactions cost from what the shorter interval costs the cache
KS_VARIANTS: dict[str, list[str]] = {
    "kstream_nb": [],
    "kstream_nb-columns": ["--style", "columns"],
    "kstream_nb-eos": ["--guarantee", "exactly_once_v2"],
    "kstream_nb-eos-1s": ["--guarantee", "exactly_once_v2", "--commit-ms", "1000"],
}
#: the variants that differ from "kstream_nb" only on some workloads run only there
KS_VARIANT_WORKLOADS = {"kstream_nb-columns": ("filter",), "kstream_nb-eos-1s": ("window",)}
#: the Python peers, each in its own venv; bytewax's Kafka connector needs confluent-kafka, which bytewax
#: does not install by itself
PEER_PACKAGES = {"quix": ["quixstreams", "orjson"], "bytewax": ["bytewax", "confluent-kafka", "orjson"]}
PEER_IMPORT = {"quix": "quixstreams", "bytewax": "bytewax"}
#: the consumer settings every engine gets (librdkafka names; the Java peer gets them translated)
CONSUMER_CONFIG: dict[str, Any] = {
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


@dataclass
class Result:
    """One engine's run of one workload (or a raw consume): times from the runner's STARTED line."""

    engine: str
    workload: str
    inputs: int = 0
    seconds: float | None = None
    steady_seconds: float | None = None
    first_output: float | None = None
    #: STARTED -> the client's first RUNNING (group joined, partitions assigned); engines that say so only
    join_seconds: float | None = None
    peak_rss_mib: float | None = None
    #: the runner's user + system CPU time, all threads, from its start (imports, JVM start) to the end
    cpu_seconds: float | None = None
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

    @property
    def complete(self) -> bool:
        return bool(self.rate) and not self.error


def per_round(name: str, round_: int) -> str:
    """A topic, group or log name of one run: the first run's is ``name``, later ones get ``-<round>``."""
    return name + (f"-{round_}" if round_ else "")


def median_run(runs: list[Result]) -> Result:
    """The run with the median rate among the complete ones (of two, the slower; the first run when none
    is complete); every run's rate is kept in ``extra["rates"]``."""
    complete = sorted((r for r in runs if r.complete), key=lambda r: r.rate or 0.0)
    chosen = complete[(len(complete) - 1) // 2] if complete else runs[0]
    if len(runs) > 1:
        chosen.extra["rates"] = [r.rate for r in runs]
    return chosen
