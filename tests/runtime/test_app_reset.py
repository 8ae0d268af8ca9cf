"""ks.reset_app on the embedded cluster (tests/kafka/test_app_reset_kafka.py runs the same scenario on
Apache Kafka): a word count reset to a time recounts from there; earliest, latest, explicit input topics."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest

import kstream_nb as ks
from kstream_nb.errors import UnknownTopicError
from tests.reset_scenarios import BASE_MS, MINUTE, check_reset_to_a_time, produce_lines, recount, reset_then_count


def test_reset_to_a_time_recounts_from_there(
    url: str, make_app: Callable[..., ks.KafkaStreams], tmp_path: Path
) -> None:
    check_reset_to_a_time(url, make_app, "wc", "lines", "counts-out", tmp_path)


def test_earliest_latest_and_explicit_input_topics(
    url: str, make_app: Callable[..., ks.KafkaStreams], tmp_path: Path
) -> None:
    lines = produce_lines(url, "lines", 10)
    run = (url, make_app, "wc", "lines", "counts-out", tmp_path)
    # never run: no committed offsets, so the input topics are given (Kafka's --input-topics)
    assert reset_then_count(*run, to=BASE_MS + 6 * MINUTE, input_topics=["lines"]) == recount(
        lines, BASE_MS + 6 * MINUTE
    )
    assert reset_then_count(*run, to="earliest") == recount(lines)
    assert reset_then_count(*run, to="latest") == {}
    again = produce_lines(url, "lines", 14)  # the same ten lines again, then four more
    assert reset_then_count(*run, to="-1h") == {}  # relative: nothing in the last hour (all of them are 2023)
    everything = pd.concat([lines, again])
    assert reset_then_count(*run, to="2023-11-14T22:13:20Z") == recount(everything, BASE_MS)  # = BASE_MS
    with pytest.raises(UnknownTopicError, match="input topic 'nope' does not exist"):
        ks.reset_app("wc", url, input_topics=["nope"], state_dir=str(tmp_path))
    with pytest.raises(ValueError, match="to: cannot read 'soon'"):
        ks.reset_app("wc", url, to="soon", state_dir=str(tmp_path))
