"""Broker faults: an app started before its broker waits (state REBALANCING, status "waiting for broker"),
retrying with backoff, and runs once the broker is up."""

from __future__ import annotations

import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import kstream_nb as ks
from kstream_nb.cluster.kafka import close_clusters
from tests.tansu_helpers import FAST_CLIENT_CONFIG, _broker_binary, _free_port, _wait_until_ready, stop_tansu

pytestmark = pytest.mark.kafka


def start_tansu_on(port: int, log_path: Path) -> subprocess.Popen[bytes]:
    url = f"tcp://127.0.0.1:{port}"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [_broker_binary(), "broker", "--listener-url", url, "--advertised-listener-url", url,
             "--storage-engine", "memory://tansu/"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        )  # fmt: skip
    try:
        _wait_until_ready(f"127.0.0.1:{port}", process, log_path)
    except BaseException:
        stop_tansu(process)
        raise
    return process


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once_v2"])
def test_app_started_before_the_broker_waits_then_runs(guarantee: str, tmp_path: Path) -> None:
    port = _free_port()
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
        broker = start_tansu_on(port, tmp_path / "tansu.log")
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
            stop_tansu(broker)


def test_stop_while_waiting_for_the_broker(tmp_path: Path) -> None:
    bootstrap = f"127.0.0.1:{_free_port()}"
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
