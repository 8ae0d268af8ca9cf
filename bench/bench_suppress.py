"""Suppression buffers: records/s through ``suppress(until_time_limit(...))`` unbounded, bounded by records
and bounded by bytes, beside the same table without suppress (the reference, same run).

    python bench/bench_suppress.py --keys 5000 --updates 3

A table of ``--keys`` distinct keys, each updated ``--updates`` times, piped through the
TopologyTestDriver (no cluster: only the processors and the buffer's store are timed). The time limit and
the bounds are larger than the input, so every update stays buffered until the end: the bounds are checked
at every record without ever being hit (the buffer grows to ``--keys`` entries).

This prints numbers; it is not a test.
"""

from __future__ import annotations

import argparse
import time

import kstream_nb as ks
from kstream_nb.processor.suppress import BufferConfig, until_time_limit

NEVER = 10**12


def run(keys: int, updates: int, buffer: BufferConfig | None) -> float:
    """Seconds to pipe ``keys * updates`` updates through a table suppressed with ``buffer`` (None: none)."""
    b = ks.StreamsBuilder()
    table = b.table("in")
    if buffer is not None:
        table = table.suppress(until_time_limit(NEVER, buffer))
    table.to_stream().to("out")
    with ks.TopologyTestDriver(b.build()) as driver:
        topic = driver.create_input_topic("in")
        start = time.perf_counter()
        for round_ in range(updates):
            for k in range(keys):
                topic.pipe_input(f"k{k}", {"round": round_, "k": k}, timestamp=round_ * keys + k)
        return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keys", type=int, default=5000)
    parser.add_argument("--updates", type=int, default=3)
    args = parser.parse_args()
    n = args.keys * args.updates
    cases = {
        "no suppress (reference)": None,
        "unbounded": BufferConfig.unbounded(),
        "max_records": BufferConfig.with_max_records(NEVER),
        "max_bytes": BufferConfig.with_max_bytes(NEVER),
    }
    reference = None
    print(f"{n:,} updates of {args.keys:,} keys")
    for name, buffer in cases.items():
        seconds = run(args.keys, args.updates, buffer)
        reference = reference or seconds
        print(f"{name:24} {n / seconds:>10,.0f} records/s   time x{seconds / reference:.2f} of the reference")


if __name__ == "__main__":
    main()
