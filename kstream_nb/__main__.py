"""Command line: ``python -m kstream_nb demo`` and ``kstream-nb kafka start|stop|status`` (also installed as
``kstream-nb``)."""

from __future__ import annotations

import argparse
import sys

from kstream_nb.cluster.local_kafka import (
    DEFAULT_DATA_DIR,
    DEFAULT_PORT,
    KAFKA_VERSION,
    LocalKafka,
    LocalKafkaError,
)


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
    kafka = sub.add_parser(
        "kafka",
        help="a local single-node Apache Kafka: start, stop, status",
        description=f"Runs Apache Kafka {KAFKA_VERSION} (KRaft, one node) on 127.0.0.1; its jars are fetched "
        "once from Maven Central (needs Java 17+ and Maven).",
    )
    kafka.add_argument("action", choices=["start", "stop", "status"])
    kafka.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"client port (default {DEFAULT_PORT})")
    kafka.add_argument(
        "--data-dir", default=str(DEFAULT_DATA_DIR), help=f"data, log and pid file (default {DEFAULT_DATA_DIR})"
    )
    kafka.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for it to answer (default 60)")
    kafka.add_argument("--heap", default="1g", help="the broker's maximum Java heap at start (default 1g)")
    return parser


def run_kafka(action: str, port: int, data_dir: str, timeout: float, heap: str = "1g") -> int:
    """``kstream-nb kafka ACTION``: prints what happened; exit code 1 with the reason when it failed, 3 for
    ``status`` when the broker is not running."""
    broker = LocalKafka(data_dir, port, heap=heap)
    try:
        if action == "start":
            was_running = broker.status().running
            broker.start(timeout, quiet=False)
            state = "already running" if was_running else "started"
            print(f"Kafka {KAFKA_VERSION} {state} on {broker.bootstrap_servers} (data {broker.data_dir})")
            print(f"use it with bootstrap_servers={broker.bootstrap_servers!r}; stop it: kstream-nb kafka stop")
        elif action == "stop":
            print("Kafka stopped" if broker.stop() else f"Kafka was not running (data {broker.data_dir})")
        else:
            status = broker.status()
            print(status)
            return 0 if status.running else 3
    except LocalKafkaError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


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
    if args.command == "kafka":
        return run_kafka(args.action, args.port, args.data_dir, args.timeout, args.heap)
    parser.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main())
