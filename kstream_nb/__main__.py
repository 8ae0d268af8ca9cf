"""Command line: ``python -m kstream_nb demo`` (also installed as ``kstream-nb``)."""

from __future__ import annotations

import argparse
import sys


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kstream-nb", description="kstream_nb: Kafka Streams in Python.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    demo = sub.add_parser(
        "demo",
        help="run word count and revenue per user live on the embedded cluster",
        description="Runs two stream apps on the embedded memory:// cluster, feeds them for a few seconds "
        "and prints live results. Ctrl-C stops cleanly.",
    )
    demo.add_argument("--seconds", type=float, default=8.0, help="how long the producer feeds (default 8)")
    demo.add_argument("--seed", type=int, default=42, help="seed of the generated data (default 42)")
    demo.add_argument("--rate", type=int, default=400, help="sentences produced per second (default 400)")
    demo.add_argument("--interval", type=float, default=0.5, help="seconds between screen updates (default 0.5)")
    demo.add_argument(
        "--no-clear", action="store_true", help="print updates one after another instead of redrawing"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "demo":
        if args.seconds < 0 or args.rate <= 0 or args.interval <= 0:
            parser.error("--seconds must be >= 0, --rate and --interval > 0")
        from kstream_nb.demo import run_demo

        return run_demo(
            seconds=args.seconds,
            seed=args.seed,
            rate=args.rate,
            interval=args.interval,
            clear=False if args.no_clear else None,
        )
    parser.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main())
