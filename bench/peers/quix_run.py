"""Quix Streams runner (bench/.venvs/quix): one Application, defaults except the shared consumer settings.

State is Quix's own (RocksDB, with changelog topics); word count repartitions with ``group_by`` (a Kafka
topic). Late-record warnings are switched off (one log line per late record would dominate the window
workload). See _common.py.
"""

from __future__ import annotations

from _common import parse_args, started
from quixstreams import Application


def main() -> None:
    args = parse_args()
    app = Application(
        broker_address=args.bootstrap,
        consumer_group=args.group,
        auto_offset_reset="earliest",
        state_dir=args.state_dir,
        consumer_extra_config=args.config,
        loglevel="WARNING",
    )
    source = app.topic(args.input, key_deserializer="str", value_deserializer="json")
    sink = app.topic(args.output, key_serializer="str", value_serializer="json")
    sdf = app.dataframe(source)
    threshold = args.threshold
    if args.workload == "filter":
        sdf = sdf.filter(lambda v: v["amount"] > threshold)
        sdf = sdf.apply(lambda v: {**v, "doubled": v["amount"] * 2})
    elif args.workload == "wordcount":

        def count(word, state):
            n = state.get("n", 0) + 1
            state.set("n", n)
            return n

        sdf = sdf.apply(lambda s: s.split(), expand=True)
        sdf = sdf.group_by(lambda w: w, name="word")
        sdf = sdf.apply(count, stateful=True)
    else:
        sdf = sdf.apply(lambda v: v["amount"])
        sdf = (
            sdf.tumbling_window(args.window_ms, grace_ms=args.grace_ms, on_late=lambda *a, **k: False)
            .sum()
            .final()
        )
        sdf = sdf.apply(lambda r: {"start": r["start"], "sum": r["value"]})
    sdf.to_topic(sink)
    started()
    app.run()


if __name__ == "__main__":
    main()
