"""The benchmark's data: topics, the generated events and sentences, and checking every engine's output."""

from __future__ import annotations

import random
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from itertools import accumulate
from typing import Any

from .common import (
    BASE_TS,
    FLUSH_AFTER_MS,
    FLUSH_KEY,
    PARTITIONS,
    SPAN_MS,
    THRESHOLD,
    WINDOW_MS,
    Result,
)


def create_topics(bootstrap: str, names: list[str]) -> None:
    """Creates the input and output topics, each with ``PARTITIONS`` partitions and no retention limit."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    # tansu describes only the configs given at creation, and Quix reads retention.ms of its input topics
    # (for its changelogs): give them explicitly. -1: the events' 2023 timestamps must not expire.
    config = {"cleanup.policy": "delete", "retention.ms": "-1", "retention.bytes": "-1"}
    futures = admin.create_topics([NewTopic(n, PARTITIONS, 1, config=config) for n in names])
    for f in futures.values():
        f.result(30)


@dataclass
class Data:
    """What was written, and the results every engine must produce from it."""

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
    """``n`` distinct made-up words of 1-4 syllables."""
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


def expected_outputs(workload: str, data: Data) -> int:
    """How many output records a complete run of ``workload`` writes."""
    if workload == "filter":
        return data.expected_filter
    if workload == "wordcount":
        return data.n_words
    return len(data.expected_windows)


def check_output(workload: str, records: list[tuple[bytes | None, bytes | None]], data: Data, res: Result) -> str:
    """``ok``, or what is wrong with an output topic's records (word count: keeps the final counts in
    ``res.extra["final_counts"]``)."""
    import orjson

    loads = orjson.loads
    problems: list[str] = []
    if workload == "filter":
        if len(records) != data.expected_filter:
            problems.append(f"{len(records)} records, expected {data.expected_filter}")
        bad = 0
        for _k, v in records:
            d = loads(v or b"null")
            if not (isinstance(d, dict) and d["amount"] > THRESHOLD and d["doubled"] == 2 * d["amount"]):
                bad += 1
        if bad:
            problems.append(f"{bad} wrong values")
    elif workload == "wordcount":
        final: dict[str, int] = {}
        for k, v in records:
            word, n = (k or b"").decode(), loads(v or b"0")
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
            d = loads(v or b"null")
            if not isinstance(d, dict):
                dup += 1  # a tombstone: counted with the duplicates
                continue
            key = ((k or b"").decode(), d["start"])
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
