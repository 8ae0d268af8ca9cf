"""Bytewax runner (bench/.venvs/bytewax): one process, one worker, KafkaSource (tail=False: the dataflow
ends at the end of the input) -> operators -> KafkaSink.

JSON is decoded with orjson. Word count keys the stream by word (Bytewax exchanges keyed items between
workers itself; no Kafka topic). The window uses an EventClock on the event's ``ts`` with a 5 s wait and
no system-time component (``now_getter`` constant, no wake-ups), so, like Kafka Streams, only event time
closes windows; unordered (``ordered=False``) as the others. The ``__flush__`` records are dropped before
the window: Bytewax's watermark is per key, and the end of the input closes every window. See _common.py.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import bytewax.operators as op
import orjson
from _common import FLUSH_KEY, parse_args, started
from bytewax.connectors.kafka import KafkaSink, KafkaSinkMessage, KafkaSource
from bytewax.dataflow import Dataflow
from bytewax.operators.windowing import EventClock, TumblingWindower, fold_window
from bytewax.run import cli_main

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def build(args) -> Dataflow:
    flow = Dataflow(f"bench_{args.workload}")
    config = {k: str(v) for k, v in args.config.items()}
    for k in ("session.timeout.ms", "heartbeat.interval.ms"):  # no consumer group here
        config.pop(k, None)
    msgs = op.input("in", flow, KafkaSource([args.bootstrap], [args.input], tail=False, add_config=config))
    sink = KafkaSink([args.bootstrap], args.output)
    threshold = args.threshold
    dumps, loads = orjson.dumps, orjson.loads
    if args.workload == "filter":

        def filter_map(m):
            v = loads(m.value)
            if v["amount"] > threshold:
                return KafkaSinkMessage(m.key, dumps({**v, "doubled": v["amount"] * 2}))
            return None

        out = op.filter_map("filter_map", msgs, filter_map)
    elif args.workload == "wordcount":
        words = op.flat_map("split", msgs, lambda m: loads(m.value).split())
        keyed = op.key_on("by_word", words, lambda w: w)

        def count(n, _word):
            n = (n or 0) + 1
            return n, n

        counts = op.stateful_map("count", keyed, count)
        out = op.map("to_msg", counts, lambda kv: KafkaSinkMessage(kv[0].encode(), dumps(kv[1])))
    else:
        window_ms = args.window_ms
        events = op.filter_map(
            "decode", msgs, lambda m: None if m.key == FLUSH_KEY.encode() else (m.key.decode(), loads(m.value))
        )
        clock = EventClock(
            ts_getter=lambda v: EPOCH + timedelta(milliseconds=v["ts"]),
            wait_for_system_duration=timedelta(milliseconds=args.grace_ms),
            now_getter=lambda: EPOCH,
            to_system_utc=lambda t: None,
        )
        windower = TumblingWindower(length=timedelta(milliseconds=window_ms), align_to=EPOCH)

        def fold(acc, v):
            ts = v["ts"]
            return (ts - ts % window_ms, (acc[1] if acc else 0) + v["amount"])

        def merge(a, b):
            return (a[0], a[1] + b[1])

        sums = fold_window("sum", events, clock, windower, lambda: None, fold, merge, ordered=False)
        out = op.map(
            "to_msg",
            sums.down,
            lambda kv: KafkaSinkMessage(kv[0].encode(), dumps({"start": kv[1][1][0], "sum": kv[1][1][1]})),
        )
    op.output("out", out, sink)
    return flow


def main() -> None:
    args = parse_args()
    flow = build(args)
    started()
    cli_main(flow, workers_per_process=1)


if __name__ == "__main__":
    main()
