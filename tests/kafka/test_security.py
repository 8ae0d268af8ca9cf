"""Security settings reach every client: Apache Kafka brokers whose only client listener is SASL/PLAIN, or TLS.

A client without ``security.protocol``/``sasl.*`` (or, over TLS, without ``ssl.ca.location`` naming the
broker's self-signed certificate) cannot talk to these brokers at all, so an app that creates its topics,
joins its group, restores a store from its changelog and commits transactions there proves that
``client_config`` reached its admin client, group consumers, restore consumers and transactional
producers; ``produce``/``read_topic`` take the same settings. A wrong password (or an untrusted
certificate) must fail fast with an error that says authentication failed, never leave the app waiting
for a broker that will not let it in, whichever client it was given to.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import kstream_nb as ks
from kstream_nb.cluster.connection import connect
from kstream_nb.cluster.kafka import close_clusters
from kstream_nb.cluster.local_kafka import LocalKafka, LocalKafkaError
from kstream_nb.errors import AuthenticationError, StreamsError

pytestmark = pytest.mark.kafka

USERS = {"admin": "admin-secret", "alice": "alice-secret"}
#: a user that is not the broker's own (``admin`` is its inter-broker login)
ALICE = {
    "security.protocol": "SASL_PLAINTEXT",
    "sasl.mechanism": "PLAIN",
    "sasl.username": "alice",
    "sasl.password": "alice-secret",
}
#: a member that died is noticed within 6 s; a topic created by another client is seen within a second
FAST = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 500, "topic.metadata.refresh.interval.ms": 1000}
#: Kafka's own integration tests: few partitions for the internal topics, so the first group and the first
#: transaction start at once
BROKER_PROPERTIES = {"offsets.topic.num.partitions": 5, "transaction.state.log.num.partitions": 5}

SENTENCES_1 = [f"w{i % 7} w{i % 3} w{i % 5}" for i in range(300)]
SENTENCES_2 = [f"w{i % 4} w{i % 6} x{i % 2}" for i in range(200)]


def _started(broker: LocalKafka) -> LocalKafka:
    try:
        return broker.start(timeout=120)
    except LocalKafkaError as e:
        pytest.fail(f"the security tests need a running Apache Kafka: {e}", pytrace=False)


@pytest.fixture(scope="module")
def sasl_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``host:port`` of a broker that only accepts SASL/PLAIN clients, for this module."""
    broker = LocalKafka(
        tmp_path_factory.mktemp("sasl-kafka"), 0, sasl_users=USERS, heap="512m", properties=BROKER_PROPERTIES
    )
    _started(broker)
    assert broker.client_config == {**ALICE, "sasl.username": "admin", "sasl.password": "admin-secret"}
    try:
        yield broker.bootstrap_servers
    finally:
        close_clusters(broker.bootstrap_servers)
        broker.stop()


@pytest.fixture(scope="module")
def tls_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalKafka]:
    """A broker that only accepts TLS clients, with a self-signed certificate (``ca_file``), for this module."""
    broker = _started(
        LocalKafka(tmp_path_factory.mktemp("tls-kafka"), 0, tls=True, heap="512m", properties=BROKER_PROPERTIES)
    )
    assert broker.client_config == {"security.protocol": "SSL", "ssl.ca.location": str(broker.ca_file)}
    assert broker.ca_file.read_text().startswith("-----BEGIN CERTIFICATE-----")
    try:
        yield broker
    finally:
        close_clusters(broker.bootstrap_servers)
        broker.stop()


@pytest.fixture(params=["SASL_PLAINTEXT", "SSL"])
def secured(request: pytest.FixtureRequest) -> tuple[str, dict[str, Any]]:
    """(bootstrap servers, the settings a client needs) of the SASL broker (as alice) or the TLS broker."""
    if request.param == "SASL_PLAINTEXT":
        return request.getfixturevalue("sasl_kafka"), ALICE
    broker: LocalKafka = request.getfixturevalue("tls_kafka")
    return broker.bootstrap_servers, broker.client_config


@pytest.fixture
def names() -> Callable[[str], str]:
    suffix = uuid.uuid4().hex[:8]
    return lambda name: f"{name}-{suffix}"


@pytest.fixture
def make_app(tmp_path: Path) -> Iterator[Callable[..., ks.KafkaStreams]]:
    """``make_app(bootstrap, topology, application_id, client_config, state=NAME, **config)``: an exactly-once
    app with its own state dir ``tmp_path/NAME``, stopped in teardown."""
    apps: list[ks.KafkaStreams] = []

    def make(
        bootstrap: str,
        topology: ks.Topology,
        application_id: str,
        client_config: dict[str, Any],
        state: str = "state",
        **config: Any,
    ) -> ks.KafkaStreams:
        config.setdefault("processing_guarantee", "exactly_once_v2")
        config.setdefault("commit_interval_ms", 100)
        config.setdefault("poll_ms", 20)
        app = ks.KafkaStreams(
            topology,
            application_id=application_id,
            bootstrap_servers=bootstrap,
            state_dir=str(tmp_path / state),
            client_config={**FAST, **client_config},
            **config,
        )
        apps.append(app)
        return app

    yield make
    for app in apps:
        app.stop(timeout=15)


def word_count(source: str, sink: str) -> ks.Topology:
    b = ks.StreamsBuilder()
    counts = b.stream(source).flat_map_values(str.split).group_by(lambda k, w: w).count(store="counts")
    counts.to_stream().to(sink)
    return b.build()


def test_a_client_without_the_settings_cannot_use_the_brokers(secured: tuple[str, dict[str, Any]]) -> None:
    """The premise of the tests below: any client the settings missed would not get through."""
    bootstrap, client_config = secured
    assert connect(bootstrap).reachable(3.0) is False
    assert connect(bootstrap, client_config).reachable(10.0) is True


def test_client_config_reaches_admin_group_consumers_restore_consumers_and_producers(
    secured: tuple[str, dict[str, Any]], names: Callable[[str], str], make_app: Callable[..., ks.KafkaStreams]
) -> None:
    bootstrap, client_config = secured
    source, sink, app_id = names("sentences"), names("counts"), names("secured-wc")
    # produce: admin (creates the topic) and producer
    assert ks.produce(source, SENTENCES_1, bootstrap, partitions=2, client_config=client_config) == 300

    # admin (internal topics), group consumers, transactional producers
    first = make_app(bootstrap, word_count(source, sink), app_id, client_config, state="first")
    first.start().wait_until_running(90).wait_until_idle(60)
    counts_1 = Counter(w for s in SENTENCES_1 for w in s.split())
    assert dict(first.store("counts").all()) == dict(counts_1)
    assert first.metrics()["commit-total"] > 0
    assert first.stop(timeout=30)
    topics = connect(bootstrap, client_config).admin().list_topics()
    assert f"{app_id}-counts-changelog" in topics
    assert any(t.startswith(app_id) and t.endswith("-repartition") for t in topics), topics

    # a new instance with empty local state: its restore consumers rebuild the counts from the changelog,
    # and the counts go on from there
    ks.produce(source, SENTENCES_2, bootstrap, client_config=client_config)
    second = make_app(bootstrap, word_count(source, sink), app_id, client_config, state="second")
    second.start().wait_until_running(90).wait_until_idle(60)
    total = counts_1 + Counter(w for s in SENTENCES_2 for w in s.split())
    assert dict(second.store("counts").all()) == dict(total)
    assert second.stop(timeout=30)

    # read_committed through read_topic's own clients: every increment exactly once, in order, per word
    out = ks.read_topic(sink, bootstrap, client_config=client_config)
    assert Counter(out["key"]) == total
    for word, n in total.items():
        assert list(out.loc[out["key"] == word, "value"]) == list(range(1, n + 1)), word


def _fails_with_authentication(app: ks.KafkaStreams, reason: str) -> AuthenticationError:
    """Starts ``app``; it must fail (at ``start()`` or soon after, in ERROR) with an AuthenticationError
    that gives the broker's or the TLS library's ``reason``."""
    with pytest.raises(StreamsError) as failed:
        app.start()
        app.wait_until_running(60)  # a hang ends here in TimeoutError, which is no StreamsError
    error = failed.value if isinstance(failed.value, AuthenticationError) else failed.value.__cause__
    assert isinstance(error, AuthenticationError), repr(failed.value)
    message = str(error)
    assert f"authentication with {app.config.bootstrap_servers} failed" in message
    assert reason in message
    assert "sasl.password" in message and "ssl.ca.location" in message  # what to check
    return error


WRONG_PASSWORD = "Authentication failed: Invalid username or password"


def test_a_wrong_password_fails_start_with_an_authentication_error(
    sasl_kafka: str, names: Callable[[str], str], make_app: Callable[..., ks.KafkaStreams]
) -> None:
    source = names("sentences")
    ks.produce(source, SENTENCES_1[:10], bootstrap_servers=sasl_kafka, client_config=ALICE)
    wrong = {**ALICE, "sasl.password": "wrong"}
    app = make_app(sasl_kafka, word_count(source, names("counts")), names("wrong"), wrong)
    _fails_with_authentication(app, WRONG_PASSWORD)
    assert app.state in (ks.State.CREATED, ks.State.ERROR, ks.State.PENDING_ERROR)

    # read_topic says so too (within a second), instead of waiting out its metadata timeout with
    # "transport failure"
    with pytest.raises(AuthenticationError, match=WRONG_PASSWORD):
        ks.read_topic(source, bootstrap_servers=sasl_kafka, client_config=wrong)


def test_an_untrusted_certificate_fails_start_with_an_authentication_error(
    tls_kafka: LocalKafka, names: Callable[[str], str], make_app: Callable[..., ks.KafkaStreams]
) -> None:
    """TLS without the broker's CA: the handshake fails (``_SSL``), and the app says so."""
    source = names("sentences")
    ks.produce(source, SENTENCES_1[:10], tls_kafka.bootstrap_servers, client_config=tls_kafka.client_config)
    app = make_app(
        tls_kafka.bootstrap_servers,
        word_count(source, names("counts")),
        names("no-ca"),
        {"security.protocol": "SSL"},
    )
    _fails_with_authentication(app, "certificate verify failed")


@pytest.mark.parametrize("prefix", ["main.consumer.", "restore.consumer.", "producer."])
def test_a_wrong_password_given_to_one_kind_of_client_fails_the_app(
    sasl_kafka: str, names: Callable[[str], str], make_app: Callable[..., ks.KafkaStreams], prefix: str
) -> None:
    """Kafka Streams' prefixes give a setting to one kind of client: the admin logs in (start() passes),
    the client with the wrong password fails the app with the authentication error. A first instance
    with the right settings leaves a changelog, so the second one (empty state) must restore from it.
    (A transactional producer reports it when ``init_transactions`` gives up, after 30 s.)"""
    source, sink, app_id = names("sentences"), names("counts"), names("wrong-one")
    ks.produce(source, SENTENCES_1[:10], bootstrap_servers=sasl_kafka, client_config=ALICE)
    first = make_app(sasl_kafka, word_count(source, sink), app_id, ALICE, state="first")
    first.start().wait_until_running(90).wait_until_idle(60)
    assert first.stop(timeout=30)

    wrong = {**ALICE, f"{prefix}sasl.password": "wrong"}
    app = make_app(sasl_kafka, word_count(source, sink), app_id, wrong, state="second")
    _fails_with_authentication(app, WRONG_PASSWORD)
    assert app.state in (ks.State.ERROR, ks.State.PENDING_ERROR)
