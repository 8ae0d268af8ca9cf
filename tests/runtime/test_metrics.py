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


def test_store_metrics_count_operations_of_key_value_window_and_session_stores(url, make_app):
    """Every store stack has a metering layer on top: ``metrics()["stores"]`` sums its counts over tasks."""
    b = ks.StreamsBuilder()
    grouped = b.stream("clicks").group_by_key()
    grouped.count(store="totals")
    grouped.windowed_by(ks.TimeWindows.of(10_000)).count(store="per-window")
    grouped.windowed_by(ks.SessionWindows.with_gap(5_000)).count(store="sessions")
    ks.produce(
        "clicks", [("a", 1), ("b", 1), ("a", 1), ("a", 1)], bootstrap_servers=url, partitions=2,
        timestamps=[1_000, 2_000, 3_000, 15_000],
    )  # fmt: skip
    app = make_app(b.build())
    app.start().wait_until_running().wait_until_idle()
    stores = app.metrics()["stores"]
    assert sorted(stores) == ["per-window", "sessions", "totals"]
    assert (stores["totals"]["scope"], stores["totals"]["tasks"]) == ("in-memory", 2)
    assert (stores["totals"]["entries"], stores["totals"]["get_total"], stores["totals"]["put_total"]) == (2, 4, 4)
    window = stores["per-window"]
    assert (window["scope"], window["entries"], window["put_total"], window["get_total"]) == (
        "in-memory-window",
        3,  # a@0, b@0, a@10000
        4,
        4,
    )
    session = stores["sessions"]
    assert session["scope"] == "in-memory-session" and session["entries"] == 3  # a [1000, 3000], b, a [15000]
    assert session["put_total"] == 4 and session["delete_total"] == 1  # a's session grew once: old one removed
    assert session["scan_total"] == 4  # one find_sessions per record
