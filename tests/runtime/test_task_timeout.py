"""A task whose group offsets the broker does not give in time is retried up to ``task_timeout_ms`` (Kafka
Streams' task.timeout.ms, KIP-572) instead of failing the thread; past it, the app fails naming the cause."""

from __future__ import annotations

import pytest

import kstream_nb as ks
from kstream_nb.cluster.memory_consumer import MemoryConsumer
from kstream_nb.errors import BrokerUnavailableError, StreamsError


def _unanswered(monkeypatch: pytest.MonkeyPatch, times: int) -> list[int]:
    """Makes the first ``times`` reads of committed metadata time out, as a broker that just restarted does."""
    calls: list[int] = []
    real = MemoryConsumer.committed_metadata

    def committed_metadata(self, partitions):  # type: ignore[no-untyped-def]
        calls.append(1)
        if len(calls) <= times:
            raise BrokerUnavailableError("cannot read the committed offsets of group 'app': Local: Timed out")
        return real(self, partitions)

    monkeypatch.setattr(MemoryConsumer, "committed_metadata", committed_metadata)
    return calls


def _app(url: str, make_app, **config):  # type: ignore[no-untyped-def]
    ks.produce("in", [1, 2, 3], bootstrap_servers=url)
    b = ks.StreamsBuilder()
    b.stream("in").map_values(lambda v: v * 10).to("out")
    return make_app(b.build(), **config)


def test_a_task_waits_for_its_group_offsets_instead_of_failing(url, make_app, monkeypatch) -> None:
    calls = _unanswered(monkeypatch, 2)
    _app(url, make_app).start().wait_until_running(30).wait_until_idle(30)
    assert len(calls) == 3
    assert sorted(ks.read_topic("out", bootstrap_servers=url)["value"]) == [10, 20, 30]


def test_past_task_timeout_the_app_fails_naming_the_cause(url, make_app, monkeypatch) -> None:
    _unanswered(monkeypatch, 1_000_000)
    app = _app(url, make_app, task_timeout_ms=0).start()
    with pytest.raises(StreamsError, match="cannot read the committed offsets of group"):
        app.wait_until_running(30)
