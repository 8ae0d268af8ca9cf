"""The ceiling: a bare confluent-kafka consumer reading every partition of a topic to its end and decoding
each value (``--decoder json`` or ``orjson``), nothing else. Prints ``STARTED t`` and ``DONE t records``
(time.monotonic()). Usage: raw_consume.py BOOTSTRAP TOPIC CONFIG_JSON DECODER"""

from __future__ import annotations

import json
import sys
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition


def main() -> None:
    bootstrap, topic, config, decoder = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), sys.argv[4]
    if decoder == "orjson":
        import orjson

        loads = orjson.loads
    else:
        loads = json.loads
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"raw-{time.time_ns()}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            **config,
        }
    )
    partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
    print(f"STARTED {time.monotonic():.6f}", flush=True)
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
    open_parts, n = set(partitions), 0
    while open_parts:
        for msg in consumer.consume(10_000, 0.5):
            err = msg.error()
            if err is None:
                loads(msg.value())
                n += 1
            elif err.code() == KafkaError._PARTITION_EOF:
                open_parts.discard(msg.partition())
            else:
                raise RuntimeError(str(err))
    print(f"DONE {time.monotonic():.6f} {n}", flush=True)
    consumer.close()


if __name__ == "__main__":
    main()
