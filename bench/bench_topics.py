"""What reading topics as real producers write them costs, each beside a reference measured in the same run.

    python bench/bench_topics.py [--n 50000] [--repeat 3]

On ``memory://`` (its embedded Schema Registry for Avro), medians of ``--repeat`` runs:
- Avro values (``Serdes.avro``) beside JSON: ``ks.produce``, ``ks.read_topic`` and an app
  ``filter -> to`` through to idle;
- ``read_topic`` with the ``auto`` default beside an explicit ``value_serde="json"`` on the same JSON topic;
- the default key serde (``string_or_json``) beside ``json`` for an app keyed by str (a word count);
- ``read_topic(start=...)`` of the last 1% of a partition (found by its time index) beside reading it all;
- ``ks.profile_topic`` (1000 records sampled per partition) beside ``read_topic`` of the whole topic.

This prints numbers; it is not a test.
"""

from __future__ import annotations

import argparse
import itertools
import random
import statistics
import time
from collections.abc import Callable
from typing import Any

import kstream_nb as ks
from kstream_nb.cluster.memory import reset_cluster

ORDER = {
    "type": "record",
    "name": "Order",
    "namespace": "bench",
    "fields": [
        {"name": "user", "type": "string"},
        {"name": "amount", "type": "double"},
        {"name": "qty", "type": "int"},
    ],
}
_ids = itertools.count()


def orders(n: int) -> list[tuple[str, dict[str, Any]]]:
    rng = random.Random(1)
    return [
        (f"u{rng.randrange(1000)}", {"user": f"u{i}", "amount": round(rng.uniform(0, 200), 2), "qty": i % 10})
        for i in range(n)
    ]


def fresh() -> str:
    url = f"memory://bench-topics-{next(_ids)}"
    reset_cluster(url)
    return url


def median_seconds(run: Callable[[], Any], repeat: int) -> float:
    """The median time of ``repeat`` runs after an untimed one (imports, the first schema registrations)."""
    run()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def run_app(topology: ks.Topology, url: str, **config: Any) -> None:
    app = ks.KafkaStreams(topology, application_id=f"bench-{next(_ids)}", bootstrap_servers=url, **config)
    try:
        app.start().wait_until_running(60).wait_until_idle(120)
    finally:
        app.stop(timeout=30)


def filter_topology(value_serde: Any) -> ks.Topology:
    b = ks.StreamsBuilder()
    b.stream("orders", value_serde=value_serde).filter(lambda k, v: v["amount"] > 100).to("big")
    return b.build()


def word_count(key_serde: str) -> ks.Topology:
    b = ks.StreamsBuilder()
    b.stream("orders").group_by(lambda k, v: v["user"][:3], key_serde=key_serde).count().to_stream().to("c")
    return b.build()


def row(what: str, n: int, ours: float, reference: float, ref_name: str) -> None:
    print(f"{what:<44} {n / ours:>12,.0f}/s {n / reference:>12,.0f}/s {ours / reference:>7.2f}  ({ref_name})")


def timed(what: str, ours: float, reference: float, ref_name: str) -> None:
    print(f"{what:<44} {ours * 1e3:>11.1f} ms {reference * 1e3:>11.1f} ms {ours / reference:>7.3f}  ({ref_name})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=50_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    n, repeat, records = args.n, args.repeat, orders(args.n)
    avro = ks.Serdes.avro(ORDER)
    print(f"{'case':<44} {'this':>14} {'reference':>14} {'time ratio':>7}")

    def produce(serde: Any) -> Callable[[], Any]:
        return lambda: ks.produce("orders", records, bootstrap_servers=fresh(), value_serde=serde)

    row("produce, Avro (reference: JSON)", n, median_seconds(produce(avro), repeat),
        median_seconds(produce("json"), repeat), "JSON")  # fmt: skip

    json_url, avro_url = fresh(), fresh()
    ks.produce("orders", records, bootstrap_servers=json_url)
    ks.produce("orders", records, bootstrap_servers=avro_url, value_serde=avro)
    row("read_topic, Avro (reference: JSON)", n,
        median_seconds(lambda: ks.read_topic("orders", avro_url, value_serde="avro"), repeat),
        median_seconds(lambda: ks.read_topic("orders", json_url, value_serde="json"), repeat), "JSON")  # fmt: skip
    row("read_topic, auto (reference: explicit JSON)", n,
        median_seconds(lambda: ks.read_topic("orders", json_url), repeat),
        median_seconds(lambda: ks.read_topic("orders", json_url, value_serde="json"), repeat), "JSON")  # fmt: skip

    def app_on(url: str, topology: ks.Topology) -> Callable[[], None]:
        return lambda: run_app(topology, url)

    row("app filter -> to, Avro (reference: JSON)", n,
        median_seconds(app_on(avro_url, filter_topology("avro")), repeat),
        median_seconds(app_on(json_url, filter_topology("json")), repeat), "JSON")  # fmt: skip
    row("app group_by(str).count, string_or_json keys", n,
        median_seconds(app_on(json_url, word_count("string_or_json")), repeat),
        median_seconds(app_on(json_url, word_count("json")), repeat), "JSON keys")  # fmt: skip

    timed_url = fresh()
    big = n * 10
    first_ms = int(time.time() * 1000) - big  # within the retention (records stamped in 1970 would be deleted)
    ks.produce("timed", [("k", i) for i in range(big)], bootstrap_servers=timed_url, timestamps=first_ms)
    last = first_ms + big - big // 100
    read_tail = median_seconds(lambda: ks.read_topic("timed", timed_url, start=last), repeat)
    read_all = median_seconds(lambda: ks.read_topic("timed", timed_url), repeat)
    timed(f"read_topic(start=) of the last 1% of {big:,}", read_tail, read_all, "read it all")

    profile_url = fresh()
    ks.produce("orders", records * 4, bootstrap_servers=profile_url, partitions=4)
    prof = median_seconds(lambda: ks.profile_topic("orders", profile_url, sample=1000), repeat)
    full = median_seconds(lambda: ks.read_topic("orders", profile_url, value_serde="json"), repeat)
    timed(f"profile_topic of {4 * n:,} records, sample 1000", prof, full, "read_topic of it all")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
