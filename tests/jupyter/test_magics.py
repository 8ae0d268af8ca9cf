"""``%%kstream`` / ``%kstream``: run in-process with IPython's InteractiveShell."""

from __future__ import annotations

import threading

import pandas as pd
import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

import kstream_nb as ks
from kstream_nb.cluster.connection import connect
from kstream_nb.cluster.serde_specs import Serdes
from kstream_nb.jupyter import get_app, get_dashboard, live_refreshers
from kstream_nb.runtime.app import State, running_apps

from .conftest import SEED_RECORDS, wait_for

SUMS = """
builder.stream("sales").group_by_key().reduce(lambda a, v: a + v, store="sums").to_stream().to("sums-out")
"""


def _names() -> list[str]:
    return sorted(a.application_id for a in running_apps())


def _run(shell: InteractiveShell, line: str, body: str) -> None:
    result = shell.run_cell(f"%%kstream {line}\n{body}")
    if result.error_before_exec is not None:
        raise result.error_before_exec
    if result.error_in_exec is not None:
        raise result.error_in_exec


def test_cell_magic_builds_starts_and_shows_a_dashboard(shell: InteractiveShell, url: str) -> None:
    ks.produce("sales", SEED_RECORDS, bootstrap_servers=url, partitions=2, timestamps=1)
    _run(shell, f"sums --bootstrap {url}", SUMS)
    app = get_app("sums")
    assert app.state in (State.REBALANCING, State.RUNNING)
    assert app.config.bootstrap_servers == url
    assert isinstance(shell.user_ns["builder"], ks.StreamsBuilder)
    app.wait_until_running().wait_until_idle()
    assert dict(app.store("sums").all()) == {"Jack": 4, "Lily": 7, "Mike": 4}
    dash = get_dashboard("sums")
    assert dash is not None and set(dash.views) == {"metrics", "chart", "table", "topology", "tasks"}
    assert dash.refresher.alive
    wait_for(lambda: len(dash["table"].rows) == 5, what="the output table")
    wait_for(lambda: {d["key"]: d["value"] for d in dash["chart"].data} == {"Jack": 4, "Lily": 7, "Mike": 4})


def test_body_sees_the_user_namespace_and_defines_names(shell: InteractiveShell, url: str) -> None:
    shell.user_ns["THRESHOLD"] = 2
    ks.produce("sales", SEED_RECORDS, bootstrap_servers=url, timestamps=1)
    _run(
        shell,
        f"big --bootstrap {url} --show metrics",
        'big = builder.stream("sales").filter(lambda k, v: v > THRESHOLD)\nbig.to("big-out")',
    )
    assert isinstance(shell.user_ns["big"], ks.KStream)
    get_app("big").wait_until_running().wait_until_idle()
    assert ks.read_topic("big-out", url)["value"].tolist() == [4, 3, 5]


def test_rerunning_a_cell_replaces_the_app(shell: InteractiveShell, url: str) -> None:
    ks.produce("sales", SEED_RECORDS, bootstrap_servers=url, partitions=2, timestamps=1)
    _run(shell, f"sums --bootstrap {url}", SUMS)
    first = get_app("sums")
    first.wait_until_running()
    _run(shell, f"sums --bootstrap {url} --threads 2", SUMS)
    second = get_app("sums")
    assert second is not first
    assert first.state == State.NOT_RUNNING
    assert _names() == ["sums"]
    second.wait_until_running()
    assert len(second.threads) == 2
    dashboards = [t for t in threading.enumerate() if t.name == "kstream-dashboard-sums"]
    assert len(dashboards) == 1
    second.wait_until_idle()
    assert dict(second.store("sums").all()) == {"Jack": 4, "Lily": 7, "Mike": 4}


def test_an_error_in_the_body_is_a_traceback_and_leaves_nothing_running(shell: InteractiveShell, url: str) -> None:
    ks.produce("sales", SEED_RECORDS, bootstrap_servers=url, timestamps=1)
    _run(shell, f"sums --bootstrap {url}", SUMS)
    result = shell.run_cell(f"%%kstream sums --bootstrap {url}\nx = 1\n1 / 0\n")
    assert isinstance(result.error_in_exec, ZeroDivisionError)
    assert _names() == []
    wait_for(lambda: not live_refreshers(), 5, "the dashboard thread to end")


def test_an_error_starting_the_app_leaves_nothing_running(shell: InteractiveShell, url: str) -> None:
    ks.produce("left", [("a", 1)], bootstrap_servers=url, partitions=2)
    ks.produce("right", [("a", 1)], bootstrap_servers=url, partitions=3)
    body = 'builder.stream("left").join(builder.table("right"), lambda a, b: a).to("out")'
    result = shell.run_cell(f"%%kstream copart --bootstrap {url}\n{body}")
    assert isinstance(result.error_in_exec, ks.StreamsError)
    assert "left" in str(result.error_in_exec) and "right" in str(result.error_in_exec)
    assert _names() == []
    with pytest.raises(ks.TopologyError, match="no source"):
        shell.run_cell_magic("kstream", f"empty --bootstrap {url}", "x = 1")
    assert _names() == []


def test_usage_errors(shell: InteractiveShell) -> None:
    with pytest.raises(UsageError, match="unknown part"):
        shell.run_cell_magic("kstream", "x --show chart,nope", SUMS)
    with pytest.raises(UsageError, match="threads"):
        shell.run_cell_magic("kstream", "x --threads 0", SUMS)
    with pytest.raises(UsageError):
        shell.run_line_magic("kstream", "frobnicate")
    with pytest.raises(UsageError, match="no kstream app named 'ghost'"):
        shell.run_line_magic("kstream", "describe ghost")
    assert _names() == []


def test_line_magics(shell: InteractiveShell, url: str) -> None:
    shell.user_ns["seed"] = SEED_RECORDS
    assert shell.run_line_magic("kstream", f"produce sales seed --bootstrap {url} --partitions 2") == 5
    _run(shell, f"sums --bootstrap {url} --show none", SUMS)
    app = get_app("sums").wait_until_running().wait_until_idle()

    listing = shell.run_line_magic("kstream", "list")
    assert listing[listing["name"] == "sums"].iloc[0].to_dict()["state"] == "RUNNING"

    graph = shell.run_line_magic("kstream", "describe sums")
    assert "<svg" in graph.svg and "sums" in graph.svg

    topics = shell.run_line_magic("kstream", f"topics --bootstrap {url}")
    assert set(topics["topic"]) == {"sales", "sums-out"}
    assert topics.set_index("topic").loc["sales", "records"] == 5
    internal = shell.run_line_magic("kstream", f"topics --bootstrap {url} --internal")
    assert "sums-sums-changelog" in set(internal["topic"])

    everything = shell.run_line_magic("kstream", f"tail sums-out -n 5 --bootstrap {url}")
    assert len(everything) == 5  # each key's updates in order: its last one is its sum
    assert dict(zip(everything["key"], everything["value"])) == {"Jack": 4, "Lily": 7, "Mike": 4}
    tail = shell.run_line_magic("kstream", f"tail sums-out -n 2 --bootstrap {url}")
    assert tail.to_dict("records") == everything.tail(2).reset_index(drop=True).to_dict("records")

    store = shell.run_line_magic("kstream", "store sums sums")
    assert isinstance(store, pd.DataFrame)
    assert dict(zip(store["key"], store["value"])) == {"Jack": 4, "Lily": 7, "Mike": 4}

    assignment = shell.run_line_magic("kstream", "assignment sums")
    assert sorted(assignment["task"]) == ["0_0", "0_1"]
    assert set(assignment["thread"]) == {"sums-StreamThread-1"}

    with pytest.raises(UsageError, match="running"):
        shell.run_line_magic("kstream", "reset sums")
    shell.run_line_magic("kstream", "stop sums")
    assert app.state == State.NOT_RUNNING
    admin = connect(url).admin()
    assert admin.group_offsets("sums")
    shell.run_line_magic("kstream", "reset sums")  # Kafka's tool: inputs to their earliest offsets
    assert admin.group_offsets("sums") == {ks.TopicPartition("sales", 0): 0, ks.TopicPartition("sales", 1): 0}
    assert "sums-sums-changelog" not in admin.list_topics()


def test_from_beginning_reprocesses_after_a_reset(shell: InteractiveShell, url: str) -> None:
    ks.produce("sales", SEED_RECORDS, bootstrap_servers=url, timestamps=1)
    _run(shell, f"sums --bootstrap {url} --show none", SUMS)
    get_app("sums").wait_until_running().wait_until_idle()
    _run(shell, f"sums --bootstrap {url} --show none --from-beginning", SUMS)
    app = get_app("sums").wait_until_running().wait_until_idle()
    assert dict(app.store("sums").all()) == {"Jack": 4, "Lily": 7, "Mike": 4}
    assert len(ks.read_topic("sums-out", url)) == 10  # the input was read again


def test_stop_all_stops_every_app_and_thread(shell: InteractiveShell, url: str) -> None:
    ks.produce("sales", SEED_RECORDS, bootstrap_servers=url, timestamps=1)
    _run(shell, f"a1 --bootstrap {url}", SUMS)
    _run(shell, f"a2 --bootstrap {url} --threads 2", SUMS.replace("sums", "s2"))
    shell.run_line_magic("kstream", f"tail sums-out --follow --bootstrap {url}")
    assert _names() == ["a1", "a2"]
    assert len(live_refreshers()) == 3
    shell.run_line_magic("kstream", "stop --all")
    assert _names() == []
    wait_for(lambda: not live_refreshers(), 5, "refreshers to end")
    assert not [t for t in threading.enumerate() if t.name.startswith(("a1-", "a2-"))]


def test_rich_reprs_are_registered(shell: InteractiveShell, url: str) -> None:
    b = ks.StreamsBuilder()
    b.stream("sales").group_by(lambda k, v: v).count(store="by-value").to_stream().to("out")
    topology = b.build()
    data, _ = shell.display_formatter.format(topology)
    assert "<svg" in data["text/html"] and "by-value" in data["text/html"]
    assert "Sub-topology: 1" in data["text/plain"]
    app = ks.KafkaStreams(topology, application_id="repr", bootstrap_servers=url)
    data, _ = shell.display_formatter.format(app)
    assert "CREATED" in data["text/html"]


def test_tail_shows_each_record_in_the_format_it_was_written_in(shell: InteractiveShell, url: str) -> None:
    """``%kstream tail`` reads with the ``auto`` serde: Java String keys, Java longs, Avro through the embedded
    registry, JSON, and bytes no rule decodes (shown as a hex preview, never an error)."""
    click = {"type": "record", "name": "Click", "fields": [{"name": "page", "type": "string"}]}
    ks.produce(
        "mixed", [("sensor-1", 1_764_000_000_000)], url, timestamps=1, key_serde="string", value_serde="long"
    )
    ks.produce("mixed", [("sensor-2", {"page": "/home"})], url, timestamps=2, value_serde=Serdes.avro(click))
    ks.produce("mixed", [("sensor-3", {"t": 21.5})], url, timestamps=3)
    ks.produce("mixed", [(7, b"\xca\xfe\x00")], url, timestamps=4, key_serde="int", value_serde="bytes")
    tail = shell.run_line_magic("kstream", f"tail mixed -n 4 --bootstrap {url}")
    assert list(tail.columns) == ["partition", "offset", "timestamp", "time", "key", "value", "headers"]
    assert tail["key"].tolist() == ["sensor-1", "sensor-2", "sensor-3", 7]
    assert tail["value"].tolist() == [1_764_000_000_000, {"page": "/home"}, {"t": 21.5}, b"\xca\xfe\x00"]
    assert "0xcafe00" in tail.to_string()
