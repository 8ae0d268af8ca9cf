"""The report of ``bench/bench_peers.py``: one table, kstream_nb's ratios to each peer, the notes."""

from __future__ import annotations

import random

from .common import KAFKA_STREAMS, KS_VARIANTS, WORKLOADS, Result
from .data import Data

#: the peers kstream_nb is compared with, in the table's order, and their column headers
RATIO_PEERS = {"bytewax": "ks/bytewax", "quix": "ks/quix", KAFKA_STREAMS: "ks/kstreams"}


def fmt_rate(x: float | None) -> str:
    """A rate with thousands separators, ``-`` for none."""
    return f"{x:,.0f}" if x else "-"


def _secs(x: float | None) -> str:
    return f"{x:.1f}" if x is not None else "-"


def status_text(r: Result) -> str:
    """``ok`` or what went wrong (the run's error and the output check)."""
    if r.error and not r.error.startswith("incomplete"):
        return r.error
    return "; ".join(x for x in (r.error, r.check) if x and x != "ok") or "ok"


def _ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}x" if a and b else "-"


def _row(workload: str, r: Result, ratios: str, ratio_raw: str, status: str) -> str:
    return (
        f"{workload:<10} {r.engine:<34} {r.inputs:>9,} {fmt_rate(r.rate):>9} {fmt_rate(r.steady_rate):>9} "
        f"{_secs(r.first_output):>9} {_secs(r.join_seconds):>6} {r.seconds or 0:>8.1f} {_secs(r.cpu_seconds):>6} "
        f"{r.peak_rss_mib or 0:>12.0f}{ratios} {ratio_raw:>9}  {status}"
    )


def print_table(raw: list[Result], results: list[Result], notes: dict[str, str]) -> None:
    """The table: every raw consume and engine run, with kstream_nb's ratios on rec/s to each peer."""
    # the raw ceilings: librdkafka's defaults (as the issue measured it), and kstream_nb's consumer defaults
    ceilings = [max((r.rate or 0 for r in raw if r.extra["tuned"] == tuned), default=0) for tuned in (False, True)]
    ratio_cols = "".join(f" {h:>11}" for h in RATIO_PEERS.values())
    header = (
        f"{'workload':<10} {'engine':<34} {'input':>9} {'rec/s':>9} {'steady':>9} {'1st out s':>9} "
        f"{'join s':>6} {'total s':>8} {'cpu s':>6} {'peak RSS MiB':>12}{ratio_cols} {'ks/raw':>9}  check"
    )
    print()
    print(header)
    print("-" * len(header))
    blank = "".join(f" {'':>11}" for _ in RATIO_PEERS)
    for r in raw:
        print(_row("consume", r, blank, "", r.error or r.check))
    for workload in WORKLOADS:
        rows = [r for r in results if r.workload == workload]
        if not rows:
            continue
        peers = {r.engine: r for r in rows if r.engine not in KS_VARIANTS and r.complete}
        for r in rows:
            ratios, ratio_raw = blank, ""
            if r.engine in KS_VARIANTS and r.complete:
                ratios = "".join(
                    f" {_ratio(r.rate, peers[p].rate) if p in peers else '-':>11}" for p in RATIO_PEERS
                )
                if workload != "wordcount" and all(ceilings):
                    ratio_raw = "/".join(f"{(r.rate or 0) / ceiling:.0%}" for ceiling in ceilings)
            print(_row(workload, r, ratios, ratio_raw, status_text(r)))
    print()
    print(
        "rec/s = input records / (output complete - runner STARTED), startup included; word count in sentences/s."
    )
    print(
        "steady = input records / (last output - first output).  1st out: STARTED -> first output record.  "
        "join: STARTED -> the client's first RUNNING state (group joined, internal topics created; kstream_nb "
        "and Kafka Streams only).  cpu: the runner's CPU time (all threads, startup included) until its output "
        "was complete.  ks/<peer>: kstream_nb's rec/s over the peer's (complete runs only).  "
        "ks/raw: against the faster raw consume row with librdkafka's defaults / against the raw row with "
        "kstream_nb's consumer defaults."
    )
    repeated = [r for r in [*raw, *results] if "rates" in r.extra]
    if repeated:
        print(f"each row: the median of {len(repeated[0].extra['rates'])} runs by rec/s; every run's rec/s:")
        for r in repeated:
            print(f"  {r.workload:<10} {r.engine:<34} {', '.join(fmt_rate(x) for x in r.extra['rates'])}")
    for name, note in notes.items():
        print(f"{name}: {note}")


def print_ratios(results: list[Result]) -> None:
    """kstream_nb (the default variant) over each peer, per workload: rec/s, steady rec/s, peak RSS."""
    print()
    print("kstream_nb / peer (rec/s, steady rec/s, peak RSS):")
    for workload in WORKLOADS:
        ks = next((r for r in results if r.workload == workload and r.engine == "kstream_nb"), None)
        if ks is None or not ks.complete:
            continue
        parts = []
        for peer in RATIO_PEERS:
            p = next((r for r in results if r.workload == workload and r.engine == peer and r.complete), None)
            if p is not None:
                parts.append(
                    f"/{peer} {_ratio(ks.rate, p.rate)}, {_ratio(ks.steady_rate, p.steady_rate)}, "
                    f"{_ratio(ks.peak_rss_mib, p.peak_rss_mib)}"
                )
        print(f"  {workload:<10} {'; '.join(parts) or '-'}")


def compare_word_counts(results: list[Result], data: Data, seed: int) -> str:
    """Whether a sample of words has the expected final count in every engine's word count."""
    finals: dict[str, dict[str, int]] = {
        r.engine: r.extra["final_counts"]
        for r in results
        if r.workload == "wordcount" and r.extra.get("final_counts")
    }
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
