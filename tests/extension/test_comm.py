"""The ``kstream_nb.panel`` comm protocol (kernel side), driven without a kernel or browser."""

from __future__ import annotations

import json
import struct
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import kstream_nb as ks
from kstream_nb.cluster.memory import reset_cluster
from kstream_nb.cluster.serde_specs import Serdes
from kstream_nb.jupyter.comm import (
    PROTOCOL_VERSION,
    TARGET_NAME,
    PanelHandler,
    app_key,
    register_comm_target,
    show_bytes,
)
from tests.helpers import wait_for


@pytest.fixture
def url() -> Iterator[str]:
    address = f"memory://x-{uuid.uuid4().hex[:10]}"
    yield address
    reset_cluster(address)


@pytest.fixture
def app(url: str) -> Iterator[ks.KafkaStreams]:
    ks.produce("words", [(None, "a b"), (None, "b c"), (None, "c a")], url, partitions=2)
    b = ks.StreamsBuilder()
    counts = b.stream("words").flat_map_values(str.split).group_by(lambda k, w: w).count(store="counts")
    counts.to_stream().to("wc")
    a = ks.KafkaStreams(b.build(), "wordcount", url, num_stream_threads=2, commit_interval_ms=50, poll_ms=20)
    a.start()
    yield a
    a.stop(timeout=10)


class Shell:
    def __init__(self) -> None:
        self.user_ns: dict[str, Any] = {}


def ask(handler: PanelHandler, op: str, **args: Any) -> dict[str, Any]:
    reply = handler.handle({"v": 1, "id": f"r-{op}", "op": op, **args})
    json.dumps(reply, allow_nan=False)
    assert reply["v"] == PROTOCOL_VERSION and reply["id"] == f"r-{op}" and reply["op"] == op
    return reply


@pytest.mark.parametrize(
    ("request_", "needle"),
    [
        (None, "JSON object"),
        ([1, 2], "JSON object"),
        ("list_apps", "JSON object"),
        ({"op": "list_apps"}, "protocol version"),
        ({"v": 2, "op": "list_apps"}, "protocol version"),
        ({"v": 1}, "unknown op"),
        ({"v": 1, "op": "drop_database"}, "unknown op"),
        ({"v": 1, "op": "__init__"}, "unknown op"),
        ({"v": 1, "op": "stop"}, "'app'"),
        ({"v": 1, "op": "stop", "app": "nope"}, "no app with key"),
        ({"v": 1, "op": "topic_tail"}, "'topic'"),
        ({"v": 1, "op": "topic_tail", "topic": "t", "n": 0}, "'n'"),
        ({"v": 1, "op": "topic_tail", "topic": "t", "n": "5"}, "'n'"),
        ({"v": 1, "op": "topics", "bootstrap": 3}, "'bootstrap'"),
        ({"v": 1, "id": {"x": 1}, "op": "hello"}, "'id'"),
    ],
)
def test_malformed_requests_get_error_replies(request_: Any, needle: str) -> None:
    reply = PanelHandler(Shell()).handle(request_)
    assert reply["ok"] is False and needle in reply["error"], reply
    assert reply["v"] == PROTOCOL_VERSION
    json.dumps(reply)


def test_hello_names_version_and_ops() -> None:
    reply = ask(PanelHandler(), "hello")
    assert reply["ok"] and reply["protocol"] == 1 and "list_apps" in reply["ops"]


def test_list_apps_reports_rate_lag_tasks(app: ks.KafkaStreams) -> None:
    handler = PanelHandler(Shell())
    wait_for(lambda: app.metrics()["process-total"] >= 3, what="records processed")
    reply = ask(handler, "list_apps")
    assert reply["ok"]
    rows = [r for r in reply["apps"] if r["key"] == app_key(app)]
    assert len(rows) == 1
    row = rows[0]
    assert row["name"] == "wordcount" and row["state"] in ("RUNNING", "REBALANCING")
    assert row["tasks"] == 4 and row["threads"] == 2 and row["processed"] >= 3
    assert isinstance(row["lag"], int) and isinstance(row["records_per_s"], float)


def test_stopped_apps_stay_listed_while_referenced(url: str) -> None:
    shell = Shell()
    b = ks.StreamsBuilder()
    b.stream("in").to("out")
    ks.produce("in", [1, 2], url)
    created = ks.KafkaStreams(b.build(), "idle", url)
    shell.user_ns["idle_app"] = created
    handler = PanelHandler(shell)
    names = {r["key"]: r["state"] for r in ask(handler, "list_apps")["apps"]}
    assert names[app_key(created)] == "CREATED"
    created.start()
    created.stop(timeout=10)
    del shell.user_ns["idle_app"]  # still alive here (local variable): remembered from the earlier answer
    states = {r["key"]: r["state"] for r in ask(handler, "list_apps")["apps"]}
    assert states[app_key(created)] == "NOT_RUNNING"


def test_stop_from_the_panel(app: ks.KafkaStreams) -> None:
    handler = PanelHandler(Shell())
    reply = ask(handler, "stop", app=app_key(app))
    assert reply["ok"] and reply["stopped"] is True and reply["app"]["state"] == "NOT_RUNNING"
    assert app.state is ks.State.NOT_RUNNING
    assert app not in ks.running_apps()


def test_restart_runs_same_topology_and_config(app: ks.KafkaStreams, url: str) -> None:
    handler = PanelHandler(Shell())
    wait_for(lambda: app.metrics()["process-total"] >= 3, what="records processed")
    reply = ask(handler, "restart", app=app_key(app))
    assert reply["ok"], reply
    assert reply["replaced"] == app_key(app) and app.state is ks.State.NOT_RUNNING
    new_key = reply["app"]["key"]
    assert new_key != app_key(app) and reply["app"]["name"] == "wordcount"
    (new,) = [a for a in ks.running_apps() if app_key(a) == new_key]
    try:
        assert new.topology is app.topology
        assert new.config.num_stream_threads == 2 and new.config.commit_interval_ms == 50
        ks.produce("words", [(None, "a")], url)

        def count_a() -> bool:
            try:
                return bool(new.store("counts").get("a") == 3)
            except ks.StreamsError:  # not yet running
                return False

        wait_for(count_a, what="restarted app counts the new record")
        keys = {r["key"] for r in ask(handler, "list_apps")["apps"]}
        assert {app_key(app), new_key} <= keys
    finally:
        new.stop(timeout=10)


def test_app_detail_has_topology_and_assignment(app: ks.KafkaStreams) -> None:
    handler = PanelHandler(Shell())
    app.wait_until_running()
    wait_for(lambda: sum(len(t) for t in app.assignment().values()) == 4, what="tasks assigned")
    reply = ask(handler, "app_detail", app=app_key(app))
    assert reply["ok"], reply
    assert [s["id"] for s in reply["topology"]["subtopologies"]] == [0, 1]
    tasks = {task for thread in reply["assignment"].values() for task in thread}
    assert tasks == {"0_0", "0_1", "1_0", "1_1"}
    assert set(reply["group_assignment"]) == tasks
    assert "process-total" in reply["metrics"]


def test_topics_and_tail(app: ks.KafkaStreams, url: str) -> None:
    handler = PanelHandler(Shell())
    wait_for(lambda: app.metrics()["process-total"] >= 3, what="records processed")
    reply = ask(handler, "topics", app=app_key(app))
    assert reply["ok"] and reply["bootstrap"] == url
    by_name = {t["name"]: t for t in reply["topics"]}
    assert by_name["words"]["partitions"] == 2 and by_name["words"]["records"] == 3
    assert len(by_name["words"]["end_offsets"]) == 2
    assert by_name["wordcount-counts-changelog"]["internal"] is True
    same = ask(handler, "topics", bootstrap=url)
    assert [t["name"] for t in same["topics"]] == [t["name"] for t in reply["topics"]]

    ks.produce("events", [("k", {"n": i}) for i in range(30)], url)
    tail = ask(handler, "topic_tail", topic="events", n=5, bootstrap=url)
    assert tail["ok"], tail
    assert [r["value"] for r in tail["records"]] == [{"n": i} for i in range(25, 30)]
    assert [r["offset"] for r in tail["records"]] == list(range(25, 30))
    assert tail["records"][0]["key"] == "k"

    missing = ask(handler, "topic_tail", topic="nope", bootstrap=url)
    assert missing["ok"] is False and "nope" in missing["error"]


def test_show_bytes_json_text_binary() -> None:
    assert show_bytes(b'{"a": [1, 2]}') == {"a": [1, 2]}
    assert show_bytes(b"plain text") == "plain text"
    assert show_bytes(b"\xff\x00") == "0xff00"
    assert show_bytes(struct.pack(">q", 1_764_000_000_000)) == 1_764_000_000_000  # Java's LongSerializer
    assert show_bytes(None) is None


def test_topic_tail_decodes_each_record_in_its_format(url: str) -> None:
    """The panel's topic browser: Java String keys and longs, Avro through the embedded registry, JSON and
    bytes no rule decodes, each named by its format; nothing fails."""
    click = {"type": "record", "name": "Click", "fields": [{"name": "page", "type": "string"}]}
    ks.produce(
        "mixed", [("sensor-1", 1_764_000_000_000)], url, timestamps=1, key_serde="string", value_serde="long"
    )
    ks.produce("mixed", [("sensor-2", {"page": "/home"})], url, timestamps=2, value_serde=Serdes.avro(click))
    ks.produce("mixed", [("sensor-3", {"t": 21.5})], url, timestamps=3, headers={"trace": b"abc"})
    ks.produce("mixed", [(7, b"\xca\xfe\x00")], url, timestamps=4, key_serde="int", value_serde="bytes")
    tail = ask(PanelHandler(Shell()), "topic_tail", topic="mixed", n=10, bootstrap=url)
    assert tail["ok"], tail
    shown = [(r["key"], r["key_format"], r["value"], r["value_format"]) for r in tail["records"]]
    assert shown == [
        ("sensor-1", "string", 1_764_000_000_000, "long"),
        ("sensor-2", "string", {"page": "/home"}, "avro"),
        ("sensor-3", "string", {"t": 21.5}, "json"),
        (7, "int", "0xcafe00", "bytes"),
    ]
    assert tail["records"][2]["headers"] == [["trace", "abc"]]


class FakeComm:
    def __init__(self) -> None:
        self.sent: list[Any] = []
        self.handler: Callable[[Any], None] | None = None

    def on_msg(self, handler: Callable[[Any], None]) -> None:
        self.handler = handler

    def send(self, data: Any) -> None:
        self.sent.append(data)


class FakeManager:
    def __init__(self) -> None:
        self.targets: dict[str, Callable[[Any, Any], None]] = {}

    def register_target(self, name: str, fn: Callable[[Any, Any], None]) -> None:
        self.targets[name] = fn


class FakeKernel:
    def __init__(self) -> None:
        self.comm_manager = FakeManager()


def test_register_comm_target_answers_every_message() -> None:
    shell = Shell()
    shell.kernel = FakeKernel()  # type: ignore[attr-defined]
    assert register_comm_target(shell) is True
    assert register_comm_target(shell) is True  # again: harmless
    comm = FakeComm()
    shell.kernel.comm_manager.targets[TARGET_NAME](comm, {})  # type: ignore[attr-defined]
    assert comm.handler is not None
    comm.handler({"content": {"data": {"v": 1, "id": 7, "op": "hello"}}})
    comm.handler({"content": {"data": "garbage"}})
    comm.handler("not even a message")
    comm.handler({"content": {}})
    assert [m["ok"] for m in comm.sent] == [True, False, False, False]
    assert comm.sent[0]["id"] == 7


def test_no_kernel_no_registration() -> None:
    assert register_comm_target(Shell()) is False
