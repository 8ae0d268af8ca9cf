"""KafkaStreams lifecycle: non-blocking start, state transitions, single start, clean thread shutdown."""

from __future__ import annotations

import threading
import time

import pytest
from runtime_helpers import expected_counts, store_dict, word_count_topology

import kstream_nb as ks
from kstream_nb.errors import IllegalStateError, InvalidStateStoreError
from tests.helpers import wait_for


def _app_threads(before: set[threading.Thread]) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t not in before and t.is_alive()]


def test_start_returns_at_once_and_processing_runs_on_background_threads(url, make_app):
    seen_threads: set[str] = set()

    b = ks.StreamsBuilder()
    b.stream("in").peek(lambda k, v: seen_threads.add(threading.current_thread().name)).to("out")
    ks.produce("in", list(range(20)), bootstrap_servers=url, partitions=2)
    app = make_app(b.build(), application_id="bg", num_stream_threads=2)

    began = time.monotonic()
    app.start()
    assert time.monotonic() - began < 0.5
    assert app.state in (ks.State.REBALANCING, ks.State.RUNNING)

    app.wait_until_running().wait_until_idle()
    assert sorted(ks.read_topic("out", bootstrap_servers=url)["value"]) == list(range(20))
    main = threading.main_thread().name
    assert seen_threads and main not in seen_threads
    assert seen_threads <= {t.name for t in app.threads}


def test_state_transitions_seen_by_listener(url, make_app):
    ks.produce("sentences", ["a b"], bootstrap_servers=url, partitions=2)
    app = make_app(word_count_topology(), application_id="states")
    transitions: list[tuple[ks.State, ks.State]] = []
    app.set_state_listener(lambda new, old: transitions.append((new, old)))

    assert app.state is ks.State.CREATED
    app.start()
    app.wait_until_running().wait_until_idle()
    assert app.stop(10) is True
    assert app.state is ks.State.NOT_RUNNING

    states = [transitions[0][1]] + [new for new, _ in transitions]
    assert states[:3] == [ks.State.CREATED, ks.State.REBALANCING, ks.State.RUNNING]
    assert states[-2:] == [ks.State.PENDING_SHUTDOWN, ks.State.NOT_RUNNING]
    # every transition starts where the previous one ended
    for (_, old), (prev_new, _) in zip(transitions[1:], transitions):
        assert old is prev_new
    # a rebalance in between (internal topics appear) only alternates RUNNING and REBALANCING
    assert set(states[1:-2]) <= {ks.State.REBALANCING, ks.State.RUNNING}


def test_start_twice_raises(url, make_app):
    app = make_app(word_count_topology(), application_id="twice")
    app.start()
    with pytest.raises(IllegalStateError, match="once"):
        app.start()
    app.stop(10)
    with pytest.raises(IllegalStateError):
        app.start()


def test_stop_joins_every_thread_the_app_started(url, make_app):
    ks.produce("sentences", ["x y z"] * 10, bootstrap_servers=url, partitions=3)
    before = set(threading.enumerate())
    app = make_app(word_count_topology(), application_id="join", num_stream_threads=3)
    app.start()
    app.wait_until_running().wait_until_idle()
    assert len(_app_threads(before)) >= 3
    assert app.stop(10) is True
    assert _app_threads(before) == []
    assert all(not t.is_alive() for t in app.threads)


def test_stop_before_start_and_stop_twice(url, make_app):
    app = make_app(word_count_topology(), application_id="never")
    assert app.stop() is True
    assert app.state is ks.State.NOT_RUNNING
    assert app.stop() is True


def test_fifty_start_stop_cycles_leave_no_thread_behind(url, make_app):
    ks.produce("sentences", ["a b c"], bootstrap_servers=url, partitions=2)
    topology = word_count_topology()
    before = set(threading.enumerate())
    for i in range(50):
        app = ks.KafkaStreams(
            topology, application_id=f"cycle-{i % 3}", bootstrap_servers=url, num_stream_threads=2, poll_ms=10
        )
        app.start()
        if i % 10 == 0:
            app.wait_until_running()
        assert app.stop(10) is True
        assert app.state is ks.State.NOT_RUNNING
    leftover = _app_threads(before)
    assert leftover == [], f"threads left behind: {[t.name for t in leftover]}"


def test_context_manager_stops_the_app(url):
    ks.produce("sentences", ["a b a"], bootstrap_servers=url, partitions=1)
    before = set(threading.enumerate())
    with ks.KafkaStreams(word_count_topology(), application_id="ctx", bootstrap_servers=url) as app:
        app.start()
        app.wait_until_running().wait_until_idle()
        assert store_dict(app) == expected_counts(["a b a"])
    assert app.state is ks.State.NOT_RUNNING
    assert _app_threads(before) == []


def test_store_unavailable_after_stop(url, make_app):
    ks.produce("sentences", ["a"], bootstrap_servers=url)
    app = make_app(word_count_topology(), application_id="after")
    app.start()
    app.wait_until_running().wait_until_idle()
    wait_for(lambda: app.store("counts").get("a") == 1, what="count of a")
    app.stop(10)
    with pytest.raises(InvalidStateStoreError, match="counts"):
        app.store("counts").get("a")


def test_a_thread_that_does_not_stop_in_time_is_reported_with_where_it_is(url, make_app, caplog):
    """stop(timeout) answers False, and the log says which thread is stuck and in which call."""
    entered, release = threading.Event(), threading.Event()

    def wait_for_release(key, value):
        entered.set()
        release.wait(30)
        return value

    b = ks.StreamsBuilder()
    b.stream("in").map_values(wait_for_release).to("out")
    ks.produce("in", [1], bootstrap_servers=url)
    app = make_app(b.build(), application_id="stuck")
    app.start().wait_until_running()
    assert entered.wait(10)
    try:
        assert app.stop(timeout=0.5) is False
        assert "stuck-StreamThread-1" in caplog.text and "did not stop within 0.5s" in caplog.text
        assert "in wait_for_release" in caplog.text  # the frame the thread is in
    finally:
        release.set()
    assert app.stop(timeout=10) is True
