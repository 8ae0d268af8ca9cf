"""``ks.profile_topic`` on Apache Kafka: exact counts and time range per partition from the broker, bytes from the
sample's record sizes (estimated), the same formats, columns and keys as on ``memory://``."""

from __future__ import annotations

import pandas as pd
import pytest

import kstream_nb as ks
from tests.cluster.test_profile import HEADERS, check_profile_matches, orders_frame, recount, write_rows
from tests.kafka.conftest import Names
from tests.kafka_broker import FAST_CLIENT_CONFIG

pytestmark = pytest.mark.kafka


def test_profile_on_kafka_equals_a_pandas_recount(kafka_bootstrap: str, names: Names) -> None:
    topic = names("orders")
    rows = orders_frame()
    write_rows(kafka_bootstrap, topic, rows, FAST_CLIENT_CONFIG)
    profile = ks.profile_topic(topic, kafka_bootstrap, client_config=FAST_CLIENT_CONFIG)
    assert not profile.bytes_exact
    # every record sampled: the mean size times the records is the partition's exact size
    check_profile_matches(profile, rows)
    assert "(estimated: the sample's mean record size times records)" in profile._repr_html_()

    small = ks.profile_topic(topic, kafka_bootstrap, sample=4, client_config=FAST_CLIENT_CONFIG)
    header_bytes = sum(len(name.encode()) + len(value) for name, value in HEADERS)
    last = rows.groupby("partition").tail(4)
    mean_size = (last["key"].map(len) + last["value"].map(len) + header_bytes).groupby(last["partition"]).mean()
    expected = recount(rows)
    assert small.to_pandas()["bytes"].tolist() == (mean_size * expected["records"]).round().astype(int).tolist()
    assert small.to_pandas()["records"].tolist() == [60, 30, 10]
    assert small.first_timestamp == expected["first"].min() and small.last_timestamp == expected["last"].max()
    assert small.distinct_keys == last["key"].nunique()
    assert isinstance(small.to_pandas("records"), pd.DataFrame) and len(small.to_pandas("records")) == 5
