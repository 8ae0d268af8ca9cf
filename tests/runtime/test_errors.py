"""Failures: bad records, failing user code, failing threads and missing topics end clearly, never hang."""

from __future__ import annotations

import threading

import pytest

import kstream_nb as ks
from kstream_nb.errors import StreamsError
from tests.helpers import wait_for


def _wait_for_error(app: ks.KafkaStreams, timeout: float = 10.0) -> BaseException:
    wait_for(lambda: app.state is ks.State.ERROR, timeout, what=f"{app.application_id} to reach ERROR")
    assert app.error is not None
    return app.error


def _no_stream_threads_alive(app: ks.KafkaStreams) -> bool:
    names = {t.name for t in threading.enumerate()}
    return not any(name.startswith(f"{app.application_id}-") for name in names)


def _doubling(output: str = "out") -> ks.Topology:
    b = ks.StreamsBuilder()
    b.stream("in").map_values(lambda v: v * 2, name="double").to(output)
    return b.build()


def _produce_with_bad_record(url: str) -> None:
    ks.produce("in", [b"1", b"2"], bootstrap_servers=url, value_serde="bytes")
    ks.produce("in", [b"\xffnot json"], bootstrap_servers=url, value_serde="bytes")
    ks.produce("in", [3, 4], bootstrap_servers=url)


def test_bad_record_fails_the_app_naming_topic_partition_offset(url, make_app):
    _produce_with_bad_record(url)
    app = make_app(_doubling(), application_id="bad")
    app.start()
    error = _wait_for_error(app)
    assert isinstance(error, ks.DeserializationError)
    assert (error.topic, error.partition, error.offset) == ("in", 0, 2)
    assert "in" in str(error) and "offset=2" in str(error)
    wait_for(lambda: _no_stream_threads_alive(app), what="stream threads to end")
    assert app.stop(5) is True
    assert app.state is ks.State.ERROR
    with pytest.raises(StreamsError):
        app.wait_until_running(timeout=1)


def test_log_and_continue_skips_the_bad_record_and_counts_it(url, make_app):
    _produce_with_bad_record(url)
    app = make_app(
        _doubling(), application_id="skip", default_deserialization_exception_handler="log_and_continue"
    )
    app.start()
    app.wait_until_running().wait_until_idle()
    assert ks.read_topic("out", bootstrap_servers=url)["value"].tolist() == [2, 4, 6, 8]
    metrics = app.metrics()
    assert metrics["skipped-deserialization-total"] == 1
    assert metrics["process-total"] == 4
    assert app.state is ks.State.RUNNING and app.error is None


def test_user_function_error_names_processor_topic_partition_offset(url, make_app):
    ks.produce("in", [1, 2, "three", 4], bootstrap_servers=url, partitions=1)
    b = ks.StreamsBuilder()
    b.stream("in").map_values(lambda v: v + 1, name="plus-one").to("out")
    app = make_app(b.build(), application_id="boom")
    app.start()
    error = _wait_for_error(app)
    assert isinstance(error, ks.ProcessingError)
    assert error.processor == "plus-one"
    assert (error.topic, error.partition, error.offset) == ("in", 0, 2)
    assert "plus-one" in str(error) and "TypeError" in str(error)
    wait_for(lambda: _no_stream_threads_alive(app), what="stream threads to end")
    # the records before the failing one went out
    assert ks.read_topic("out", bootstrap_servers=url)["value"].tolist()[:2] == [2, 3]


def test_replace_thread_handler_keeps_the_app_running(url, make_app):
    failures: list[BaseException] = []
    failed_once = threading.Event()

    def flaky(v):
        if v == 13 and not failed_once.is_set():
            failed_once.set()
            raise ValueError("unlucky")
        return v

    b = ks.StreamsBuilder()
    b.stream("in").map_values(flaky, name="flaky").to("out")
    app = make_app(b.build(), application_id="replace", num_stream_threads=2)

    def handler(error: BaseException) -> ks.ThreadFailureResponse:
        failures.append(error)
        return ks.ThreadFailureResponse.REPLACE_THREAD

    app.set_uncaught_exception_handler(handler)
    app.start()
    app.wait_until_running()
    names_before = {t.name for t in app.threads}
    ks.produce("in", list(range(20)), bootstrap_servers=url, partitions=2)

    wait_for(lambda: failures, what="the handler to be called")
    assert isinstance(failures[0], ks.ProcessingError) and "unlucky" in str(failures[0])
    app.wait_until_running().wait_until_idle()
    assert app.state is ks.State.RUNNING and app.error is None
    assert len(app.threads) == 2
    assert {t.name for t in app.threads} != names_before
    out = ks.read_topic("out", bootstrap_servers=url)["value"].tolist()
    # at least once: the record that failed was processed again by the replacement thread
    assert set(out) == set(range(20))
    assert len(failures) == 1


def test_shutdown_client_handler_ends_in_error(url, make_app):
    ks.produce("in", ["x"], bootstrap_servers=url)
    app = make_app(_doubling(), application_id="shut")
    app.set_uncaught_exception_handler(lambda e: ks.ThreadFailureResponse.SHUTDOWN_CLIENT)
    ks.produce("in", [{"not": "doublable"}], bootstrap_servers=url)
    app.start()
    error = _wait_for_error(app)
    assert isinstance(error, ks.ProcessingError)
    assert error.offset == 1


def test_missing_source_topic_waits_then_processes_once_created(url, make_app):
    app = make_app(_doubling(), application_id="waits")
    app.start()
    wait_for(lambda: app.metrics()["missing-source-topics"] == ["in"], what="missing topic in metrics")
    assert app.state in (ks.State.REBALANCING, ks.State.RUNNING)
    assert app.missing_source_topics() == ["in"]

    ks.produce("in", [1, 2, 3], bootstrap_servers=url, partitions=2)
    wait_for(lambda: app.metrics()["missing-source-topics"] == [], what="topic to be found")
    app.wait_until_running().wait_until_idle()
    wait_for(lambda: len(ks.read_topic("out", bootstrap_servers=url)) == 3, what="output")
    assert sorted(ks.read_topic("out", bootstrap_servers=url)["value"]) == [2, 4, 6]
    assert app.error is None


def test_missing_source_topic_timeout_fails_naming_the_topic(url, make_app):
    app = make_app(_doubling(), application_id="gives-up", missing_source_topic_timeout_ms=300)
    app.start()
    error = _wait_for_error(app, timeout=5)
    assert isinstance(error, ks.MissingSourceTopicError)
    assert error.topics == ["in"]
    assert "'in'" in str(error) or "in" in str(error).split(":")[-1]
    wait_for(lambda: _no_stream_threads_alive(app), what="threads to end")


def test_error_in_rebalance_callback_surfaces_as_app_error(url, make_app):
    class FailsInInit(ks.Processor):
        def init(self, context):
            super().init(context)
            raise RuntimeError("cannot open the thing")

        def process(self, record):
            self.context.forward(record)

    ks.produce("in", [1], bootstrap_servers=url, partitions=2)
    b = ks.StreamsBuilder()
    b.stream("in").process(FailsInInit, name="opener").to("out")
    app = make_app(b.build(), application_id="init-fails", num_stream_threads=2)
    app.start()
    error = _wait_for_error(app)
    assert isinstance(error, ks.ProcessingError)
    assert "cannot open the thing" in str(error) and "opener" in str(error)
    wait_for(lambda: _no_stream_threads_alive(app), what="threads to end")
    assert app.stop(5) is True


def test_stop_while_failing_does_not_hang(url, make_app):
    ks.produce("in", ["a"] * 5, bootstrap_servers=url, partitions=3)
    b = ks.StreamsBuilder()
    b.stream("in").map_values(lambda v: 1 / 0).to("out")
    app = make_app(b.build(), application_id="racing", num_stream_threads=3)
    app.start()
    assert app.stop(10) is True
    assert app.state in (ks.State.NOT_RUNNING, ks.State.ERROR)
    wait_for(lambda: _no_stream_threads_alive(app), what="threads to end")


def test_error_in_the_assignor_surfaces_as_app_error(url, make_app):
    ks.produce("in", [1], bootstrap_servers=url, partitions=2)
    app = make_app(_doubling(), application_id="assign-fails", num_stream_threads=2)

    def broken_assign(partition_counts, subscriptions):
        raise RuntimeError("assignor exploded")

    app.assignor.assign = broken_assign  # type: ignore[method-assign]
    app.start()
    error = _wait_for_error(app)
    assert "assignor exploded" in str(error)
    wait_for(lambda: _no_stream_threads_alive(app), what="threads to end")
    assert app.stop(5) is True


def test_a_store_value_its_changelog_cannot_take_fails_the_app_naming_store_key_and_task(url, make_app):
    """The changelog gets a store's changes at the commit, away from the record that made them: the error
    names the store, the key and the task instead."""
    ks.produce("in", [("a", 1), ("a", 2)], bootstrap_servers=url)
    b = ks.StreamsBuilder()
    b.stream("in").group_by_key().aggregate(lambda: None, lambda k, v, agg: object(), store="things")
    app = make_app(b.build(), application_id="unlogged")
    app.start()
    error = _wait_for_error(app)
    assert isinstance(error, ks.ProcessingError) and error.task_id == "0_0"
    assert "store 'things'" in str(error) and "key 'a'" in str(error) and "unlogged-things-changelog" in str(error)
    assert "not JSON serializable: object" in str(error)
    wait_for(lambda: _no_stream_threads_alive(app), what="stream threads to end")
