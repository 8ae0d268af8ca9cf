"""Resetting an app to a time, checked the same way on ``memory://`` and on Apache Kafka (tests/runtime and
tests/kafka call this with their cluster and app factory): a word count runs over lines with known timestamps,
is stopped, reset to a time T and started again; its new counts must equal a recount (in pandas) of the words
of the lines from T on.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import kstream_nb as ks
from kstream_nb.cluster.connection import connect
from kstream_nb.cluster.records import TopicPartition
from kstream_nb.runtime.app_reset import running_instances
from tests.helpers import wait_for

VOCABULARY = ["apple", "kiwi", "plum", "fig", "pear"]
BASE_MS = 1_700_000_000_000
MINUTE = 60_000


def word_count(lines: str, out: str) -> ks.Topology:
    b = ks.StreamsBuilder()
    words = b.stream(lines).flat_map_values(lambda line: line.split())
    words.group_by(lambda k, w: w).count(store="counts").to_stream().to(out)
    return b.build()


def produce_lines(bootstrap: str, topic: str, n: int = 40) -> pd.DataFrame:
    """``n`` lines, one a minute from BASE_MS, alternating between two partitions; returns what was written."""
    frame = pd.DataFrame(
        {
            "key": [f"line-{i}" for i in range(n)],
            "value": [" ".join(VOCABULARY[(i * j + i) % 5] for j in range(1 + i % 3)) for i in range(n)],
            "timestamp": [BASE_MS + i * MINUTE for i in range(n)],
            "partition": [i % 2 for i in range(n)],
        }
    )
    ks.produce(topic, frame, bootstrap, partitions=2)
    return frame


def recount(lines: pd.DataFrame, since_ms: int | None = None) -> dict[str, int]:
    """Word counts of the lines stamped >= ``since_ms`` (timestamps grow with offsets in each partition)."""
    chosen = lines if since_ms is None else lines[lines["timestamp"] >= since_ms]
    return dict(Counter(word for line in chosen["value"] for word in line.split()))


def check_reset_to_a_time(
    bootstrap: str,
    make_app: Callable[..., ks.KafkaStreams],
    app_id: str,
    lines_topic: str,
    out: str,
    state_dir: Path,
) -> None:
    admin = connect(bootstrap).admin()
    lines = produce_lines(bootstrap, lines_topic)
    first = make_app(word_count(lines_topic, out), app_id, state_dir=str(state_dir))
    first.start()
    first.wait_until_running(60).wait_until_idle(60)
    assert dict(first.store("counts").all()) == recount(lines)
    internal = sorted(t for t in admin.list_topics() if t.startswith(f"{app_id}-"))
    assert f"{app_id}-counts-changelog" in internal and any(t.endswith("-repartition") for t in internal)
    assert (state_dir / app_id).is_dir()

    # refused while it runs, naming this process's instance and its group member
    with pytest.raises(ks.AppRunningError) as refused:
        ks.reset_app(app_id, bootstrap, to="earliest", state_dir=str(state_dir))
    message = str(refused.value)
    assert f"process {first.process_id}" in message
    assert f"group member {app_id}-{first.process_id}-StreamThread-1" in message
    assert sorted(t for t in admin.list_topics() if t.startswith(f"{app_id}-")) == internal  # nothing touched

    out_ends = admin.end_offsets([TopicPartition(out, p) for p in range(admin.partition_count(out) or 0)])
    first.stop(timeout=30)
    wait_for(lambda: not running_instances(app_id, bootstrap, admin), 30, "the group to have no members")

    t_ms = BASE_MS + 17 * MINUTE + 30_000  # between two lines
    when = datetime.fromtimestamp(t_ms / 1000, timezone.utc).replace(tzinfo=None).isoformat()  # naive: UTC
    result = ks.reset_app(app_id, bootstrap, to=when, state_dir=str(state_dir))
    expected_offsets = {}
    for p in (0, 1):
        part = lines[lines["partition"] == p].reset_index(drop=True)
        expected_offsets[TopicPartition(lines_topic, p)] = int(part.index[part["timestamp"] >= t_ms][0])
    assert result.offsets == expected_offsets
    assert result.deleted_topics == internal
    assert result.wiped_state_dir == str(state_dir / app_id) and not (state_dir / app_id).exists()
    assert not [t for t in admin.list_topics() if t in internal]
    # the group keeps the inputs' offsets at T; the deleted topics' offsets go with them (Kafka's coordinator)
    wait_for(lambda: admin.group_offsets(app_id) == expected_offsets, 30, "the group's offsets at T")

    second = make_app(word_count(lines_topic, out), app_id, state_dir=str(state_dir))
    second.start()
    second.wait_until_running(60).wait_until_idle(60)
    wanted = recount(lines, t_ms)
    assert dict(second.store("counts").all()) == wanted
    assert set(internal) <= set(admin.list_topics())  # recreated by the new run
    output = ks.read_topic(out, bootstrap)
    new = output[
        [off >= out_ends[TopicPartition(out, p)] for p, off in zip(output["partition"], output["offset"])]
    ]
    assert dict(zip(new["key"], new["value"])) == wanted  # each word's last update after the reset


def reset_then_count(
    bootstrap: str,
    make_app: Callable[..., ks.KafkaStreams],
    app_id: str,
    lines_topic: str,
    out: str,
    state_dir: Path,
    **reset: Any,
) -> dict[str, int]:
    """Resets (``reset`` are reset_app's arguments), runs the word count to idle, returns its counts."""
    ks.reset_app(app_id, bootstrap, state_dir=str(state_dir), **reset)
    app = make_app(word_count(lines_topic, out), app_id, state_dir=str(state_dir))
    app.start()
    app.wait_until_running(60).wait_until_idle(60)
    counts = dict(app.store("counts").all())
    app.stop(timeout=30)
    return counts
