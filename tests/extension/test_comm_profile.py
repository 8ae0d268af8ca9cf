"""The panel's ``topic_profile`` request: the kernel answers ``ks.profile_topic`` as JSON, whose numbers equal a
pandas recount of what was written; the panel's vitest renders this very reply (checked in as a fixture)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kstream_nb.cluster.memory import reset_cluster
from kstream_nb.jupyter.comm import PanelHandler
from tests.cluster.test_profile import BASE_MS, DISTINCT_KEYS, orders_frame, recount, write_rows

FIXTURE = Path(__file__).resolve().parents[2] / "extension" / "test" / "fixtures" / "topic-profile-reply.json"
FIXTURE_CLUSTER = "memory://panel-profile-fixture"


@pytest.fixture
def url() -> Iterator[str]:
    yield FIXTURE_CLUSTER
    reset_cluster(FIXTURE_CLUSTER)


def ask(op: str, **args: Any) -> dict[str, Any]:
    reply = PanelHandler().handle({"v": 1, "id": "r1", "op": op, **args})
    json.dumps(reply, allow_nan=False)
    return reply


def test_topic_profile_reply_equals_a_recount(url: str) -> None:
    rows = orders_frame()
    write_rows(url, "orders", rows)
    reply = ask("topic_profile", topic="orders", bootstrap=url, sample=5)
    assert reply["ok"], reply
    expected = recount(rows)
    profile = reply["profile"]
    assert [p["records"] for p in profile["partitions"]] == expected["records"].tolist() == [60, 30, 10]
    assert [p["bytes"] for p in profile["partitions"]] == expected["bytes"].tolist()
    assert [p["first_timestamp"] for p in profile["partitions"]] == expected["first"].tolist()
    assert [p["last_timestamp"] for p in profile["partitions"]] == expected["last"].tolist()
    assert profile["records"] == 100 and profile["bytes"] == expected["bytes"].sum() and profile["bytes_exact"]
    assert profile["skew"] == pytest.approx(1.8)
    assert (profile["first_timestamp"], profile["last_timestamp"]) == (BASE_MS, BASE_MS + 209_000)
    assert profile["sampled"] == 15 and profile["value_formats"] == [["json", 15]]
    last = rows.groupby("partition").tail(5)
    assert profile["distinct_keys"] == last["key"].nunique() < DISTINCT_KEYS
    note = next(c for c in profile["columns"] if c["name"] == "note")
    assert note["nulls"] == sum(v["note"] is None for v in last["decoded"])
    assert [r["value"] for r in profile["records_shown"]] == rows[rows["partition"] == 2]["decoded"].tolist()[-5:]
    # the reply the panel's vitest renders (extension/test/profile.test.ts) is this one
    assert json.loads(FIXTURE.read_text()) == reply, f"regenerate {FIXTURE} from this reply"


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        ({}, "'topic' must be a topic name"),
        ({"topic": "t", "sample": 0}, "'sample' must be an integer from 1 to 100000"),
        ({"topic": "t", "sample": True}, "'sample'"),
        ({"topic": "t", "sampling": "first"}, "'sampling' must be 'last' or 'spread'"),
        ({"topic": "nope"}, "topic 'nope' does not exist on memory://"),
    ],
)
def test_bad_profile_requests_get_error_replies(url: str, args: dict[str, Any], needle: str) -> None:
    reply = ask("topic_profile", bootstrap=url, **args)
    assert not reply["ok"] and needle in reply["error"]
