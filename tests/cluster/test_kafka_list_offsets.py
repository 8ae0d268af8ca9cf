"""Listing offsets asks again while a new topic's leader settles: a broker that just took a partition's leadership
may answer ListOffsets with a leader-epoch error for a moment, which librdkafka does not flag retriable (a CI
run saw an app fail on ``UNKNOWN_LEADER_EPOCH`` for its control topic, created a moment before). The answers
here are confluent-kafka's own futures and errors, in the order that run saw them."""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from kstream_nb.cluster.kafka import KafkaCluster
from kstream_nb.cluster.records import TopicPartition
from kstream_nb.errors import StreamsError


class Answers:
    """An admin client whose ``list_offsets`` answers each request with the next of ``errors`` (then offset 7)."""

    def __init__(self, *errors: int) -> None:
        self.errors = list(errors)
        self.requests = 0

    def list_offsets(self, request: dict[Any, Any], **_: Any) -> dict[Any, Future[Any]]:
        self.requests += 1
        answers: dict[Any, Future[Any]] = {}
        for tp in request:
            future: Future[Any] = Future()
            if self.errors:
                future.set_exception(KafkaException(KafkaError(self.errors.pop(0))))
            else:
                future.set_result(type("Listed", (), {"offset": 7})())
            answers[tp] = future
        return answers


@pytest.mark.parametrize("code", [KafkaError.UNKNOWN_LEADER_EPOCH, KafkaError.NOT_LEADER_FOR_PARTITION])
def test_a_leader_settling_is_asked_again(code: int, monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = KafkaCluster("127.0.0.1:9", timeout_s=5)
    answers = Answers(code, code)
    monkeypatch.setattr(cluster, "admin_client", lambda: answers)
    tp = TopicPartition("app-assignment", 0)
    assert cluster.beginning_offsets([tp]) == {tp: 7}
    assert answers.requests == 3


def test_other_errors_name_the_partition(monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = KafkaCluster("127.0.0.1:9", timeout_s=5)
    monkeypatch.setattr(cluster, "admin_client", lambda: Answers(KafkaError.TOPIC_AUTHORIZATION_FAILED))
    with pytest.raises(StreamsError, match=r"cannot list offsets of app-assignment-0 on 127\.0\.0\.1:9"):
        cluster.beginning_offsets([TopicPartition("app-assignment", 0)])
