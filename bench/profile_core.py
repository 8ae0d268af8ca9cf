"""Profiles one bench case on the stream thread (cProfile only sees the thread it runs in).

    python bench/profile_core.py --case a --n 50000 [--sort cumtime] [--limit 30]

Wraps ``StreamThread.run`` in a cProfile.Profile for the duration of the measured run (no runtime edits).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_core

from kstream_nb.runtime import stream_thread


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--case", default="a", choices=["a", "b", "c"])
    parser.add_argument("--n", type=int, default=50_000)
    parser.add_argument("--sort", default="cumtime")
    parser.add_argument("--limit", type=int, default=35)
    args = parser.parse_args()

    profiles: list[cProfile.Profile] = []
    original = stream_thread.StreamThread.run

    def profiled_run(self: Any) -> None:
        prof = cProfile.Profile()
        profiles.append(prof)
        prof.runcall(original, self)

    stream_thread.StreamThread.run = profiled_run  # type: ignore[method-assign]
    bench_core.main(["--n", str(args.n), "--cases", args.case])
    stats = pstats.Stats(profiles[-1])
    stats.sort_stats(args.sort).print_stats(args.limit)
    return 0


if __name__ == "__main__":
    sys.exit(main())
