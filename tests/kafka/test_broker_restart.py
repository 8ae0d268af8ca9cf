"""A broker restarted mid-run: the app keeps its state (not ERROR, no thread dies), reports the broker
unreachable, and resumes once the broker is back, with exact counts and its store intact.

The broker is an Apache Kafka of the test's own (its data on disk, so topics, records, committed offsets
and transactions survive a SIGKILL), restarted on the same port.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import sys
import threading
import time
import traceback
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import kstream_nb as ks
from kstream_nb.cluster.kafka import close_clusters, get_kafka_cluster
from kstream_nb.cluster.local_kafka import LocalKafka
from kstream_nb.cluster.records import TopicPartition
from kstream_nb.errors import InvalidStateStoreError, StreamsError, TransactionError
from tests.helpers import wait_for
from tests.kafka_broker import FAST_CLIENT_CONFIG, make_broker, start_broker

pytestmark = pytest.mark.kafka


class DurableKafka:
    """A broker of the test's own that can be killed and started again on the same port and data."""

    def __init__(self, tmp_path: Path) -> None:
        self.broker: LocalKafka = start_broker(make_broker(tmp_path / "kafka"))
        self.bootstrap = self.broker.bootstrap_servers

    def start(self) -> None:
        """Starts the broker again (same port, same data)."""
        start_broker(self.broker)

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if sig == signal.SIGKILL:
            self.broker.kill()
        else:
            self.broker.stop()

    def close(self) -> None:
        close_clusters(self.bootstrap)
        self.broker.stop()


@pytest.fixture
def durable_kafka(tmp_path: Path) -> Iterator[DurableKafka]:
    broker = DurableKafka(tmp_path)
    try:
        yield broker
    finally:
        broker.close()


def word_counts(lines: list[str]) -> Counter[str]:
    return Counter(w for line in lines for w in line.split())


def where_the_app_stands(app: ks.KafkaStreams) -> str:
    """Each stream thread's state, tasks, positions and broker report, the app's lag, and the threads' stacks:
    what a failed wait shows."""
    lines = [f"app state {app.state}; lag {app.lag()}"]
    for t in app.threads:
        positions = {tid: dict(task.consumed) for tid, task in t.tasks.items()}
        lines.append(
            f"{t.name}: {t.state}, alive={t.is_alive()}, error={t.error!r}, "
            f"broker unreachable since {t.broker_unreachable_since}, transaction {t.transaction}, "
            f"processed {t.processed_total}, consumed positions {positions}"
        )
    return "\n".join(lines) + "\n" + stacks(app.threads)


def counts_when_done(app: ks.KafkaStreams, expected: Counter[str], timeout: float = 60.0) -> dict[str, int]:
    """The store's counts once every key reached its expected count and nothing changed for a second."""
    deadline = time.monotonic() + timeout
    last: dict[str, int] = {}
    stable_since = time.monotonic()
    while time.monotonic() < deadline:
        try:
            counts = dict(app.store("counts").all())
        except InvalidStateStoreError:  # the group is rebalancing after the broker came back
            time.sleep(0.1)
            continue
        if counts != last:
            last, stable_since = counts, time.monotonic()
        elif all(counts.get(w, 0) >= n for w, n in expected.items()) and time.monotonic() - stable_since > 1:
            return counts
        time.sleep(0.1)
    raise AssertionError(
        f"counts did not reach {dict(expected)} within {timeout}s: {last}\n{where_the_app_stands(app)}"
    )


#: a producer queue this small fills while the broker is away: sends wait for room
SMALL_PRODUCER_QUEUE = {"producer.queue.buffering.max.messages": 1000}


def wordcount_app(
    bootstrap: str, guarantee: str, state_dir: Path, client: dict[str, Any] | None = None
) -> ks.KafkaStreams:
    b = ks.StreamsBuilder()
    counts = b.stream("lines").flat_map_values(str.split).group_by(lambda k, w: w).count(store="counts")
    counts.to_stream().to("counts-out")
    config = {**FAST_CLIENT_CONFIG, **(client or {})}
    return ks.KafkaStreams(
        b.build(), f"restart-{guarantee}", bootstrap, processing_guarantee=guarantee, commit_interval_ms=100,
        poll_ms=20, state_dir=str(state_dir), client_config=config,
    )  # fmt: skip


#: lines processed while the broker is killed, and lines produced after it is back
FIRST = [f"w{i % 7} w{i % 3} common" for i in range(3000)]
LATE = [f"w{i % 5} late common" for i in range(200)]


def produce_lines(bootstrap: str, lines: list[str]) -> None:
    for k in range(0, len(lines), 300):
        ks.produce("lines", lines[k : k + 300], bootstrap_servers=bootstrap, partitions=2)


def kill_the_broker_while_processing(app: ks.KafkaStreams, broker: DurableKafka, processed: int) -> list[Any]:
    """Starts the app and SIGKILLs the broker once ``processed`` lines went through; the app's threads."""
    app.start()
    app.wait_until_running(60)
    threads = list(app.threads)
    deadline = time.monotonic() + 60
    while sum(t.processed_total for t in threads) < processed:
        assert time.monotonic() < deadline, f"{processed} lines not processed in 60 s\n{where_the_app_stands(app)}"
        time.sleep(0.005)
    broker.kill(signal.SIGKILL)
    return threads


def stacks(threads: list[Any]) -> str:
    frames = sys._current_frames()
    return "\n".join(
        f"{t.name}:\n{''.join(traceback.format_stack(frames[t.ident]))}" for t in threads if t.ident in frames
    )


def assert_waits_for_the_broker(app: ks.KafkaStreams, threads: list[Any], outage_s: float) -> None:
    """During the outage: no thread dies, the app is not in ERROR, each thread reports the broker away."""
    start = time.monotonic()
    # a thread inside a transactional call notices when the call times out (5 s): allow for it
    while time.monotonic() - start < outage_s or not all(t.broker_unreachable_since is not None for t in threads):
        assert time.monotonic() - start < outage_s + 15, (
            f"a stream thread never reported the broker unreachable; the threads are at:\n{stacks(threads)}"
        )
        assert app.state in (ks.State.RUNNING, ks.State.REBALANCING), app.state
        assert all(t.is_alive() and t.error is None for t in threads)
        time.sleep(0.2)
    metrics = app.metrics()  # answers without asking the broker
    assert metrics["status"] == "broker unreachable" and metrics["lag"] == {}
    # and the report holds while the broker stays away (a commit with nothing to commit asks it nothing)
    for _ in range(30):
        assert all(t.broker_unreachable_since is not None for t in threads), "the report did not hold"
        time.sleep(0.05)


@pytest.mark.timeout(240)  # (the waits inside fail first, saying where the app stands)
@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once_v2"])
def test_broker_killed_while_processing(
    durable_kafka: DurableKafka, tmp_path: Path, caplog: pytest.LogCaptureFixture, guarantee: str
) -> None:
    """SIGKILL while records are being processed and delivered; an outage longer than a commit's flush
    timeout (5 s). at_least_once: nothing is lost, records processed but not committed before the kill
    count twice. exactly_once_v2: the commit in flight is retried or, when the broker gave up on the
    transaction, aborted and the tasks rebuilt from their changelogs; the counts end exact."""
    bootstrap = durable_kafka.bootstrap
    app = wordcount_app(bootstrap, guarantee, tmp_path / "state")
    states: list[ks.State] = []
    app.set_state_listener(lambda new, old: states.append(new))
    try:
        produce_lines(bootstrap, FIRST)
        threads = kill_the_broker_while_processing(app, durable_kafka, 1000)
        assert_waits_for_the_broker(app, threads, 8.0)
        assert "broker unreachable" in caplog.text
        durable_kafka.start()
        produce_lines(bootstrap, LATE)
        expected = word_counts(FIRST + LATE)
        counts = counts_when_done(app, expected, timeout=90)
        if guarantee == "exactly_once_v2":
            assert counts == dict(expected)
        else:
            assert set(counts) == set(expected)
            duplicates = {w: counts[w] - n for w, n in expected.items() if counts[w] > n}
            print(f"at_least_once after a broker kill: duplicates per word {duplicates}")
            assert counts["late"] == 200  # produced after the restart: counted exactly once
        assert all(t.is_alive() and t.error is None for t in threads)
        assert app.threads == threads  # the same threads, their tasks and stores kept
        assert all(t.broker_unreachable_since is None for t in threads)
        assert ks.State.ERROR not in states and ks.State.PENDING_ERROR not in states
    finally:
        assert app.stop(timeout=30)


def test_a_send_waiting_for_room_in_a_full_producer_queue_reports_the_broker_away(
    durable_kafka: DurableKafka, tmp_path: Path
) -> None:
    """at_least_once with a producer queue so small that sends wait for room all the time: with the broker
    away the thread (held in a send or in a commit) reports it unreachable, goes on once it is back, and
    nothing is lost."""
    bootstrap = durable_kafka.bootstrap
    produce_lines(bootstrap, FIRST)
    app = wordcount_app(bootstrap, "at_least_once", tmp_path / "state", SMALL_PRODUCER_QUEUE)
    try:
        threads = kill_the_broker_while_processing(app, durable_kafka, 300)
        assert_waits_for_the_broker(app, threads, 3.0)
        durable_kafka.start()
        produce_lines(bootstrap, LATE)
        expected = word_counts(FIRST + LATE)
        counts = counts_when_done(app, expected, timeout=90)
        assert set(counts) == set(expected) and counts["late"] == 200
        assert all(t.is_alive() and t.error is None for t in threads)
        assert all(t.broker_unreachable_since is None for t in threads)
    finally:
        assert app.stop(timeout=30)


def test_broker_killed_between_transactions_exactly_once(durable_kafka: DurableKafka, tmp_path: Path) -> None:
    """exactly_once_v2, SIGKILL while the app is idle (no transaction open): counts stay exact."""
    bootstrap = durable_kafka.bootstrap
    app = wordcount_app(bootstrap, "exactly_once_v2", tmp_path / "state")
    states: list[ks.State] = []
    app.set_state_listener(lambda new, old: states.append(new))
    first = [f"w{i % 7} w{i % 3} common" for i in range(300)]
    second = [f"w{i % 5} late common" for i in range(200)]
    try:
        ks.produce("lines", first, bootstrap_servers=bootstrap, partitions=2)
        app.start()
        app.wait_until_running(60)
        assert counts_when_done(app, word_counts(first)) == dict(word_counts(first))
        threads = list(app.threads)
        durable_kafka.kill(signal.SIGKILL)
        assert_waits_for_the_broker(app, threads, 8.0)
        durable_kafka.start()
        ks.produce("lines", second, bootstrap_servers=bootstrap, partitions=2)
        assert counts_when_done(app, word_counts(first + second)) == dict(word_counts(first + second))
        assert app.threads == threads
        assert ks.State.ERROR not in states and ks.State.PENDING_ERROR not in states
    finally:
        assert app.stop(timeout=30)


@pytest.mark.parametrize(
    ("guarantee", "client"),
    [("at_least_once", {}), ("at_least_once", SMALL_PRODUCER_QUEUE), ("exactly_once_v2", {})],
    ids=["at_least_once", "at_least_once-full-queue", "exactly_once_v2"],
)
def test_stop_while_the_broker_is_away(
    durable_kafka: DurableKafka, tmp_path: Path, guarantee: str, client: dict[str, Any]
) -> None:
    """stop() with the broker gone ends within its timeout (nothing waits for the broker, not even a send
    waiting for room in a full producer queue); the next run loses nothing: exactly_once_v2 drops the open
    transaction and counts end exact, at_least_once counts again what was not committed."""
    bootstrap = durable_kafka.bootstrap
    produce_lines(bootstrap, FIRST)
    app = wordcount_app(bootstrap, guarantee, tmp_path / "state", client)
    try:
        threads = kill_the_broker_while_processing(app, durable_kafka, 1000)
        assert_waits_for_the_broker(app, threads, 1.0)
        began = time.monotonic()
        assert app.stop(timeout=20), "the app did not stop with the broker away"
        print(f"{guarantee}: stopped {time.monotonic() - began:.1f}s after stop() with the broker away")
    finally:
        app.stop(timeout=30)
    durable_kafka.start()
    produce_lines(bootstrap, LATE)
    expected = word_counts(FIRST + LATE)
    again = wordcount_app(bootstrap, guarantee, tmp_path / "state", client)
    try:
        again.start()
        again.wait_until_running(60)
        counts = counts_when_done(again, expected, timeout=90)
    finally:
        assert again.stop(timeout=30)
    if guarantee == "exactly_once_v2":
        assert counts == dict(expected)
    else:
        assert set(counts) == set(expected) and counts["late"] == 200
    # a transactional call librdkafka held past its timeout while the broker was away has returned since
    wait_for(lambda: not [t for t in threading.enumerate() if t.name.endswith("-send-offsets")], timeout=30)


def test_send_offsets_to_transaction_answers_within_its_timeout_with_the_broker_gone(
    durable_kafka: DurableKafka,
) -> None:
    """librdkafka's own call can wait for a lost group coordinator past its timeout (librdkafka#5456):
    the producer's call answers within it, and its helper thread ends once the broker is back."""
    bootstrap = durable_kafka.bootstrap
    ks.produce("src", [1, 2, 3], bootstrap_servers=bootstrap)
    cluster = get_kafka_cluster(bootstrap, FAST_CLIENT_CONFIG)
    consumer = cluster.consumer("offsets-group", {})
    consumer.subscribe(["src"])
    wait_for(lambda: consumer.poll(0.2, 10), timeout=30, what="the consumer's first records")
    producer = cluster.producer({"transactional.id": "offsets-txn"})
    try:
        producer.init_transactions()
        producer.send("out", b"k", b"v")
        producer.send_offsets_to_transaction({TopicPartition("src", 0): 1}, consumer, timeout=10)
        durable_kafka.kill(signal.SIGKILL)
        began = time.monotonic()
        with pytest.raises(TransactionError) as failed:
            producer.send_offsets_to_transaction({TopicPartition("src", 0): 3}, consumer, timeout=2)
        assert time.monotonic() - began < 6, f"answered after {time.monotonic() - began:.1f}s"
        assert failed.value.retriable or failed.value.abortable, failed.value
        durable_kafka.start()
        wait_for(lambda: not [t for t in threading.enumerate() if t.name.endswith("-send-offsets")], timeout=60)
    finally:
        consumer.close()
        with contextlib.suppress(StreamsError):
            producer.close(2.0)


def _commit_with_the_broker_gone(durable_kafka: DurableKafka, group: str) -> tuple[Any, TopicPartition]:
    """A consumer of ``group`` that read ``src`` (assigned, so no session timeout takes the partition away
    while the broker is gone), and a commit of offset 7 sent just after the broker was killed."""
    ks.produce("src", list(range(10)), bootstrap_servers=durable_kafka.bootstrap)
    consumer = get_kafka_cluster(durable_kafka.bootstrap, FAST_CLIENT_CONFIG).consumer(group, {})
    tp = TopicPartition("src", 0)
    consumer.assign([tp])
    consumer.seek(tp, 0)  # (not from the group's committed offset: a new broker's coordinator is still loading)
    wait_for(lambda: consumer.poll(0.2, 10), timeout=30, what="the consumer's first records")
    durable_kafka.kill(signal.SIGKILL)
    consumer.commit_async({tp: 7})
    return consumer, tp


def test_offsets_a_broker_outage_did_not_take_are_committed_once_it_is_back(
    durable_kafka: DurableKafka, caplog: pytest.LogCaptureFixture
) -> None:
    """commit_async does not wait for the broker (polls go on meanwhile); the commit it could not make is
    sent again with the next one, though nothing new was read since."""
    consumer, tp = _commit_with_the_broker_gone(durable_kafka, "resend-group")
    try:
        with caplog.at_level(logging.INFO, logger="kstream_nb.kafka"):
            wait_for(
                lambda: consumer.poll(0.1) == [] and "sent again with the next commit" in caplog.text,
                timeout=90,
                what="the broker's answer to the commit",
            )
        durable_kafka.start()

        def committed_once_back() -> bool:
            consumer.commit_async({})  # nothing new: what the outage left is sent again (until it is taken)
            consumer.poll(0.2)
            with contextlib.suppress(StreamsError):  # the coordinator may still be loading
                return consumer.committed([tp]) == {tp: 7}
            return False

        wait_for(committed_once_back, timeout=60, what="offset 7 committed")
    finally:
        consumer.close()


def test_close_with_a_commit_waiting_for_the_broker_ends_within_its_timeout(durable_kafka: DurableKafka) -> None:
    """close(timeout) with a commit the absent coordinator has not answered returns after the timeout; the
    close goes on in the background and ends once librdkafka gives up on the commit (a session timeout)."""
    consumer, _ = _commit_with_the_broker_gone(durable_kafka, "close-group")
    closing = threading.Thread(target=consumer.close, args=(1.0,), daemon=True)
    closing.start()
    closing.join(20)
    assert not closing.is_alive(), "close(timeout=1.0) waited for the commit"
    wait_for(lambda: not [t for t in threading.enumerate() if t.name.endswith("-close")], timeout=90,
             what="the background close to end")  # fmt: skip
