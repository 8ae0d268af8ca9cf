"""Interactive queries across instances on Apache Kafka (issue 25 item 4).

Instances find each other through the assignment on the ``<application_id>-assignment`` control topic, which
carries each instance's ``application_server``. The input is written by librdkafka with its Java-compatible
``murmur2_random`` partitioner, so the partition ``metadata_for_key`` computes is checked against where Kafka put
the records (read back from the topic); counts against a ``collections.Counter`` of the input.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

import kstream_nb as ks
from kstream_nb.errors import InvalidStateStoreError
from tests.helpers import wait_for

pytestmark = pytest.mark.kafka

PARTITIONS = 4
KEYS = [f"key-{i}" for i in range(199)] + ["clé-ü"]
ROOT = Path(__file__).resolve().parents[2]
RUNNER = Path(__file__).with_name("iq_instance.py")
TOKEN = "iq-token"


def keyed_counts(source: str) -> ks.Topology:
    b = ks.StreamsBuilder()
    b.stream(source).group_by_key().count(store="counts")
    return b.build()


def produce_words(bootstrap: str, topic: str, n: int = 2000) -> Counter[str]:
    """Keys as UTF-8 (Java's StringSerializer), values JSON, partitioned by librdkafka's murmur2 (Java's)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    rng = random.Random(25)
    words = [rng.choice(KEYS) for _ in range(n)] + KEYS
    producer = Producer({"bootstrap.servers": bootstrap, "partitioner": "murmur2_random"})
    for word in words:
        producer.produce(topic, key=word.encode(), value=json.dumps(word).encode())
    assert producer.flush(30) == 0
    return Counter(words)


def answers(store: Any, keys: list[str]) -> dict[str, Any] | None:
    """``store.get`` of every key, or None while a holder answers 503 (its task restores after a move)."""
    try:
        return {k: store.get(k) for k in keys}
    except InvalidStateStoreError:
        return None


def settled(apps: list[ks.KafkaStreams], endpoints: int) -> bool:
    """Each app's view lists ``endpoints`` instances with endpoints, each running some of the tasks and every
    task run by exactly one of them (2 instances get 2 of the 4 each)."""
    views = [[m for m in app.all_metadata() if m.host_info.port > 0] for app in apps]
    return all(
        len(view) == endpoints
        and all(m.active_tasks for m in view)
        and sorted(t for m in view for t in m.active_tasks) == [f"0_{p}" for p in range(PARTITIONS)]
        for view in views
    )


def held(apps: list[ks.KafkaStreams]) -> list[str]:
    return sorted(t for app in apps for per_thread in app.assignment().values() for t in per_thread)


def test_metadata_and_scope_all_over_two_instances(make_kafka_app, names, kafka_bootstrap, tmp_path):
    source = names("words")
    expected = produce_words(kafka_bootstrap, source)
    app_id = names("iq")
    settings = {"application_server": "127.0.0.1:0", "application_server_token": TOKEN}
    apps = [
        make_kafka_app(keyed_counts(source), application_id=app_id, state_dir=str(tmp_path / n), **settings)
        for n in ("a", "b")
    ]
    for app in apps:
        app.start()
    all_tasks = [f"0_{p}" for p in range(PARTITIONS)]
    wait_for(
        lambda: settled(apps, 2) and held(apps) == all_tasks, 90, "both instances on the board with their tasks"
    )
    for app in apps:
        app.wait_until_idle(60)
    records = ks.read_topic(source, bootstrap_servers=kafka_bootstrap)
    partition_of = dict(zip(records["key"], records["partition"]))
    assert set(records.groupby("key")["partition"].nunique()) == {1}
    hosts = {ks.HostInfo.parse(app.endpoint or ""): app for app in apps}
    for key in KEYS:
        for asking in apps:
            meta = asking.metadata_for_key("counts", key)
            assert meta.partition == partition_of[key], key
            holder = hosts[meta.active_host]
            assert holder.store("counts").get(key) == expected[key], key
            assert next(a for a in apps if a is not holder).store("counts").get(key) is None, key
    assert {hosts[apps[0].metadata_for_key("counts", k).active_host] for k in KEYS} == set(apps)
    for app in apps:
        store = app.store("counts", scope="all")
        assert {k: store.get(k) for k in KEYS} == expected
        store.page_size = 16
        assert [(kv.key, kv.value) for kv in store.all()] == sorted(expected.items())

    def status(headers: dict[str, str]) -> int:
        request = urllib.request.Request(f"http://{apps[0].endpoint}/v1/stores/counts/all", headers=headers)
        try:
            with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(request, timeout=10) as r:
                return int(r.status)
        except urllib.error.HTTPError as e:
            return e.code

    assert (status({}), status({"Authorization": "Bearer nope"})) == (401, 401)
    assert status({"Authorization": f"Bearer {TOKEN}"}) == 200


class Instance:
    """``iq_instance.py`` in its own process; its output goes to ``log``."""

    def __init__(self, args: list[str], log: Path) -> None:
        path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
        self.log = log
        with log.open("ab") as out:
            self.process = subprocess.Popen(
                [sys.executable, str(RUNNER), *args], stdout=out, stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONPATH": path},
            )  # fmt: skip

    def line(self, prefix: str) -> str | None:
        if self.process.poll() is not None:
            pytest.fail(f"instance exited ({self.process.returncode}):\n{self.log.read_text()[-3000:]}")
        found = [ln for ln in self.log.read_text(errors="replace").splitlines() if ln.startswith(prefix)]
        return found[-1].removeprefix(prefix) if found else None

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)


def test_a_standby_answers_for_a_killed_instance_with_stale(make_kafka_app, names, kafka_bootstrap, tmp_path):
    source = names("words")
    expected = produce_words(kafka_bootstrap, source, 1000)
    app_id = names("iq-standby")
    # a session long enough that the group has not noticed the SIGKILL when the queries below run
    session_ms = 20_000
    other = Instance(
        [kafka_bootstrap, app_id, source, str(tmp_path / "b"), str(session_ms), TOKEN], tmp_path / "b.log"
    )
    try:
        here = make_kafka_app(
            keyed_counts(source), application_id=app_id, state_dir=str(tmp_path / "a"), num_standby_replicas=1,
            application_server="127.0.0.1:0", application_server_token=TOKEN,
            client_config={"session.timeout.ms": session_ms},
        )  # fmt: skip
        here.start()
        endpoint = ks.HostInfo.parse(
            wait_for(lambda: other.line("ENDPOINT "), 60, "the other instance's endpoint")
        )
        wait_for(lambda: settled([here], 2), 120, "both instances on the board with their tasks")
        here.wait_until_idle(60)
        remote = [k for k in KEYS if here.metadata_for_key("counts", k).active_host == endpoint]
        assert remote and all(here.store("counts").get(k) is None for k in remote)
        everywhere = here.store("counts", scope="all", timeout=5)
        wait_for(lambda: answers(everywhere, remote) == {k: expected[k] for k in remote}, 60,
                 "the other instance to have counted its keys")  # fmt: skip
        mine = ks.HostInfo.parse(here.endpoint or "")
        wait_for(lambda: all(here.metadata_for_key("counts", k).standby_hosts == (mine,) for k in remote), 60,
                 "this instance to keep standby copies of the other's tasks")  # fmt: skip
        key = remote[0]
        meta = here.metadata_for_key("counts", key)

        other.process.send_signal(signal.SIGKILL)
        other.process.wait(10)
        assert here.metadata_for_key("counts", key).active_host == endpoint  # the group has not noticed yet
        with pytest.raises(InvalidStateStoreError) as error:
            everywhere.get(key)
        message = str(error.value)
        assert f"key {key!r} (partition {meta.partition}" in message and str(endpoint) in message, message
        stale = here.store("counts", scope="all", stale=True, timeout=5)
        wait_for(lambda: answers(stale, remote) == {k: expected[k] for k in remote}, 30,
                 "the standby copies to answer with the exact counts")  # fmt: skip
        # once the group has evicted the killed instance, this one runs its tasks: the plain view answers again
        wait_for(lambda: here.metadata_for_key("counts", key).active_host == mine, 120, "the failover")
        here.wait_until_idle(60)
        assert {k: everywhere.get(k) for k in KEYS} == expected
    finally:
        other.stop()
