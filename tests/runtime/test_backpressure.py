"""Backpressure (Kafka Streams' ``buffered.records.per.partition``): a partition whose queue is still over the
limit after a loop's processing is paused at the consumer until it drains, so a task slower than the fetches
holds at most the limit plus one poll, and loses nothing."""

from __future__ import annotations

import pytest

import kstream_nb as ks


def test_a_task_slower_than_its_fetches_buffers_at_most_its_limit_plus_one_poll(url, make_app) -> None:
    ks.produce("in", list(range(3000)), bootstrap_servers=url)
    b = ks.StreamsBuilder()
    b.stream("in").map_values(lambda v: v * 2).to("out")
    # each loop fetches up to 100 records and processes 10: without the pause the queue grows by 90 a loop
    limits = {"max_poll_records": 100, "max_task_records_per_loop": 10, "buffered_records_per_partition": 50}
    app = make_app(b.build(), **limits)
    app.start().wait_until_idle(120)
    metrics = app.metrics()
    assert 50 < metrics["buffered-records-peak"] <= 50 + 100
    assert metrics["buffered-records"] == 0
    out = ks.read_topic("out", bootstrap_servers=url)
    assert sorted(out["value"]) == [v * 2 for v in range(3000)]


@pytest.mark.parametrize("setting", ["buffered_records_per_partition", "max_poll_records"])
def test_a_limit_below_one_is_refused_naming_the_setting(url, setting) -> None:
    b = ks.StreamsBuilder()
    b.stream("in").to("out")
    with pytest.raises(ValueError, match=setting):
        ks.KafkaStreams(b.build(), "app", url, **{setting: 0})
