"""The ``kstream`` data source and ``export_topic`` archives."""

from __future__ import annotations

import os
import shutil
from typing import Any

import pytest

import kstream_nb as ks
from kstream_nb.cluster.export import archive_info, export_topic, read_archive
from kstream_nb.spark.session import SparkSetupError, check_spark_requirements
from kstream_nb.spark.source import read_topic
from tests.spark.clusters import Cluster


def _produce(url: str, topic: str = "events", client_config: dict[str, Any] | None = None) -> None:
    ks.produce(
        topic,
        [ks.Record(f"k{i}", {"i": i}, 1_000 + i, {"h": b"x"} if i % 10 == 0 else None) for i in range(300)],
        bootstrap_servers=url,
        partitions=3,
        client_config=client_config,
    )


def test_one_spark_partition_per_topic_partition(spark: Any, cluster: Cluster) -> None:
    """Every record of every partition, in offset order, as the live reader sees them."""
    topic, config = cluster.name("events"), cluster.client_config or None
    _produce(cluster.bootstrap, topic, config)
    df = read_topic(spark, topic, bootstrap_servers=cluster.bootstrap, client_config=config)
    assert df.rdd.getNumPartitions() == 3
    assert [f.name for f in df.schema.fields] == [
        "topic",
        "partition",
        "offset",
        "timestamp",
        "key",
        "value",
        "headers",
    ]
    got = df.toPandas().sort_values(["partition", "offset"]).reset_index(drop=True)
    live = ks.read_topic(topic, bootstrap_servers=cluster.bootstrap, key_serde="bytes", value_serde="bytes",
                         client_config=config)  # fmt: skip
    assert len(got) == 300
    assert got["partition"].tolist() == live["partition"].tolist()
    assert got["offset"].tolist() == live["offset"].tolist()
    assert [bytes(k) for k in got["key"]] == live["key"].tolist()
    assert [bytes(v) for v in got["value"]] == live["value"].tolist()
    assert [round(t.timestamp() * 1000) for t in got["timestamp"]] == live["timestamp"].tolist()
    with_headers = got[[len(h) > 0 for h in got["headers"]]]
    assert len(with_headers) == 30
    assert {(h[0]["key"], bytes(h[0]["value"])) for h in with_headers["headers"]} == {("h", b"x")}


def test_offset_and_timestamp_bounds(spark: Any, cluster: Cluster) -> None:
    """Offset bounds per partition, and timestamp bounds by each record's timestamp: two records written
    last with older timestamps (one inside the bounds, one before them) are read or left out by their time."""
    topic, config = cluster.name("events"), cluster.client_config or None
    _produce(cluster.bootstrap, topic, config)
    late = [ks.Record(f"k{i}", {"i": -1}, ts) for i, ts in ((1, 1_150), (2, 1_050))]
    ks.produce(topic, late, bootstrap_servers=cluster.bootstrap, client_config=config)
    sizes = (
        ks.read_topic(topic, bootstrap_servers=cluster.bootstrap, client_config=config).groupby("partition").size()
    )
    df = read_topic(
        spark, topic, bootstrap_servers=cluster.bootstrap, starting_offsets={0: 10}, ending_offsets={1: 5},
        client_config=config,
    )  # fmt: skip
    rows = df.select("partition", "offset").toPandas()
    got = {int(p): sorted(group["offset"].tolist()) for p, group in rows.groupby("partition")}
    assert got == {0: list(range(10, sizes[0])), 1: list(range(5)), 2: list(range(sizes[2]))}
    timed = read_topic(
        spark, topic, bootstrap_servers=cluster.bootstrap, start=1_100, end=1_200, client_config=config
    )
    stamps = sorted(round(t.timestamp() * 1000) for t in timed.toPandas()["timestamp"])
    assert stamps == sorted([*range(1_100, 1_200), 1_150])


def test_archive_roundtrip_and_format_kstream(spark: Any, url: str, tmp_path: Any) -> None:
    _produce(url)
    path = export_topic("events", tmp_path / "events", bootstrap_servers=url)
    meta = archive_info(path)
    assert meta["topic"] == "events" and meta["partitions"] == 3 and meta["records"] == 300
    assert len(read_archive(path)) == 300
    df = spark.read.format("kstream").option("topic", "events").option("path", str(path)).load()
    assert df.rdd.getNumPartitions() == 3
    assert df.count() == 300


def test_memory_servers_in_spark_give_a_clear_error(spark: Any, url: str) -> None:
    _produce(url)
    with pytest.raises(Exception, match="embedded cluster lives in the"):
        spark.read.format("kstream").option("topic", "events").option("bootstrap_servers", url).load().count()


def test_missing_java_fails_with_a_clear_message(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    assert shutil.which("java") is None
    with pytest.raises(SparkSetupError, match="Java 17"):
        check_spark_requirements()
    assert os.environ["PATH"] == str(tmp_path)


def test_backtest_reads_archives_and_time_bounds(spark: Any, url: str, tmp_path: Any) -> None:
    from kstream_nb.spark import backtest

    _produce(url)
    b = ks.StreamsBuilder()
    b.stream("events").map_values(lambda v: v["i"] * 2).to("doubled")
    topology = b.build()
    path = export_topic("events", tmp_path / "events", bootstrap_servers=url)
    result = backtest(topology, spark, archives={"events": str(path)}, output_partitions={"doubled": 3},
                      start=1_100, end=1_150)  # fmt: skip
    got = result.outputs["doubled"].to_pandas()
    assert sorted(got["value"]) == [2 * i for i in range(100, 150)]
    assert sorted(got["timestamp"]) == list(range(1_100, 1_150))
    # each record stays in its input partition (same key, same partition count): compare with the topic
    source = ks.read_topic("events", bootstrap_servers=url)
    partition_of = dict(zip(source["key"], source["partition"]))
    assert all(partition_of[k] == p for k, p in zip(got["key"], got["partition"]))
