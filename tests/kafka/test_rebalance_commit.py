"""A member that hands its partitions over at a rebalance commits what it processed before they move
(at_least_once, as Kafka Streams commits in onPartitionsRevoked): the new owner starts after it.

The commit runs inside librdkafka's revoke callback, where only the consumer's own thread may call the
consumer: a commit made from another thread would wait for the callback to end, time out, and leave the
new owner to process those records again.
"""

from __future__ import annotations

import logging

import pytest

import kstream_nb as ks
from kstream_nb.cluster.kafka import get_kafka_cluster
from kstream_nb.cluster.records import TopicPartition
from tests.helpers import wait_for
from tests.kafka_broker import FAST_CLIENT_CONFIG

pytestmark = pytest.mark.kafka


def test_a_member_commits_what_it_processed_before_a_rebalance_moves_its_partitions(
    make_kafka_app, names, kafka_bootstrap, caplog: pytest.LogCaptureFixture
) -> None:
    source, output, app_id = names("events"), names("upper"), names("handover")
    events = [f"e{i}" for i in range(200)]
    ks.produce(source, [(f"k{i}", e) for i, e in enumerate(events)], bootstrap_servers=kafka_bootstrap,
               partitions=2)  # fmt: skip
    b = ks.StreamsBuilder()
    b.stream(source).map_values(str.upper).to(output)
    topology = b.build()
    # no commit by interval: only the rebalance's commit can tell the new owner where to start
    first = make_kafka_app(topology, application_id=app_id, commit_interval_ms=600_000)
    first.start().wait_until_running(60)
    wait_for(lambda: first.threads[0].processed_total == len(events), 60, "the first instance to read everything")
    tps = [TopicPartition(source, p) for p in (0, 1)]
    committed = get_kafka_cluster(kafka_bootstrap, FAST_CLIENT_CONFIG).consumer(app_id, {})
    try:
        assert set(committed.committed(tps).values()) == {None}
        second = make_kafka_app(topology, application_id=app_id)
        with caplog.at_level(logging.WARNING):
            second.start()
            wait_for(
                lambda: (
                    first.state is ks.State.RUNNING
                    and second.state is ks.State.RUNNING
                    and all(app.assignment()[app.threads[0].name] for app in (first, second))
                ),
                60,
                "both instances running with one task each",
            )
        ends = get_kafka_cluster(kafka_bootstrap).admin().end_offsets(tps)
        assert committed.committed(tps) == ends
        assert "broker unreachable" not in caplog.text
        assert first.stop(timeout=30) and second.stop(timeout=30)
    finally:
        committed.close()
    out = ks.read_topic(output, bootstrap_servers=kafka_bootstrap)
    assert sorted(out["value"]) == sorted(e.upper() for e in events)  # none processed twice
