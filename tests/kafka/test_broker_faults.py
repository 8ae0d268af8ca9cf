"""Broker faults: an app started before its broker waits (state REBALANCING, status "waiting for broker"),
retrying with backoff, and runs once the broker is up."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import kstream_nb as ks
from kstream_nb.cluster.kafka import close_clusters
from kstream_nb.cluster.local_kafka import free_port
from tests.kafka_broker import FAST_CLIENT_CONFIG, make_broker, start_broker

pytestmark = pytest.mark.kafka


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once_v2"])
def test_app_started_before_the_broker_waits_then_runs(guarantee: str, tmp_path: Path) -> None:
    port = free_port()
    bootstrap = f"127.0.0.1:{port}"
    b = ks.StreamsBuilder()
    b.stream("lines").flat_map_values(str.split).group_by(lambda k, w: w).count(store="counts")
    states: list[Any] = []
    app = ks.KafkaStreams(
        b.build(), "early-bird", bootstrap, processing_guarantee=guarantee, commit_interval_ms=100, poll_ms=20,
        state_dir=str(tmp_path / "state"), client_config=dict(FAST_CLIENT_CONFIG),
    )  # fmt: skip
    app.set_state_listener(lambda new, old: states.append(new))
    broker = None
    try:
        started = time.monotonic()
        app.start()
        assert time.monotonic() - started < 5  # start() does not wait for the broker
        time.sleep(1.5)
        metrics = app.metrics()
        assert app.state is ks.State.REBALANCING
        assert metrics["status"] == "waiting for broker"
        assert metrics["broker-retries"] >= 1
        assert app.threads == []
        broker = start_broker(make_broker(tmp_path / "kafka", port))
        lines = ["a b a", "c a b"] * 50
        ks.produce("lines", lines, bootstrap_servers=bootstrap, partitions=2)
        app.wait_until_running(60).wait_until_idle(60)
        assert app.metrics()["status"] == "running"
        assert dict(app.store("counts").all()) == dict(Counter(w for line in lines for w in line.split()))
        assert ks.State.ERROR not in states
    finally:
        assert app.stop(timeout=30)
        close_clusters(bootstrap)
        if broker is not None:
            broker.stop()


def test_stop_while_waiting_for_the_broker(tmp_path: Path) -> None:
    bootstrap = f"127.0.0.1:{free_port()}"
    b = ks.StreamsBuilder()
    b.stream("never").to("nowhere")
    app = ks.KafkaStreams(b.build(), "no-broker", bootstrap, client_config=dict(FAST_CLIENT_CONFIG))
    app.start()
    assert app.metrics()["status"] == "waiting for broker"
    started = time.monotonic()
    assert app.stop(timeout=15)
    assert time.monotonic() - started < 5
    assert app.state is ks.State.NOT_RUNNING
    close_clusters(bootstrap)
