"""Interactive queries across instances on ``memory://`` (issue 25 item 4): two instances of one application, each
serving its stores on a loopback ``application_server``; ``metadata_for_key`` names the instance holding a key,
and ``store(name, scope="all")`` answers any key from either instance.

Expectations are independent of the routing code: the partitions come from reading the input topic back, the
counts from a ``collections.Counter`` of the input, the holder from each instance's LOCAL store.
"""

from __future__ import annotations

import json
import random
import socket
import threading
import urllib.error
import urllib.request
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import kstream_nb as ks
from kstream_nb.cluster.memory import reset_cluster
from kstream_nb.errors import InvalidStateStoreError
from tests.helpers import wait_for

PARTITIONS = 4
KEYS = [f"key-{i}" for i in range(199)] + ["clé-ü"]  # 200 keys, one beyond ASCII


@pytest.fixture
def url() -> Iterator[str]:
    address = f"memory://iq-{uuid.uuid4().hex[:10]}"
    yield address
    reset_cluster(address)


@pytest.fixture
def make_app(url: str, tmp_path: Any) -> Iterator[Callable[..., ks.KafkaStreams]]:
    """``make_app(topology, **config)``: an instance of application ``iq`` with its own state dir and a loopback
    ``application_server`` on a free port; every one is stopped in teardown."""
    apps: list[ks.KafkaStreams] = []

    def make(topology: ks.Topology, **config: Any) -> ks.KafkaStreams:
        config.setdefault("commit_interval_ms", 50)
        config.setdefault("poll_ms", 20)
        config.setdefault("application_server", "127.0.0.1:0")
        config.setdefault("state_dir", str(tmp_path / f"instance-{len(apps)}"))
        app = ks.KafkaStreams(topology, application_id="iq", bootstrap_servers=url, **config)
        apps.append(app)
        return app

    yield make
    for app in apps:
        app.stop(timeout=10)


def word_counts() -> ks.Topology:
    b = ks.StreamsBuilder()
    b.stream("words").group_by_key().count(store="counts")
    return b.build()


def produce_words(url: str, n: int = 3000) -> Counter[str]:
    rng = random.Random(25)
    words = [rng.choice(KEYS) for _ in range(n)] + KEYS  # every key at least once
    ks.produce("words", [(w, w) for w in words], bootstrap_servers=url, partitions=PARTITIONS)
    return Counter(words)


def start_all(*apps: ks.KafkaStreams) -> None:
    for app in apps:
        app.start()
    for app in apps:
        app.wait_until_running(30, progress=False)

    def settled() -> bool:  # every task held once, every instance knowing every endpoint
        held = [t for app in apps for per_thread in app.assignment().values() for t in per_thread]
        hosts = {m.host_info for app in apps for m in app.all_metadata()}
        return sorted(held) == [f"0_{p}" for p in range(PARTITIONS)] and len(hosts) == len(apps)

    wait_for(settled, 30, "the tasks spread over the instances")
    for app in apps:
        app.wait_until_idle(30)


def by_endpoint(apps: tuple[ks.KafkaStreams, ...]) -> dict[ks.HostInfo, ks.KafkaStreams]:
    return {ks.HostInfo.parse(app.endpoint or ""): app for app in apps}


def test_metadata_names_the_instance_whose_local_store_holds_each_key(make_app, url):
    expected = produce_words(url)
    apps = make_app(word_counts()), make_app(word_counts())
    start_all(*apps)
    # the partition each key's records went to, read back from the input topic
    records = ks.read_topic("words", bootstrap_servers=url)
    partition_of = dict(zip(records["key"], records["partition"]))
    assert set(records.groupby("key")["partition"].nunique()) == {1}
    hosts = by_endpoint(apps)
    assert len(hosts) == 2 and all(h.host == "127.0.0.1" and h.port > 0 for h in hosts)
    assert {hosts[apps[0].metadata_for_key("counts", k).active_host] for k in KEYS} == set(apps)  # both hold keys
    for key in KEYS:
        for asking in apps:
            meta = asking.metadata_for_key("counts", key)
            assert meta.partition == partition_of[key], key
            holder = hosts[meta.active_host]
            assert holder.store("counts").get(key) == expected[key], key
            other = next(a for a in apps if a is not holder)
            assert other.store("counts").get(key) is None, key
            assert meta.standby_hosts == ()  # num_standby_replicas=0


def test_store_scope_all_answers_every_key_from_every_instance(make_app, url):
    expected = produce_words(url)
    apps = make_app(word_counts()), make_app(word_counts())
    start_all(*apps)
    for app in apps:
        store = app.store("counts", scope="all")
        assert {k: store.get(k) for k in KEYS} == expected
        assert store.get("never-seen") is None
        store.page_size = 7  # many pages per instance: every entry exactly once
        assert [(kv.key, kv.value) for kv in store.all()] == sorted(expected.items())
        assert dict(store.range("key-10", "key-12")) == {
            k: n for k, n in expected.items() if "key-10" <= k <= "key-12"
        }
        frame = store.to_pandas()
        assert dict(zip(frame["key"], frame["value"])) == expected
    metadata = apps[0].all_metadata()
    assert sorted(t for m in metadata for t in m.active_tasks) == [f"0_{p}" for p in range(PARTITIONS)]
    assert all(m.state_store_names == {"counts"} for m in metadata if m.active_tasks)
    assert {m.host_info for m in metadata} == set(by_endpoint(apps))


def test_window_store_fetch_across_instances(make_app, url):
    rng = random.Random(7)
    keys = [f"user-{i}" for i in range(40)]
    rows = [(rng.choice(keys), rng.randrange(0, 60_000)) for _ in range(1000)]
    ks.produce("clicks", [(k, 1) for k, _ in rows], bootstrap_servers=url, partitions=PARTITIONS,
               timestamps=[t for _, t in rows])  # fmt: skip
    expected = Counter((k, t // 10_000 * 10_000) for k, t in rows)

    def windowed() -> ks.Topology:
        b = ks.StreamsBuilder()
        b.stream("clicks").group_by_key().windowed_by(ks.TimeWindows.of(10_000).grace(100_000)).count(
            store="per-10s"
        )
        return b.build()

    apps = make_app(windowed()), make_app(windowed())
    start_all(*apps)
    for app in apps:
        store = app.store("per-10s", scope="all")
        for key in keys:
            got = {(key, start): n for start, _end, n in store.fetch(key, 0, 60_000)}
            assert got == {kw: n for kw, n in expected.items() if kw[0] == key}
        assert {(k, s): n for k, s, _e, n in store.all()} == expected


def test_the_endpoint_asks_for_the_token(make_app, url):
    expected = produce_words(url, 500)
    a = make_app(word_counts(), application_server_token="s3cret-a")
    b = make_app(word_counts(), application_server_token="not-the-same")  # misconfigured: the wrong token
    start_all(a, b)

    def status(headers: dict[str, str]) -> int:
        request = urllib.request.Request(f"http://{a.endpoint}/v1/stores/counts/all?limit=5", headers=headers)
        try:
            with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(request, timeout=10) as r:
                json.loads(r.read())
                return int(r.status)
        except urllib.error.HTTPError as e:
            return e.code

    assert status({}) == 401
    assert status({"Authorization": "Bearer wrong"}) == 401
    assert status({"Authorization": "Bearer s3cret-a"}) == 200
    key_on_a = next(k for k in KEYS if a.store("counts").get(k) is not None)
    with pytest.raises(InvalidStateStoreError) as error:
        b.store("counts", scope="all").get(key_on_a)
    meta = b.metadata_for_key("counts", key_on_a)
    message = str(error.value)
    assert "401" in message and "'counts'" in message and repr(key_on_a) in message
    assert f"partition {meta.partition}" in message and str(a.endpoint) in message
    assert a.store("counts", scope="all").get(key_on_a) == expected[key_on_a]  # its own keys: no HTTP


def test_a_standby_answers_with_stale_when_the_active_does_not(make_app, url):
    expected = produce_words(url, 1000)
    a = make_app(word_counts(), num_standby_replicas=1)
    b = make_app(word_counts(), num_standby_replicas=1)
    start_all(a, b)
    key = next(k for k in KEYS if b.store("counts").get(k) is not None)  # active on b
    meta = a.metadata_for_key("counts", key)
    assert meta.active_host == ks.HostInfo.parse(b.endpoint or "")
    assert meta.standby_hosts == (ks.HostInfo.parse(a.endpoint or ""),)
    b._stop_serving()  # b's endpoint stops answering (as across a network partition); b keeps its tasks
    with pytest.raises(InvalidStateStoreError) as error:
        a.store("counts", scope="all", timeout=5).get(key)
    message = str(error.value)
    assert f"key {key!r} (partition {meta.partition}" in message and str(meta.active_host) in message
    assert "stale=True" in message
    stale = a.store("counts", scope="all", stale=True, timeout=5)
    wait_for(lambda: stale.get(key) == expected[key], 15, "the standby copy to catch up")
    assert {k: stale.get(k) for k in KEYS} == expected
    assert dict(stale.all()) == expected


def test_kstream_store_magic_asks_every_instance(make_app, url):
    from IPython.core.interactiveshell import InteractiveShell

    expected = produce_words(url, 500)
    apps = make_app(word_counts()), make_app(word_counts())
    start_all(*apps)
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "kstream_nb.jupyter")
    for key in KEYS[:20]:
        frame = shell.run_line_magic("kstream", f"store iq counts {key}")
        assert frame.to_dict("records") == [{"key": key, "value": expected[key]}]
    frame = shell.run_line_magic("kstream", "store iq counts")
    assert dict(zip(frame["key"], frame["value"])) == expected


def test_stop_ends_the_query_server(make_app, url):
    produce_words(url, 100)
    app = make_app(word_counts(), application_server=":0")  # empty host: loopback
    start_all(app)
    host = ks.HostInfo.parse(app.endpoint or "")
    assert host.host == "127.0.0.1"
    assert app.store("counts", scope="all").get(KEYS[0]) is not None
    assert app.stop(timeout=10)
    assert not [t.name for t in threading.enumerate() if t.name.endswith("-query-server") and t.is_alive()]
    with pytest.raises(OSError):
        socket.create_connection((host.host, host.port), timeout=5).close()


def test_application_server_is_checked():
    with pytest.raises(ValueError, match="application_server must be 'host:port'"):
        ks.KafkaStreams(word_counts(), "iq-bad", application_server="localhost")


def http_get(endpoint: str, path: str) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(f"http://{endpoint}{path}")
    try:
        with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(request, timeout=10) as r:
            return int(r.status), json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_an_instance_answers_503_for_a_task_it_does_not_run(make_app, url):
    produce_words(url, 500)
    a = make_app(word_counts(), num_standby_replicas=1)
    b = make_app(word_counts(), num_standby_replicas=1)
    start_all(a, b)
    on_b = sorted(t for per_thread in b.assignment().values() for t in per_thread)
    status, body = http_get(a.endpoint or "", f"/v1/stores/counts/all?tasks={on_b[0]}")
    assert status == 503 and f"task {on_b[0]} is not active on {a.endpoint}" in body["error"]
    wait_for(lambda: on_b[0] in {t for ts in a.standby_assignment().values() for t in ts}, 15, "a's standby")
    status, body = http_get(a.endpoint or "", f"/v1/stores/counts/all?tasks={on_b[0]}&stale=true")
    assert status == 200 and body["next"] is None
    assert http_get(a.endpoint or "", "/v1/stores/nope/all")[0] == 404
    assert http_get(a.endpoint or "", "/v1/stores/counts/get?key=***")[0] == 400


def test_a_global_store_answers_from_the_instance_asked(make_app, url):
    ks.produce("prices", [("apple", 3), ("pear", 5)], bootstrap_servers=url, partitions=2)

    def with_global() -> ks.Topology:
        b = ks.StreamsBuilder()
        b.global_table("prices", store="prices")
        b.stream("words").group_by_key().count(store="counts")
        return b.build()

    produce_words(url, 100)
    apps = make_app(with_global()), make_app(with_global())
    start_all(*apps)
    for app in apps:
        wait_for(lambda app=app: app.store("prices", scope="all").get("pear") == 5, 15, "the global store")
        assert app.metadata_for_key("prices", "pear").active_host == ks.HostInfo.parse(app.endpoint or "")
