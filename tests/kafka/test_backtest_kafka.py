"""A backtest over a topic on Apache Kafka 4.4 bounded by time, in each of issue 12's forms (ISO string,
datetime, epoch ms, "-1h"): only the records with ``start <= timestamp < end`` count, checked against a
pandas recount of what was written, out-of-order timestamps included (the broker's time index gives the
first offset; every record's own timestamp decides)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import datetime, timezone
from typing import Any

import pandas as pd
import pytest

import kstream_nb as ks
from tests.kafka.conftest import Names
from tests.kafka_broker import FAST_CLIENT_CONFIG

pytestmark = pytest.mark.kafka

MINUTE = 60_000


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    """The Spark session of the suite (``tests/spark/conftest.py`` makes the same one and stops it)."""
    from kstream_nb.spark.session import SparkSetupError, spark_session

    try:
        yield spark_session("local[2]", app_name="kstream_nb-tests", fast_start=True)
    except SparkSetupError as e:
        pytest.fail(f"this test needs pyspark, pyarrow and Java 17+: {e}", pytrace=False)


def build(topic: str) -> ks.Topology:
    b = ks.StreamsBuilder()
    b.stream(topic).group_by_key().count(store="counts")
    return b.build()


def test_backtest_bounded_by_time(spark: Any, kafka_bootstrap: str, names: Names) -> None:
    topic = names("clicks")
    now = int(time.time() * 1000)
    # one record a minute from 3 h ago to 1 h 5 min ago, and from 55 min ago on: none within 5 min of
    # "-1h", so that the clock moving between here and the backtest cannot change which side one falls on
    stamps = [now - 180 * MINUTE + i * MINUTE for i in range(116)] + [
        now - 55 * MINUTE + i * MINUTE for i in range(50)
    ]
    written = [(f"user-{i % 5}", ts) for i, ts in enumerate(stamps)]
    # written last, with older timestamps: one inside the bounds below, one before them
    written += [("user-late", now - 150 * MINUTE), ("user-late", now - 170 * MINUTE)]
    ks.produce(topic, [ks.Record(k, {"n": 1}, ts) for k, ts in written], bootstrap_servers=kafka_bootstrap,
               partitions=2, client_config=FAST_CLIENT_CONFIG)  # fmt: skip
    frame = pd.DataFrame(written, columns=["key", "timestamp"])
    start_ms = now - 160 * MINUTE
    iso_start = datetime.fromtimestamp(start_ms / 1000, tz=timezone.utc).isoformat()
    cases = [
        (iso_start, datetime.fromtimestamp((now - 100 * MINUTE) / 1000, tz=timezone.utc), now - 100 * MINUTE),
        (start_ms, "-1h", now - 60 * MINUTE),
    ]
    for start, end, end_ms in cases:
        result = ks.backtest(build(topic), spark, bootstrap_servers=kafka_bootstrap, start=start, end=end,
                             application_id=names("bt"), client_config=FAST_CLIENT_CONFIG)  # fmt: skip
        kept = frame[(frame["timestamp"] >= start_ms) & (frame["timestamp"] < end_ms)]
        expected = kept.groupby("key").size().to_dict()
        got = result.stores["counts"].to_pandas()
        assert dict(zip(got["key"], got["value"])) == expected, (start, end)
        assert result.processed == len(kept)
        assert expected["user-late"] == 1  # the late record inside the bounds counted, the older one not
