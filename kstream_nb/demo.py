"""A terminal demo: word count and revenue per user, live on the embedded cluster.

``python -m kstream_nb demo`` starts two apps on background threads of this process, feeds their input
topics from a producer thread for a few seconds, prints live results about twice a second, then drains
both apps, prints a final summary and stops them. Ctrl-C stops everything cleanly as well (the main loop
catches ``KeyboardInterrupt``; no signal handler is installed).

The generated data depend only on ``seed``: the i-th sentence/order is the same in every run, so the
final ``FINAL ...`` line can be checked against a plain recount of the first ``sentences``/``orders``.
"""

from __future__ import annotations

import json
import random
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any, TextIO

from kstream_nb.cluster.memory import reset_cluster
from kstream_nb.cluster.topic_io import produce
from kstream_nb.dsl.builder import StreamsBuilder
from kstream_nb.runtime.app import KafkaStreams
from kstream_nb.topology.topology import Topology

WORDS = (
    "stream", "table", "window", "join", "partition", "task", "thread", "record", "key", "value", "offset",
    "topic", "state", "store", "changelog", "commit", "punctuate", "grace", "session", "hopping", "tumbling",
    "kafka", "python", "jupyter", "notebook",
)  # fmt: skip
USERS = ("alice", "bob", "carol", "dave", "erin")
PARTITIONS = 3


def generate_sentences(seed: int, start: int, n: int) -> list[str]:
    """Sentences ``start .. start+n-1`` of the stream for ``seed`` (each depends only on seed and index)."""
    out = []
    for i in range(start, start + n):
        rng = random.Random(seed * 1_000_003 + i)
        out.append(" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 9))))
    return out


def generate_orders(seed: int, start: int, n: int) -> list[tuple[str, dict[str, Any]]]:
    """Orders ``start .. start+n-1`` as ``(user, {"order", "user", "cents"})`` (amounts in integer cents)."""
    out = []
    for i in range(start, start + n):
        rng = random.Random(seed * 2_000_003 + i)
        user = rng.choice(USERS)
        out.append((user, {"order": i, "user": user, "cents": rng.randint(100, 20_000)}))
    return out


def expected_word_counts(seed: int, sentences: int) -> dict[str, int]:
    """What the word-count app must hold after processing the first ``sentences`` sentences."""
    return dict(Counter(w for s in generate_sentences(seed, 0, sentences) for w in s.split()))


def expected_revenue(seed: int, orders: int) -> dict[str, int]:
    """Cents per user after the first ``orders`` orders."""
    totals: dict[str, int] = {}
    for user, order in generate_orders(seed, 0, orders):
        totals[user] = totals.get(user, 0) + order["cents"]
    return totals


def word_count_topology() -> Topology:
    b = StreamsBuilder()
    (
        b.stream("sentences")
        .flat_map_values(str.split)
        .group_by(lambda k, w: w)
        .count(store="counts")
        .to_stream()
        .to("word-counts")
    )
    return b.build()


def revenue_topology() -> Topology:
    b = StreamsBuilder()
    (
        b.stream("orders")
        .group_by_key()
        .aggregate(lambda: 0, lambda user, order, cents: cents + order["cents"], store="revenue")
        .to_stream()
        .to("revenue-per-user")
    )
    return b.build()


class Feeder(threading.Thread):
    """Produces batches of sentences and orders at a steady rate until stopped or time is up."""

    def __init__(self, servers: str, seed: int, seconds: float, rate: int) -> None:
        super().__init__(name="kstream-demo-producer", daemon=True)
        self.servers, self.seed, self.seconds, self.rate = servers, seed, seconds, rate
        self.sentences = 0
        self.orders = 0
        self.stop_event = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        tick = 0.05
        per_tick = max(1, int(self.rate * tick))
        deadline = time.monotonic() + self.seconds
        try:
            while not self.stop_event.is_set() and time.monotonic() < deadline:
                n = per_tick
                produce("sentences", generate_sentences(self.seed, self.sentences, n), self.servers)
                self.sentences += n
                m = max(1, n // 2)
                produce("orders", generate_orders(self.seed, self.orders, m), self.servers)
                self.orders += m
                self.stop_event.wait(tick)
        except BaseException as e:  # reported by the main thread
            self.error = e


def _compact(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), sort_keys=True)


def _dollars(cents: int) -> str:
    return f"${cents / 100:,.2f}"


def _lag(app: KafkaStreams) -> int:
    return sum(app.lag().values())


def _render(elapsed: float, feeder: Feeder, words: KafkaStreams, revenue: KafkaStreams, top: int) -> list[str]:
    wm, rm = words.metrics(), revenue.metrics()
    counts = sorted(words.store("counts").all(), key=lambda kv: (-kv[1], kv[0]))[:top]
    per_user = sorted(revenue.store("revenue").all())
    lines = [
        f"t={elapsed:5.1f}s  produced: {feeder.sentences} sentences, {feeder.orders} orders",
        f"  word-count : {wm['state']:<11} {wm['process-rate']:9.0f} rec/s  processed {wm['process-total']:>7}"
        f"  lag {_lag(words)}",
        f"  revenue    : {rm['state']:<11} {rm['process-rate']:9.0f} rec/s  processed {rm['process-total']:>7}"
        f"  lag {_lag(revenue)}",
        "  top words  : " + ", ".join(f"{w}={c}" for w, c in counts),
        "  revenue    : " + ", ".join(f"{u}={_dollars(c)}" for u, c in per_user),
    ]
    return lines


def run_demo(
    seconds: float = 8.0,
    seed: int = 42,
    rate: int = 400,
    interval: float = 0.5,
    top: int = 8,
    servers: str = "memory://demo",
    out: TextIO | None = None,
    clear: bool | None = None,
) -> int:
    """Runs the demo; returns the process exit code (0 when both apps stopped cleanly)."""
    stream = out if out is not None else sys.stdout
    if clear is None:
        clear = stream.isatty()
    echo: Callable[[str], None] = lambda s: print(s, file=stream, flush=True)  # noqa: E731

    reset_cluster(servers)
    produce("sentences", [], servers, partitions=PARTITIONS)
    produce("orders", [], servers, partitions=PARTITIONS)
    words = KafkaStreams(word_count_topology(), application_id="demo-wordcount", bootstrap_servers=servers)
    revenue = KafkaStreams(revenue_topology(), application_id="demo-revenue", bootstrap_servers=servers)
    feeder = Feeder(servers, seed, seconds, rate)
    echo(f"kstream_nb demo on {servers}: word count + revenue per user, {seconds:g}s, seed {seed} (Ctrl-C stops)")
    words.start()
    revenue.start()
    interrupted = False
    started = time.monotonic()
    try:
        words.wait_until_running()
        revenue.wait_until_running()
        feeder.start()
        while True:
            elapsed = time.monotonic() - started
            lines = _render(elapsed, feeder, words, revenue, top)
            if clear:
                stream.write("\x1b[H\x1b[2J")
            echo("\n".join(lines))
            if not feeder.is_alive():
                break
            time.sleep(interval)
        if feeder.error is not None:
            raise feeder.error
        words.wait_until_idle(timeout=60)
        revenue.wait_until_idle(timeout=60)
    except KeyboardInterrupt:
        interrupted = True
        echo("\ninterrupted: stopping")
    except BaseException:
        feeder.stop_event.set()
        words.stop(timeout=30)
        revenue.stop(timeout=30)
        raise
    finally:
        feeder.stop_event.set()
        if feeder.is_alive():
            feeder.join()
    ok = True
    if not interrupted:
        final_words = dict(words.store("counts").all())
        final_revenue = dict(revenue.store("revenue").all())
        echo("\nfinal results")
        echo("  top words : " + ", ".join(f"{w}={c}" for w, c in Counter(final_words).most_common(top)))
        echo("  revenue   : " + ", ".join(f"{u}={_dollars(c)}" for u, c in sorted(final_revenue.items())))
        ok = final_words == expected_word_counts(seed, feeder.sentences) and final_revenue == expected_revenue(
            seed, feeder.orders
        )
        echo(f"  check     : {'results match a plain recount of the input' if ok else 'MISMATCH with recount'}")
        echo(
            f"FINAL seed={seed} sentences={feeder.sentences} orders={feeder.orders} "
            f"total_words={sum(final_words.values())} words={_compact(final_words)} "
            f"revenue_cents={_compact(final_revenue)}"
        )
    stopped = words.stop(timeout=30) & revenue.stop(timeout=30)
    echo(f"stopped: word-count={words.state.value} revenue={revenue.state.value}")
    reset_cluster(servers)
    return 0 if stopped and ok else 1
