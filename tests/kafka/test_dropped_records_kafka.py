"""Late-data visibility on Apache Kafka: the same windowed count as on ``memory://`` lists the same late records
(with the broker's partitions and offsets) and the same stream time and oldest open window per task."""

from __future__ import annotations

from collections.abc import Callable

import pytest

import kstream_nb as ks
from kstream_nb.processor.windows import TimeWindows
from tests.kafka.conftest import Names
from tests.kafka_broker import FAST_CLIENT_CONFIG

pytestmark = pytest.mark.kafka


def test_dropped_records_and_task_times_on_kafka(
    kafka_bootstrap: str, names: Names, make_kafka_app: Callable[..., ks.KafkaStreams]
) -> None:
    topic = names("clicks")

    def produce(records: list[tuple[str, int]], timestamps: list[int]) -> None:
        ks.produce(
            topic, records, kafka_bootstrap, partitions=2, timestamps=timestamps, client_config=FAST_CLIENT_CONFIG
        )

    # murmur2 (as Java's producer): key a -> partition 0 (task 0_0), key d -> partition 1 (task 0_1)
    produce([("a", 1), ("d", 1), ("a", 1), ("d", 1)], [1_000, 1_000, 1_020, 1_003])
    produce([("a", 1), ("a", 1)], [1_005, 1_013])
    b = ks.StreamsBuilder()
    b.stream(topic).group_by_key().windowed_by(TimeWindows(10, grace_ms=2)).count(store="counts")
    app = make_kafka_app(b.build(), names("late"))
    app.start().wait_until_running(timeout=60).wait_until_idle(timeout=60)
    # task 0_0 at stream time 1020 (close time 1018): a@1005 misses [1000,1010) by 8 ms; a@1013 is in
    # [1010,1020), still open
    dropped = app.dropped_records()
    rows = dropped[["task", "topic", "partition", "offset", "key", "timestamp", "window_start", "window_end"]]
    assert [tuple(r) for r in rows.itertuples(index=False)] == [("0_0", topic, 0, 2, "a", 1_005, 1_000, 1_010)]
    assert (dropped["stream_time"].iloc[0], dropped["lateness_ms"].iloc[0]) == (1_020, 8)
    times = app.metrics()["task-time"]
    assert (times["0_0"]["stream-time"], times["0_1"]["stream-time"]) == (1_020, 1_003)
    a, d = times["0_0"]["oldest-open-window"], times["0_1"]["oldest-open-window"]
    assert ((a["start"], a["end"]), (d["start"], d["end"])) == ((1_010, 1_020), (1_000, 1_010))
    assert app.metrics()["dropped-records-total"] == 1
