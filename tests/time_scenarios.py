"""Time-addressed reads, checked the same way on ``memory://`` and on Apache Kafka (tests/cluster and
tests/kafka call these with their cluster): records with known timestamps are produced, and what
``read_topic(start=, end=)`` returns is compared with a recount of the produced records in pandas.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pandas as pd

from kstream_nb.cluster.connection import connect
from kstream_nb.cluster.records import TopicPartition
from kstream_nb.cluster.topic_io import produce, read_topic
from kstream_nb.time_bounds import now_ms

#: out-of-order timestamps of one partition, in offset order
OUT_OF_ORDER = [1000, 5000, 2000, 3000, 6000, 4000, 4000, 7000]
#: what Apache Kafka 4.4 answers to ListOffsets by timestamp for a partition holding OUT_OF_ORDER, per target
#: (offset; 8 = the end offset, Kafka's "none"): the earliest offset stamped >= the target, whatever comes
#: later (2500 -> offset 1, stamped 5000, not offset 3, stamped 3000). Measured on the session broker, in one
#: producer flush and in one flush per record alike; memory:// must answer the same.
KAFKA_ANSWERS = {
    0: 0, 1000: 0, 1001: 1, 1500: 1, 2000: 1, 2500: 1, 4000: 1, 5000: 1,
    5001: 4, 6000: 4, 6001: 7, 7000: 7, 7001: 8,
}  # fmt: skip


def recount_offset(timestamps: list[int], target: int) -> int:
    """The earliest offset stamped >= ``target`` (the end when none is), counted from the list."""
    frame = pd.DataFrame({"ts": timestamps})
    hits = frame.index[frame["ts"] >= target]
    return int(hits[0]) if len(hits) else len(frame)


def produce_known(
    bootstrap: str, topic: str, timestamps_by_partition: dict[int, list[int]], partitions: int | None = None
) -> pd.DataFrame:
    """Writes one record per timestamp to its partition; returns what was written (partition, n, ts)."""
    rows = [
        {"partition": p, "n": i, "timestamp": ts}
        for p, stamps in sorted(timestamps_by_partition.items())
        for i, ts in enumerate(stamps)
    ]
    frame = pd.DataFrame(rows)
    partitions = partitions or max(timestamps_by_partition) + 1
    sent = frame.assign(key=[f"k{p}-{n}" for p, n in zip(frame["partition"], frame["n"])])
    sent = sent.assign(value=[{"p": p, "n": n} for p, n in zip(frame["partition"], frame["n"])])
    produce(topic, sent[["key", "value", "timestamp", "partition"]], bootstrap, partitions=partitions)
    return frame


def _got(frame: pd.DataFrame) -> list[tuple[int, int, int]]:
    return [(v["p"], v["n"], ts) for v, ts in zip(frame["value"], frame["timestamp"])]


def _want(written: pd.DataFrame) -> list[tuple[int, int, int]]:
    ordered = written.sort_values(["partition", "n"])
    return list(zip(ordered["partition"], ordered["n"], ordered["timestamp"]))


def check_bounds_of_every_kind(bootstrap: str, topic: str) -> None:
    """int ms, naive and aware datetimes, ISO strings (Z, offset, naive) and relative durations select the
    records a pandas filter of the produced ones selects; ``time`` is the timestamp as an aware datetime."""
    now = now_ms()
    minute = 60_000
    # three partitions, in time order each, 90 s off the minute so no record sits near a relative bound
    base = now - 180 * minute + 90_000
    stamps = {
        p: [base + (3 * i + p) * minute for i in range(60) if base + (3 * i + p) * minute < now] for p in range(3)
    }
    written = produce_known(bootstrap, topic, stamps)

    def recount(lo: int | None, hi: int | None) -> list[tuple[int, int, int]]:
        mask = pd.Series(True, index=written.index)
        if lo is not None:
            mask &= written["timestamp"] >= lo
        if hi is not None:
            mask &= written["timestamp"] < hi
        return _want(written[mask])

    everything = read_topic(topic, bootstrap)
    assert _got(everything) == recount(None, None)
    expected_times = [datetime.fromtimestamp(ts / 1000, UTC) for ts in everything["timestamp"]]
    assert [t.to_pydatetime() for t in everything["time"]] == expected_times
    assert all(t.tzinfo is not None for t in everything["time"])

    lo_ms, hi_ms = base + 40 * minute, base + 100 * minute  # record times: exact hits on both bounds
    lo_dt = datetime.fromtimestamp(lo_ms / 1000, UTC)
    hi_dt = datetime.fromtimestamp(hi_ms / 1000, UTC)
    paris = timezone(timedelta(hours=1))
    for start, end in [
        (lo_ms, hi_ms),
        (lo_dt.replace(tzinfo=None), hi_dt.replace(tzinfo=None)),  # naive: UTC
        (lo_dt.astimezone(paris), hi_dt.astimezone(paris)),
        (pd.Timestamp(lo_ms, unit="ms", tz="UTC"), pd.Timestamp(hi_ms, unit="ms", tz="America/New_York")),
        (lo_dt.isoformat().replace("+00:00", "Z"), hi_dt.astimezone(paris).isoformat()),
        (lo_dt.replace(tzinfo=None).isoformat(), hi_dt.replace(tzinfo=None).isoformat()),
    ]:
        got = read_topic(topic, bootstrap, start=start, end=end)
        assert _got(got) == recount(lo_ms, hi_ms), (start, end)
        assert got["timestamp"].min() == lo_ms
    assert _got(read_topic(topic, bootstrap, start=lo_ms)) == recount(lo_ms, None)
    assert _got(read_topic(topic, bootstrap, end=hi_ms)) == recount(None, hi_ms)
    # relative bounds count back from the time of the call (later than `now`; no record within 90 s of one)
    assert _got(read_topic(topic, bootstrap, start="-1h", end="-10m")) == recount(
        now - 60 * minute, now - 10 * minute
    )
    assert _got(read_topic(topic, bootstrap, start="-2h")) == recount(now - 120 * minute, None)
    assert read_topic(topic, bootstrap, start=now + 1).empty
    assert read_topic(topic, bootstrap, end=base).empty
    assert read_topic(topic, bootstrap, start=hi_ms, end=lo_ms).empty
    # the last 2 records of each partition, none before the start
    tail = read_topic(topic, bootstrap, start=lo_ms, end=hi_ms, from_beginning=False, max_records=2)
    want = written[(written["timestamp"] >= lo_ms) & (written["timestamp"] < hi_ms)]
    assert _got(tail) == _want(want.groupby("partition").tail(2))


def check_out_of_order(bootstrap: str, topic: str) -> None:
    """A partition whose timestamps go back and forth: the cluster answers ``KAFKA_ANSWERS`` (which the
    recount agrees with), sent in one flush (partition 0) and one flush per record (partition 1); reads by time
    return the offset range between the two answers, in offset order."""
    produce_known(bootstrap, topic, {0: OUT_OF_ORDER}, partitions=2)
    for n, ts in enumerate(OUT_OF_ORDER):
        produce(
            topic,
            pd.DataFrame([{"key": f"k1-{n}", "value": {"p": 1, "n": n}, "timestamp": ts, "partition": 1}]),
            bootstrap,
        )
    admin = connect(bootstrap).admin()
    tps = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
    answers = {target: admin.offsets_for_time(tps, target) for target in KAFKA_ANSWERS}
    for target, offset in KAFKA_ANSWERS.items():
        assert offset == recount_offset(OUT_OF_ORDER, target)
        assert answers[target] == {tps[0]: offset, tps[1]: offset}, target
    got = read_topic(topic, bootstrap, start=2500, end=5001)
    # offsets 1..3: 5000, then the older 2000 and 3000; 6000 at offset 4 ends the range, and the two records
    # stamped 4000 after it are not read (kcat's e@: a partition stops at its first record at or past the end)
    assert list(zip(got["partition"], got["offset"], got["timestamp"])) == [
        (p, o, OUT_OF_ORDER[o]) for p in (0, 1) for o in range(KAFKA_ANSWERS[2500], KAFKA_ANSWERS[5001])
    ]
