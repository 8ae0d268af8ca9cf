"""ks.reset_app on Apache Kafka 4.4: the consumer group's members name the running instances
(DescribeConsumerGroups), offsets are committed at the broker's time-index answers, the internal topics
are deleted (and their committed offsets with them) and recreated; the same scenario as on memory://
(tests/reset_scenarios.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

import kstream_nb as ks
from tests.kafka.conftest import Names
from tests.reset_scenarios import check_reset_to_a_time

pytestmark = pytest.mark.kafka


def test_reset_to_a_time_recounts_from_there(
    kafka_bootstrap: str, make_kafka_app: Callable[..., ks.KafkaStreams], names: Names, tmp_path: Path
) -> None:
    check_reset_to_a_time(
        kafka_bootstrap, make_kafka_app, names("wc"), names("lines"), names("counts-out"), tmp_path
    )
