"""Kafka Streams' own formats against bytes real Kafka Streams 4.4 wrote.

``FormatsDump`` (tests/reference/java) runs three counts by String key in a TopologyTestDriver: tumbling windows
written with ``WindowedSerdes.timeWindowedSerdeFrom(String.class, size)``, session windows with
``sessionWindowedSerdeFrom(String.class)``, and a plain count; it prints every record of the output topics and
of the stores' changelogs, and the timestamped stores' values as Kafka's ``ValueAndTimestampSerde`` writes them.
Here those bytes decode with the serde specs to what kstream_nb computes for the same input, and kstream_nb
writes the same bytes, and puts each windowed record in the partition Kafka's WindowedStreamPartitioner picks.
"""

from __future__ import annotations

import base64
import json
import subprocess
import uuid
from collections import defaultdict
from typing import Any, NamedTuple

import pandas as pd
import pytest

import kstream_nb as ks
from kstream_nb.cluster.base import TopicSpec
from kstream_nb.cluster.memory import get_cluster, reset_cluster
from kstream_nb.cluster.serde_specs import serde_from
from tests.reference import diff
from tests.reference.build import BuildError, ensure_jar

SIZE_MS, GAP_MS, PARTITIONS = 10_000, 5_000, 4
APP = "formats-dump"  # FormatsDump's application id: its changelogs are <APP>-<store>-changelog
#: (key, timestamp): late records for a closed window, session merges, a non-ASCII and an empty key, a large time
INPUT = [
    ("alice", 1_000), ("bob", 2_000), ("alice", 4_000), ("zoë", 5_000), ("", 6_000), ("alice", 12_000),
    ("bob", 13_000), ("bob", 9_000), ("zoë", 14_500), ("carol", 1_700_000_000_123), ("alice", 1_700_000_004_000),
]  # fmt: skip
TIME_WINDOWED = f"windowed({SIZE_MS}):string"
SESSION_WINDOWED = "session-windowed:string"


class Raw(NamedTuple):
    key: bytes | None
    value: bytes | None
    timestamp: int | None


def _bytes(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)


@pytest.fixture(scope="module")
def java() -> dict[str, list[dict[str, Any]]]:
    """FormatsDump's records by topic (key/value as bytes), in the order Kafka Streams wrote them."""
    try:
        jar = diff.snapshot(ensure_jar(quiet=True))
    except (BuildError, diff.JavaRunnerError) as e:
        pytest.fail(f"the Java reference runner does not build:\n{e}", pytrace=False)
    case = {
        "window_size_ms": SIZE_MS,
        "gap_ms": GAP_MS,
        "partitions": PARTITIONS,
        "records": [{"key": k, "value": "v", "timestamp": t} for k, t in INPUT],
    }
    cmd = ["java", "-XX:TieredStopAtLevel=1", "-cp", str(jar), "kstream_nb.reference.FormatsDump"]
    proc = subprocess.run(cmd, input=json.dumps(case).encode(), capture_output=True, check=False)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-3000:]
    by_topic: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for line in proc.stdout.decode().splitlines():
        r = json.loads(line)
        r["key"], r["value"] = _bytes(r["key"]), _bytes(r["value"])
        by_topic[r["topic"]].append(r)
    return by_topic


def raw(records: list[dict[str, Any]]) -> list[Raw]:
    return [Raw(r["key"], r["value"], r.get("timestamp")) for r in records]


def decoded(records: list[dict[str, Any]], key_spec: str, value_spec: str, topic: str = "t") -> list[tuple]:
    keys, values = serde_from(key_spec), serde_from(value_spec)
    return [(keys.deserialize(topic, r["key"]), values.deserialize(topic, r["value"])) for r in records]


def topology(key_serde: str | None, out_key_serdes: tuple[str | None, str | None] = (None, None)) -> ks.Topology:
    """FormatsDump's topology in kstream_nb (plus the plain count's updates to ``kv-out``)."""
    b = ks.StreamsBuilder()
    grouped = b.stream("input", key_serde=key_serde, value_serde="string").group_by_key()
    tumbling, session = out_key_serdes
    (
        grouped.windowed_by(ks.TimeWindows.of(SIZE_MS))
        .count(store="tumbling-counts")
        .to_stream()
        .to("tumbling-out", key_serde=tumbling, value_serde="long")
    )
    (
        grouped.windowed_by(ks.SessionWindows.with_gap(GAP_MS))
        .count(store="session-counts")
        .to_stream()
        .to("session-out", key_serde=session, value_serde="long")
    )
    grouped.count(store="kv-counts").to_stream().to("kv-out", value_serde="long")
    return b.build()


def run_driver(top: ks.Topology) -> tuple[dict[str, list[Raw]], dict[str, list[Any]]]:
    """What kstream_nb's TopologyTestDriver writes per topic (bytes), and its stores' final entries."""
    with ks.TopologyTestDriver(top, {"application_id": APP}) as driver:
        topic = driver.create_input_topic("input", "string", "string")
        for key, timestamp in INPUT:
            topic.pipe_input(key, "v", timestamp)
        written = {}
        for name in driver.produced_topic_names():
            records = driver.create_output_topic(name, "bytes", "bytes").read_records_to_list()
            written[name] = [Raw(r.key, r.value, r.timestamp) for r in records]
        stores = {
            "kv-counts": list(driver.get_timestamped_key_value_store("kv-counts").all()),
            "tumbling-counts": list(driver.get_state_store("tumbling-counts").all()),
        }
    return written, stores


def as_windowed(d: dict[str, Any]) -> ks.Windowed:
    """A Windowed key as kstream_nb writes it by default (JSON ``{"key", "start", "end"}``)."""
    return ks.Windowed(d["key"], d["start"], d["end"])


def test_java_windowed_outputs_decode_to_what_kstream_nb_computes(java: dict[str, list[dict[str, Any]]]) -> None:
    # kstream_nb's own run with the default serdes: its Windowed keys come out as JSON, read here as JSON
    ours, _ = run_driver(topology(None))
    for topic, spec in (("tumbling-out", TIME_WINDOWED), ("session-out", SESSION_WINDOWED)):
        expected = [
            (
                as_windowed(json.loads(r.key)),
                None if r.value is None else int.from_bytes(r.value, "big"),
                r.timestamp,
            )
            for r in ours[topic]
        ]
        got = [(k, v, r["timestamp"]) for (k, v), r in zip(decoded(java[topic], spec, "long", topic), java[topic])]
        assert got == expected, topic


def test_java_time_window_ends_follow_the_size_or_read_as_long_max(java: dict[str, list[dict[str, Any]]]) -> None:
    sized = [k for k, _ in decoded(java["tumbling-out"], TIME_WINDOWED, "long")]
    assert all(k.end == k.start + SIZE_MS for k in sized)
    unsized = [k for k, _ in decoded(java["tumbling-out"], "windowed:string", "long")]
    assert [(k.key, k.start) for k in unsized] == [(k.key, k.start) for k in sized]
    assert {k.end for k in unsized} == {2**63 - 1}  # Java's Long.MAX_VALUE: the size is unknown


@pytest.mark.parametrize("how", ["explicit", "from-the-table"])
def test_kstream_nb_writes_the_bytes_kafka_streams_writes(java: dict[str, list[dict[str, Any]]], how: str) -> None:
    """``to(key_serde="windowed(10s):string")``, or a windowed count of a stream with ``key_serde="string"`` (its
    table's key serde is then Kafka's windowed serde, as in Java), writes byte for byte what Java wrote."""
    if how == "explicit":
        top = topology(None, (TIME_WINDOWED, SESSION_WINDOWED))
    else:
        top = topology("string")
    ours, _ = run_driver(top)
    for topic in ("tumbling-out", "session-out"):
        assert ours[topic] == raw(java[topic]), topic
    # and the serdes themselves: each decoded record re-encodes to Java's bytes
    for topic, spec in (("tumbling-out", TIME_WINDOWED), ("session-out", SESSION_WINDOWED)):
        serde = serde_from(spec)
        for r in java[topic]:
            assert serde.serialize(topic, serde.deserialize(topic, r["key"])) == r["key"]


def test_windowed_records_land_in_the_partition_kafka_picks(java: dict[str, list[dict[str, Any]]]) -> None:
    """On a 4-partition output topic each windowed record goes where Kafka's WindowedStreamPartitioner puts it:
    the partition of its key alone, whatever the window."""
    java_partition = {r["key"]: r["partition"] for t in ("tumbling-out", "session-out") for r in java[t]}
    url = f"memory://formats-{uuid.uuid4().hex}"
    try:
        specs = [
            TopicSpec("input", 1),
            TopicSpec("tumbling-out", PARTITIONS),
            TopicSpec("session-out", PARTITIONS),
        ]
        get_cluster(url).admin().create_topics([*specs, TopicSpec("kv-out", 1)])
        keys, timestamps = [k for k, _ in INPUT], [t for _, t in INPUT]
        ks.produce("input", [(k, "v") for k in keys], bootstrap_servers=url, timestamps=timestamps,
                   key_serde="string", value_serde="string")  # fmt: skip
        app = ks.KafkaStreams(topology("string"), application_id=APP, bootstrap_servers=url, poll_ms=20)
        try:
            app.start().wait_until_running(30)
            app.wait_until_idle(30)
        finally:
            assert app.stop(timeout=10)
        for topic in ("tumbling-out", "session-out"):
            rows = ks.read_topic(topic, bootstrap_servers=url, key_serde="bytes", value_serde="bytes")
            assert len(rows) == len(java[topic])
            placed = {bytes(k): int(p) for k, p in zip(rows["key"], rows["partition"])}
            assert placed == {k: java_partition[k] for k in placed}, topic
            assert len(set(placed.values())) > 1  # the keys spread over partitions
    finally:
        reset_cluster(url)


def test_java_window_and_session_changelogs_decode(java: dict[str, list[dict[str, Any]]]) -> None:
    """A window store's changelog keys (key, start, 4-byte sequence number) and a session store's (key, end,
    start) decode to the updates kstream_nb's windowed counts emit; the keys re-encode to Java's bytes."""
    ours, _ = run_driver(topology("string"))
    tumbling_updates = decoded([r._asdict() for r in ours["tumbling-out"]], TIME_WINDOWED, "long")
    changelog = java[f"{APP}-tumbling-counts-changelog"]
    assert decoded(changelog, f"windowed-changelog({SIZE_MS}):string", "long") == tumbling_updates
    serde = serde_from(f"windowed-changelog({SIZE_MS}):string")
    assert [serde.serialize("c", serde.deserialize("c", r["key"])) for r in changelog] == [
        r["key"] for r in changelog
    ]

    session_updates = decoded([r._asdict() for r in ours["session-out"]], SESSION_WINDOWED, "long")
    assert decoded(java[f"{APP}-session-counts-changelog"], SESSION_WINDOWED, "long") == session_updates


def test_java_timestamped_store_values_and_their_changelogs(java: dict[str, list[dict[str, Any]]]) -> None:
    """Kafka's timestamped stores hold ValueAndTimestamp bytes (8-byte timestamp + value: ``timestamped:long``);
    their changelog records carry the plain value, the timestamp being the record's."""
    ours, stores = run_driver(topology("string"))
    kv = dict(decoded(java["store:kv-counts"], "string", "timestamped:long"))
    assert kv == {e.key: e.value for e in stores["kv-counts"]}
    assert kv["alice"] == ks.ValueAndTimestamp(4, 1_700_000_004_000)
    windows = dict(decoded(java["store:tumbling-counts"], TIME_WINDOWED, "timestamped:long"))
    assert windows == {ks.Windowed(k, start, start + SIZE_MS): v for k, start, v in stores["tumbling-counts"]}
    timestamped = serde_from("timestamped:long")
    for r in java["store:kv-counts"] + java["store:tumbling-counts"]:
        assert timestamped.serialize("s", timestamped.deserialize("s", r["value"])) == r["value"]

    changelog = java[f"{APP}-kv-counts-changelog"]
    assert all(len(r["value"]) == 8 for r in changelog)  # a plain long, no timestamp in front
    updates = [(k, v, r["timestamp"]) for (k, v), r in zip(decoded(changelog, "string", "long"), changelog)]
    expected = [(k, v, r.timestamp) for (k, v), r in zip(decoded([r._asdict() for r in ours["kv-out"]],
                                                                  "string", "long"), ours["kv-out"])]  # fmt: skip
    assert updates == expected


def test_the_input_covers_what_the_checks_need(java: dict[str, list[dict[str, Any]]]) -> None:
    """Session merges (tombstones), a late record dropped, every key kind and large window starts."""
    assert any(r["value"] is None for r in java["session-out"])
    tumbling = [k for k, _ in decoded(java["tumbling-out"], TIME_WINDOWED, "long")]
    assert len(tumbling) == len(INPUT) - 1  # bob@9000 is too late for [0, 10000)
    assert {k.key for k in tumbling} == {k for k, _ in INPUT}
    assert max(k.start for k in tumbling) == 1_700_000_000_000


def test_a_notebook_reads_a_java_apps_windowed_topic(java: dict[str, list[dict[str, Any]]]) -> None:
    """The bytes of Java's output topic, as a Java app would have left them on a cluster, read with the specs."""
    url = f"memory://formats-{uuid.uuid4().hex}"
    try:
        records = java["session-out"]
        pairs = [(r["key"], r["value"]) for r in records]
        timestamps = [r["timestamp"] for r in records]
        ks.produce("sessions", pairs, url, timestamps=timestamps, key_serde="bytes", value_serde="bytes")
        frame = ks.read_topic("sessions", bootstrap_servers=url, key_serde=SESSION_WINDOWED, value_serde="long")
        rows = [(k, None if pd.isna(v) else int(v)) for k, v in zip(frame["key"], frame["value"])]
        assert rows == decoded(records, SESSION_WINDOWED, "long")
        first = frame["key"].iloc[0]
        assert isinstance(first, ks.Windowed) and (first.key, first.start, first.end) == ("alice", 1_000, 1_000)
    finally:
        reset_cluster(url)
