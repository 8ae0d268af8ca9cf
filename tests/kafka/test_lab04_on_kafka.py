"""Lab 04's Kafka cell (tagged ``kafka``) on the test broker: under nbval no local Kafka runs and the cell only
prints how to start one, so this runs its code with ``KSTREAM_NB_KAFKA`` naming the broker the tests started."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import kstream_nb as ks
from kstream_nb.jupyter import wait_until

pytestmark = pytest.mark.kafka

NOTEBOOK = Path(__file__).parents[2] / "notebooks" / "04_partitions_tasks_threads.ipynb"


def test_lab_04_runs_the_sticky_join_and_the_warm_takeover_on_kafka(kafka_bootstrap, monkeypatch, capsys) -> None:
    cells = json.loads(NOTEBOOK.read_text())["cells"]
    sources = ["".join(c["source"]) for c in cells if "kafka" in c.get("metadata", {}).get("tags", [])]
    assert len(sources) == 1
    monkeypatch.setenv("KSTREAM_NB_KAFKA", kafka_bootstrap)
    shown: list[object] = []
    try:
        exec(sources[0], {"ks": ks, "wait_until": wait_until, "display": shown.append})  # the cell's own asserts
    finally:
        for app in ks.running_apps():  # (left running by a failed assert)
            app.stop()
    out = capsys.readouterr().out
    assert "moved to kafka-1, which restored" in out and len(shown) == 1
    assert ks.running_apps() == []
