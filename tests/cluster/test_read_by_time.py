"""read_topic(start=, end=) on the embedded cluster: its own time index answers as Kafka's does
(tests/kafka/test_read_by_time_kafka.py runs the same checks on Apache Kafka)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from kstream_nb.cluster.base import TopicSpec
from kstream_nb.cluster.memory import MemoryCluster, get_cluster
from kstream_nb.cluster.records import TopicPartition
from kstream_nb.cluster.topic_io import produce, read_topic
from kstream_nb.time_bounds import to_epoch_ms
from tests.time_scenarios import OUT_OF_ORDER, check_bounds_of_every_kind, check_out_of_order, recount_offset


def test_bounds_of_every_kind(bootstrap: str) -> None:
    check_bounds_of_every_kind(bootstrap, "clicks")


def test_out_of_order_timestamps_answer_as_kafka(bootstrap: str) -> None:
    check_out_of_order(bootstrap, "late")


def test_the_index_spans_segments_columnar_batches_compaction_and_retention(bootstrap: str) -> None:
    """Small segments (several per partition), a columnar batch, then compaction and retention: each answer
    is still the earliest surviving offset stamped >= the target."""
    cluster = MemoryCluster("ti", segment_records=3)
    admin = cluster.admin()
    admin.create_topics([TopicSpec("t", 1, {"cleanup.policy": "compact"})])
    producer = cluster.producer()
    stamps = [50, 10, 70, 20, 90, 30, 60, 80, 40, 100]
    for i, ts in enumerate(stamps):
        producer.send("t", f"k{i % 4}".encode(), str(i).encode(), ts)
    tp = TopicPartition("t", 0)
    for target in range(0, 110, 5):
        assert admin.offsets_for_time([tp], target)[tp] == recount_offset(stamps, target), target
    cluster.compact("t", roll=True)
    log = cluster.partition_log(tp)
    assert log is not None
    survivors = {r.offset: r.timestamp for batch in log.fetch(0, 100)[0] for r in batch.records}
    assert len(survivors) == 4  # the last record of each key
    for target in range(0, 110, 5):
        later = [o for o, ts in survivors.items() if ts >= target]
        assert admin.offsets_for_time([tp], target)[tp] == (min(later) if later else 10), target
    produce("cols", pd.DataFrame({"amount": [1, 2, 3, 4], "timestamp": [300, 100, 400, 200]}), bootstrap)
    cols = get_cluster(bootstrap).admin()
    ctp = TopicPartition("cols", 0)
    assert [cols.offsets_for_time([ctp], t)[ctp] for t in (50, 150, 300, 350, 401)] == [0, 0, 0, 2, 4]


def test_retention_moves_answers_to_the_log_start() -> None:
    cluster = MemoryCluster("ti-ret", segment_records=2)
    admin = cluster.admin()
    admin.create_topics([TopicSpec("t", 1, {"retention.ms": "1000"})])
    producer = cluster.producer()
    for ts in OUT_OF_ORDER:
        producer.send("t", None, b"x", ts)
    tp = TopicPartition("t", 0)
    cluster.apply_retention("t")
    start = admin.beginning_offsets([tp])[tp]
    assert start > 0
    assert admin.offsets_for_time([tp], 0)[tp] == start


def test_bad_bounds_name_the_argument(bootstrap: str) -> None:
    produce("t", [1], bootstrap, timestamps=[5])
    with pytest.raises(ValueError, match="start: cannot read 'yesterday'"):
        read_topic("t", bootstrap, start="yesterday")
    with pytest.raises(ValueError, match="end must be"):
        read_topic("t", bootstrap, end=[5])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="end: cannot read '-ten minutes'"):
        read_topic("t", bootstrap, end="-ten minutes")


def test_time_bounds_parse_as_documented() -> None:
    """Naive means UTC, ISO strings with and without offsets, relative to a given now."""
    assert to_epoch_ms("2026-11-26T10:00:00Z") == 1_795_687_200_000
    assert to_epoch_ms("2026-11-26T10:00:00") == 1_795_687_200_000
    assert to_epoch_ms("2026-11-26T11:00:00+01:00") == 1_795_687_200_000
    assert to_epoch_ms("2026-11-26") == 1_795_651_200_000
    assert to_epoch_ms("-1h", now=10_000_000) == 10_000_000 - 3_600_000
    assert to_epoch_ms("-90s", now=100_000) == 10_000
    assert to_epoch_ms(pd.Timestamp("2026-11-26 10:00:00.123456")) == 1_795_687_200_123
    assert to_epoch_ms(np.datetime64("2026-11-26T10:00:00")) == 1_795_687_200_000
    assert to_epoch_ms("1795687200000") == to_epoch_ms(1_795_687_200_000.0) == 1_795_687_200_000
    with pytest.raises(ValueError, match="cannot read '10m'"):  # pandas would read 00:10 of year 1
        to_epoch_ms("10m")
