"""Versioned tables in a running app on the embedded cluster: interactive queries as of a time, the changelog,
restore of the history after a restart, and grace-buffered join records that outlive a stop."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import kstream_nb as ks
from kstream_nb.cluster.base import TopicSpec
from kstream_nb.cluster.connection import connect
from kstream_nb.cluster.memory import reset_cluster
from kstream_nb.state.versioned import VersionedRecord


@pytest.fixture
def url() -> Iterator[str]:
    address = f"memory://t-{uuid.uuid4().hex}"
    yield address
    reset_cluster(address)


@pytest.fixture
def make_app(url: str, tmp_path: Any) -> Iterator[Callable[..., ks.KafkaStreams]]:
    apps: list[ks.KafkaStreams] = []
    connect(url).admin().create_topics([TopicSpec(t, 1) for t in ("prices", "orders", "priced")])

    def make(topology: ks.Topology, application_id: str = "vapp") -> ks.KafkaStreams:
        app = ks.KafkaStreams(
            topology, application_id=application_id, bootstrap_servers=url, state_dir=str(tmp_path / "state"),
            commit_interval_ms=50, poll_ms=20,
        )  # fmt: skip
        apps.append(app)
        return app

    yield make
    for app in apps:
        app.stop(timeout=10)


def prices_topology(supplier: Any) -> ks.Topology:
    b = ks.StreamsBuilder()
    table = b.table("prices", store=supplier)
    b.stream("orders").join(table, lambda o, p: f"{o}@{p}", grace=100).to("priced")
    return b.build()


def run(app: ks.KafkaStreams) -> ks.KafkaStreams:
    app.start()
    app.wait_until_running().wait_until_idle()
    return app


@pytest.mark.parametrize("persistent", [True, False], ids=["rocksdb", "in-memory"])
def test_history_is_queryable_change_logged_and_restored(url, make_app, tmp_path, persistent) -> None:
    def supplier() -> Any:
        if persistent:
            return ks.Stores.persistent_versioned_key_value_store("prices-store", "1h")
        return ks.Stores.in_memory_versioned_key_value_store("prices-store", "1h")

    ks.produce("prices", [ks.Record("x", 10, 1_000), ks.Record("x", 12, 2_000), ks.Record("x", 11, 1_500)],
               bootstrap_servers=url)  # fmt: skip
    app = run(make_app(prices_topology(supplier())))
    store = app.store("prices-store")
    assert store.get("x") == VersionedRecord(12, 2_000)
    assert store.get("x", 1_700) == VersionedRecord(11, 1_500, 2_000)
    assert store.get("x", 999) is None
    assert store.to_pandas().to_dict("records") == [{"key": "x", "value": 12, "timestamp": 2_000}]
    app.stop(10)

    admin = connect(url).admin()
    config = admin.describe_topic("vapp-prices-store-changelog").config
    assert config.get("min.compaction.lag.ms") == str(3_600_000 + 86_400_000)
    changelog = ks.read_topic("vapp-prices-store-changelog", bootstrap_servers=url)
    assert list(zip(changelog["value"], changelog["timestamp"])) == [(10, 1_000), (12, 2_000), (11, 1_500)]

    app2 = run(make_app(prices_topology(supplier())))
    assert app2.store("prices-store").get("x", 1_700) == VersionedRecord(11, 1_500, 2_000)
    assert app2.store("prices-store").get("x", 1_200) == VersionedRecord(10, 1_000, 1_500)


def test_buffered_join_records_survive_a_restart(url, make_app) -> None:
    supplier = ks.Stores.persistent_versioned_key_value_store("prices-store", "1h")
    ks.produce("prices", [ks.Record("x", 10, 1_000), ks.Record("x", 12, 2_000)], bootstrap_servers=url)
    ks.produce("orders", [ks.Record("x", "o1", 1_500)], bootstrap_servers=url)
    app = run(make_app(prices_topology(supplier)))
    assert len(ks.read_topic("priced", bootstrap_servers=url)) == 0  # waiting for the grace period
    app.stop(10)

    ks.produce("orders", [ks.Record("x", "o2", 2_500)], bootstrap_servers=url)
    run(make_app(prices_topology(ks.Stores.persistent_versioned_key_value_store("prices-store", "1h"))))
    priced = ks.read_topic("priced", bootstrap_servers=url)
    assert list(zip(priced["value"], priced["timestamp"])) == [("o1@10", 1_500)]
