"""read_topic(start=, end=) on Apache Kafka 4.4: offsets from the broker's time index (ListOffsets by
timestamp), checked with the same scenarios as the embedded cluster (tests/time_scenarios.py), so that
the two agree, out-of-order timestamps included."""

from __future__ import annotations

import pytest

from tests.kafka.conftest import Names
from tests.time_scenarios import check_bounds_of_every_kind, check_out_of_order

pytestmark = pytest.mark.kafka


def test_bounds_of_every_kind(kafka_bootstrap: str, names: Names) -> None:
    check_bounds_of_every_kind(kafka_bootstrap, names("clicks"))


def test_out_of_order_timestamps(kafka_bootstrap: str, names: Names) -> None:
    check_out_of_order(kafka_bootstrap, names("late"))
