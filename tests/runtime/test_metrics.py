"""App metrics: processed records, lag per partition, dropped records, commits."""

from __future__ import annotations

import threading

import kstream_nb as ks
from tests.helpers import wait_for


def _pass_through() -> ks.Topology:
    b = ks.StreamsBuilder()
    b.stream("in").filter(lambda k, v: v % 2 == 0).to("out")
    return b.build()


def test_process_total_counts_records_processed(url, make_app):
    ks.produce("in", list(range(100)), bootstrap_servers=url, partitions=3)
    app = make_app(_pass_through(), application_id="count", num_stream_threads=2)
    app.start()
    app.wait_until_running().wait_until_idle()
    assert app.metrics()["process-total"] == 100
    ks.produce("in", list(range(50)), bootstrap_servers=url, partitions=3)
    app.wait_until_idle()
    metrics = app.metrics()
    assert metrics["process-total"] == 150
    assert metrics["tasks"] == 3 and metrics["threads"] == 2
    assert metrics["state"] == "RUNNING"
    assert metrics["process-latency-avg-ms"] > 0
    wait_for(lambda: app.metrics()["commit-total"] >= 1, what="a commit")


def test_process_total_survives_task_moves(url, make_app):
    ks.produce("in", list(range(60)), bootstrap_servers=url, partitions=4)
    app = make_app(_pass_through(), application_id="moves")
    app.start()
    app.wait_until_running().wait_until_idle()
    app.add_stream_thread()
    ks.produce("in", list(range(40)), bootstrap_servers=url, partitions=4)
    app.wait_until_running().wait_until_idle()
    # records processed by tasks that were closed when they moved still count, once each
    assert app.metrics()["process-total"] == 100
    app.remove_stream_thread()
    app.wait_until_running().wait_until_idle()
    assert app.metrics()["process-total"] == 100


def test_lag_per_partition_is_reported_and_reaches_zero(url, make_app):
    gate_open = threading.Event()

    def slow(k, v):
        gate_open.wait(10)
        return True

    b = ks.StreamsBuilder()
    b.stream("in").filter(slow).to("out")
    ks.produce("in", list(range(10)), bootstrap_servers=url, partitions=2)
    app = make_app(b.build(), application_id="lagging")
    app.start()
    app.wait_until_running()

    # while the first record is held, the lag of the partitions shows what is left
    lag = wait_for(lambda: app.lag() if sum(app.lag().values()) > 0 else None, what="lag")
    assert set(lag) == {"in-0", "in-1"}
    assert 0 < sum(lag.values()) <= 10
    assert app.metrics()["lag"].keys() == lag.keys()
    gate_open.set()
    app.wait_until_idle()
    assert app.lag() == {"in-0": 0, "in-1": 0}
    assert app.metrics()["lag"] == {"in-0": 0, "in-1": 0}


def test_lag_after_restart_counts_from_committed_offsets(url, make_app):
    ks.produce("in", list(range(20)), bootstrap_servers=url, partitions=2)
    first = make_app(_pass_through(), application_id="again")
    first.start()
    first.wait_until_running().wait_until_idle()
    first.stop(10)
    second = make_app(_pass_through(), application_id="again")
    second.start()
    second.wait_until_running()
    # nothing new: the committed offsets are at the end, so there is no lag even before processing
    assert second.lag() == {"in-0": 0, "in-1": 0}
    second.wait_until_idle(timeout=5)
    assert second.metrics()["process-total"] == 0


def test_dropped_records_counts_null_keys_dropped_by_an_aggregation(url, make_app):
    b = ks.StreamsBuilder()
    b.stream("in").group_by_key().count(store="per-key").to_stream().to("out")
    ks.produce("in", [("a", 1), (None, 2), ("b", 3), (None, 4), ("a", 5)], bootstrap_servers=url)
    app = make_app(b.build(), application_id="drops")
    app.start()
    app.wait_until_running().wait_until_idle()
    metrics = app.metrics()
    assert metrics["dropped-records-total"] == 2
    assert metrics["process-total"] == 5
    frame = app.store("per-key").to_pandas()
    assert dict(zip(frame["key"], frame["value"])) == {"a": 2, "b": 1}


def test_skipped_and_error_metrics(url, make_app):
    ks.produce("in", [b"{bad"], bootstrap_servers=url, value_serde="bytes")
    ks.produce("in", [2], bootstrap_servers=url)
    app = make_app(
        _pass_through(), application_id="skips", default_deserialization_exception_handler="log_and_continue"
    )
    app.start()
    app.wait_until_running().wait_until_idle()
    metrics = app.metrics()
    assert metrics["skipped-deserialization-total"] == 1
    assert metrics["process-total"] == 1
    assert metrics["error"] is None
