"""Deserialization handler with a dead-letter topic; production-exception handler (fail / continue)."""

import time
import uuid

import pytest

import kstream_nb as ks


@pytest.fixture
def url() -> str:
    return f"memory://handlers-{uuid.uuid4().hex[:8]}"


def test_dead_letter_topic_gets_the_original_bytes_and_the_error(url) -> None:
    ks.produce("in", [("a", b'{"n": 1}'), ("b", b"not json"), ("c", b'{"n": 3}')], bootstrap_servers=url,
               value_serde="bytes")  # fmt: skip
    b = ks.StreamsBuilder()
    b.stream("in").map_values(lambda v: v["n"]).to("out")
    app = ks.KafkaStreams(b.build(), "dlq-app", url, default_deserialization_exception_handler="dead_letter")
    try:
        app.start().wait_until_running().wait_until_idle()
        assert ks.read_topic("out", bootstrap_servers=url)["value"].tolist() == [1, 3]
        dead = ks.read_topic("dlq-app-dlq", bootstrap_servers=url, value_serde="bytes")
        assert dead["key"].tolist() == ["b"] and dead["value"].tolist() == [b"not json"]
        headers = dict(dead["headers"][0])
        assert headers["__streams.errors.topic"] == b"in"
        assert headers["__streams.errors.offset"] == b"1"
        assert headers["__streams.errors.exception"] and headers["__streams.errors.message"]
        assert app.metrics()["skipped-deserialization-total"] == 1
    finally:
        assert app.stop()


class Unserializable:
    pass


def topology() -> ks.Topology:
    b = ks.StreamsBuilder()
    b.stream("in").map_values(lambda v: Unserializable() if v == "bad" else v).to("out")
    return b.build()


def test_production_handler_continue_skips_and_counts(url) -> None:
    ks.produce("in", ["x", "bad", "y"], bootstrap_servers=url)
    app = ks.KafkaStreams(topology(), "prod-continue", url, default_production_exception_handler="continue")
    try:
        app.start().wait_until_running().wait_until_idle()
        assert ks.read_topic("out", bootstrap_servers=url)["value"].tolist() == ["x", "y"]
        assert app.metrics()["skipped-production-total"] == 1
    finally:
        assert app.stop()


def test_production_handler_fail_names_the_topic(url) -> None:
    ks.produce("in", ["x", "bad"], bootstrap_servers=url)
    app = ks.KafkaStreams(topology(), "prod-fail", url).start()
    try:
        deadline = time.monotonic() + 10
        while app.state != ks.State.ERROR and time.monotonic() < deadline:
            time.sleep(0.01)
        assert app.state == ks.State.ERROR
        assert isinstance(app.error, ks.ProcessingError)
        assert "out" in str(app.error) and "offset=1" in str(app.error)
    finally:
        app.stop()
