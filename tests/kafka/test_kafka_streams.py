"""The same apps on the embedded cluster and on a real broker give identical results.

Each scenario runs once on ``memory://`` and once on Apache Kafka; the test checks the result against the
expected values and that both runs agree record for record (per key: partition, values and timestamps
in offset order).
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pandas as pd
import pytest

import kstream_nb as ks
from kstream_nb.cluster import connect
from kstream_nb.cluster.base import TopicSpec
from kstream_nb.cluster.memory import reset_cluster
from kstream_nb.cluster.partitioner import default_partition
from kstream_nb.cluster.serde_specs import serde_from
from kstream_nb.errors import InvalidStateStoreError
from kstream_nb.processor.windows import TimeWindows
from tests.helpers import wait_for
from tests.kafka_broker import FAST_CLIENT_CONFIG, running_kafka

pytestmark = pytest.mark.kafka


class Backend:
    """A cluster to run a scenario on: unique names, apps stopped at the end."""

    def __init__(self, kind: str, bootstrap: str, client_config: dict[str, Any]) -> None:
        self.kind = kind
        self.bootstrap = bootstrap
        self.client_config = client_config
        self.suffix = uuid.uuid4().hex[:8]
        self.apps: list[ks.KafkaStreams] = []

    def name(self, base: str) -> str:
        return f"{base}-{self.suffix}"

    def create(self, topic: str, partitions: int) -> None:
        connect(self.bootstrap).admin().create_topics([TopicSpec(self.name(topic), partitions)])

    def produce(self, topic: str, records: Any, partitions: int = 1, **kwargs: Any) -> None:
        ks.produce(self.name(topic), records, bootstrap_servers=self.bootstrap, partitions=partitions, **kwargs)

    def read(self, topic: str, **kwargs: Any) -> pd.DataFrame:
        return ks.read_topic(self.name(topic), bootstrap_servers=self.bootstrap, **kwargs)

    def app(self, topology: ks.Topology, application_id: str, **config: Any) -> ks.KafkaStreams:
        app = ks.KafkaStreams(
            topology,
            application_id=self.name(application_id),
            bootstrap_servers=self.bootstrap,
            commit_interval_ms=100,
            poll_ms=20,
            client_config=self.client_config,
            **config,
        )
        self.apps.append(app)
        return app

    def run(self, app: ks.KafkaStreams) -> ks.KafkaStreams:
        app.start()
        return app.wait_until_running(60).wait_until_idle(60)

    def close(self) -> None:
        for app in self.apps:
            app.stop(timeout=15)
        if self.kind == "memory":
            reset_cluster(self.bootstrap)


@pytest.fixture
def on_both(kafka_bootstrap: str) -> Iterator[Callable[[Callable[[Backend], Any]], tuple[Any, Any]]]:
    """``on_both(scenario)`` runs ``scenario(backend)`` on memory:// then on Kafka; returns both results."""
    backends: list[Backend] = []

    def run(scenario: Callable[[Backend], Any]) -> tuple[Any, Any]:
        results = []
        for kind, bootstrap, config in (
            ("memory", f"memory://kafka-twin-{uuid.uuid4().hex}", {}),
            ("kafka", kafka_bootstrap, dict(FAST_CLIENT_CONFIG)),
        ):
            backend = Backend(kind, bootstrap, config)
            backends.append(backend)
            results.append(scenario(backend))
        return results[0], results[1]

    yield run
    for backend in backends:
        backend.close()


def per_key(frame: pd.DataFrame, timestamps: bool = True) -> dict[Any, tuple[Any, ...]]:
    """Key -> (partition, values in offset order[, timestamps in offset order]).

    Leave timestamps out where a task reads records that several upstream tasks wrote to one partition
    (a repartition topic): their interleaving, and so an aggregate's max timestamp, depends on timing.
    """
    out = {}
    for key, rows in frame.sort_values(["partition", "offset"]).groupby("key", sort=True):
        out[key] = (tuple(rows["partition"].unique().tolist()), tuple(rows["value"].tolist()))
        if timestamps:
            out[key] += (tuple(rows["timestamp"].tolist()),)
    return out


def store_rows(app: ks.KafkaStreams, store: str) -> list[tuple[Any, ...]]:
    frame = app.store(store).to_pandas()
    return sorted(tuple(row) for row in frame.itertuples(index=False))


SENTENCES = ["the quick brown fox", "the lazy dog", "a quick dog", "the end"] * 5


def expected_word_counts(sentences: list[str]) -> dict[str, int]:
    return dict(Counter(w for s in sentences for w in s.split()))


def word_count(backend: Backend, sentences: list[str] = SENTENCES) -> dict[str, Any]:
    backend.create("word-counts", 2)
    backend.produce("sentences", sentences, partitions=3, timestamps=1_000)
    b = ks.StreamsBuilder()
    (
        b.stream(backend.name("sentences"))
        .flat_map_values(str.split)
        .group_by(lambda k, w: w)
        .count(store="counts")
        .to_stream()
        .to(backend.name("word-counts"))
    )
    app = backend.run(backend.app(b.build(), "wc"))
    store = dict(store_rows(app, "counts"))
    metrics = app.metrics()
    app.stop(15)
    output = backend.read("word-counts")
    admin = connect(backend.bootstrap).admin()
    internal = {}
    for topic in admin.list_topics():
        if topic.startswith(backend.name("wc") + "-"):
            described = admin.describe_topic(topic)
            name = topic[len(backend.name("wc")) + 1 :]
            internal[name] = (described.partitions, described.config.get("cleanup.policy"))
    return {
        "internal": internal,
        "store": store,
        "output": per_key(output, timestamps=False),
        "records": len(output),
        "processed": metrics["process-total"],
    }


def test_word_count_store_and_output_topic(on_both) -> None:
    memory, kafka = on_both(word_count)
    # internal topics: the repartition topic has the source's partition count, the changelog one
    # partition per counting task, compacted; on Kafka the assignment leader publishes on a control topic
    assert kafka.pop("internal") == {
        "counts-repartition": (3, "delete"),
        "counts-changelog": (3, "compact"),
        "assignment": (1, "compact"),
    }
    assert memory.pop("internal") == {"counts-repartition": (3, "delete"), "counts-changelog": (3, "compact")}
    expected = expected_word_counts(SENTENCES)
    assert kafka["store"] == expected
    assert {k: v[1][-1] for k, v in kafka["output"].items()} == expected
    assert kafka["records"] == sum(expected.values())
    assert kafka == memory


CLICKS = [
    # (user, timestamp): windows of 10 s; the record at 3_000 after stream time 25_000 is late (grace 5 s)
    ("ann", 1_000), ("bob", 2_000), ("ann", 4_000), ("ann", 12_000), ("bob", 13_000),
    ("cat", 14_000), ("ann", 25_000), ("bob", 3_000), ("ann", 27_000), ("bob", 29_500),
]  # fmt: skip


def windowed_count(backend: Backend) -> dict[str, Any]:
    backend.create("window-counts", 2)
    backend.produce(
        "clicks", [(user, {"page": i}) for i, (user, _) in enumerate(CLICKS)], partitions=2,
        timestamps=[ts for _, ts in CLICKS],
    )  # fmt: skip
    b = ks.StreamsBuilder()
    (
        b.stream(backend.name("clicks"))
        .group_by_key()
        .windowed_by(TimeWindows.of("10s").grace("5s"))
        .count(store="clicks-per-10s")
        .to_stream()
        .map(lambda w, n: (f"{w.key}@{w.start}", n))
        .to(backend.name("window-counts"))
    )
    app = backend.run(backend.app(b.build(), "windows"))
    store = store_rows(app, "clicks-per-10s")
    dropped = app.metrics()["dropped-records-total"]
    app.stop(15)
    changelog = (
        connect(backend.bootstrap).admin().describe_topic(f"{backend.name('windows')}-clicks-per-10s-changelog")
    )
    return {
        "store": store,
        "output": per_key(backend.read("window-counts")),
        "dropped": dropped,
        "changelog": {k: changelog.config.get(k) for k in ("cleanup.policy", "retention.ms")},
    }


def test_windowed_count(on_both) -> None:
    memory, kafka = on_both(windowed_count)
    final = {k: v[1][-1] for k, v in kafka["output"].items()}
    # ann and bob share partition 0, so bob's record at 3_000 arrives when the task's stream time is
    # 25_000, past the end of window [0, 10_000) plus the 5 s grace: dropped
    keys = serde_from("string_or_json")
    assert default_partition(keys.serialize("", "ann"), 2) == default_partition(keys.serialize("", "bob"), 2)
    expected = {"ann@0": 2, "bob@0": 1, "ann@10000": 1, "bob@10000": 1, "cat@10000": 1, "ann@20000": 2,
                "bob@20000": 1}  # fmt: skip
    assert final == expected
    assert kafka["dropped"] == 1
    # Kafka Streams' windowed changelog: compacted and deleted one day (the default additional retention)
    # after the store's retention: 10 s windows + 5 s grace, and the store's 60 s segment
    assert kafka["changelog"] == {"cleanup.policy": "compact,delete", "retention.ms": str(75_000 + 86_400_000)}
    assert kafka == memory


USERS = [("ann", {"region": "north"}), ("bob", {"region": "south"}), ("cat", {"region": "east"})]
ORDERS = [("ann", {"amount": 10}), ("bob", {"amount": 5}), ("dan", {"amount": 7}), ("ann", {"amount": 1}),
          ("cat", {"amount": 3}), ("bob", {"amount": 2})]  # fmt: skip


def stream_table_join(backend: Backend) -> dict[str, Any]:
    backend.create("enriched", 3)
    backend.produce("users", USERS, partitions=3, timestamps=100)
    backend.create("orders", 3)
    b = ks.StreamsBuilder()
    users = b.table(backend.name("users"))
    (
        b.stream(backend.name("orders"))
        .join(users, lambda order, user: {**order, "region": user["region"]})
        .to(backend.name("enriched"))
    )
    app = backend.run(backend.app(b.build(), "join"))
    backend.produce("orders", ORDERS, partitions=3, timestamps=1_000)
    app.wait_until_idle(60)
    app.stop(15)
    return {"output": per_key(backend.read("enriched"))}


def test_stream_table_join(on_both) -> None:
    memory, kafka = on_both(stream_table_join)
    values = {k: v[1] for k, v in kafka["output"].items()}
    assert values == {
        "ann": ({"amount": 10, "region": "north"}, {"amount": 1, "region": "north"}),
        "bob": ({"amount": 5, "region": "south"}, {"amount": 2, "region": "south"}),
        "cat": ({"amount": 3, "region": "east"},),
    }
    assert kafka == memory


def global_table_join(backend: Backend) -> dict[str, Any]:
    backend.create("with-region", 2)
    backend.produce("regions", USERS, partitions=3, timestamps=100)
    backend.create("orders", 2)  # not co-partitioned with the global table's topic: no need
    b = ks.StreamsBuilder()
    regions = b.global_table(backend.name("regions"))
    (
        b.stream(backend.name("orders"))
        .left_join(
            regions,
            lambda order, user: {**order, "region": user and user["region"]},
            key_selector=lambda user, order: user,
        )
        .to(backend.name("with-region"))
    )
    app = backend.run(backend.app(b.build(), "global"))
    backend.produce("orders", ORDERS, partitions=2, timestamps=1_000)
    app.wait_until_idle(60)
    app.stop(15)
    return {"output": per_key(backend.read("with-region"))}


def test_stream_global_table_join(on_both) -> None:
    memory, kafka = on_both(global_table_join)
    values = {k: v[1] for k, v in kafka["output"].items()}
    assert values["dan"] == ({"amount": 7, "region": None},)
    assert values["cat"] == ({"amount": 3, "region": "east"},)
    assert sum(len(v) for v in values.values()) == len(ORDERS)
    assert kafka == memory


def round_trip(backend: Backend) -> dict[str, Any]:
    keyed = [ks.Record(f"key-{i}", {"n": i}, 5_000 + i, {"source": "test"}) for i in range(40)]
    backend.produce("keyed", keyed, partitions=4)
    frame = pd.DataFrame(
        {"key": [f"k{i % 7}" for i in range(30)], "amount": [float(i) for i in range(30)],
         "timestamp": [9_000 + i for i in range(30)]}
    )  # fmt: skip
    backend.produce("columns", frame, partitions=3)
    return {"keyed": backend.read("keyed"), "columns": backend.read("columns")}


def test_produce_and_read_topic_round_trip_with_java_partitioning(on_both) -> None:
    memory, kafka = on_both(round_trip)
    keys = serde_from("string_or_json")  # produce's default key serde
    for name, count, size in (("keyed", 4, 40), ("columns", 3, 30)):
        frame = kafka[name]
        assert len(frame) == size
        for key, partition in zip(frame["key"], frame["partition"]):
            assert partition == default_partition(keys.serialize(name, key), count)
        pd.testing.assert_frame_equal(frame, memory[name])
    keyed = kafka["keyed"].sort_values("timestamp")
    assert keyed["value"].tolist() == [{"n": i} for i in range(40)]
    assert set(keyed["headers"]) == {(("source", b"test"),)}
    assert sorted(kafka["columns"]["value"].map(lambda v: v["amount"])) == [float(i) for i in range(30)]


def restart(backend: Backend) -> dict[str, Any]:
    first, second = ["a b a", "c a", "b b d"], ["a d", "e a b"]
    backend.create("word-counts", 2)
    backend.produce("sentences", [(f"s{i}", s) for i, s in enumerate(first)], partitions=3, timestamps=1_000)
    b = ks.StreamsBuilder()
    (
        b.stream(backend.name("sentences"))
        .flat_map_values(str.split)
        .group_by(lambda k, w: w)
        .count(store="counts")
        .to_stream()
        .to(backend.name("word-counts"))
    )
    topology = b.build()
    app = backend.run(backend.app(topology, "restart"))
    assert app.stop(15)
    backend.produce("sentences", [(f"t{i}", s) for i, s in enumerate(second)], partitions=3, timestamps=2_000)
    again = backend.run(backend.app(topology, "restart"))  # same application id, fresh in-memory stores
    metrics = again.metrics()
    store = dict(store_rows(again, "counts"))
    again.stop(15)
    return {
        "store": store,
        "output": per_key(backend.read("word-counts"), timestamps=False),
        "restored": metrics["restored-records-total"],
        "processed": metrics["process-total"],
    }


def test_restart_resumes_from_committed_offsets_with_state_restored_from_the_changelog(on_both) -> None:
    memory, kafka = on_both(restart)
    assert kafka["store"] == {"a": 5, "b": 4, "c": 1, "d": 2, "e": 1}
    # the counts went on from the restored values, and nothing was processed twice
    assert kafka["output"]["a"][1] == (1, 2, 3, 4, 5)
    assert all(values == tuple(range(1, len(values) + 1)) for _, values in kafka["output"].values())
    assert kafka["processed"] == 2 + 5  # the two new sentences and their five words
    assert kafka["restored"] >= 4  # a, b, c, d from the changelog
    assert kafka["output"] == memory["output"]
    assert (kafka["store"], kafka["processed"]) == (memory["store"], memory["processed"])


def test_two_instances_share_the_tasks(make_kafka_app, names, kafka_bootstrap) -> None:
    sentences = [f"w{i % 7} w{i % 5} w{i % 3}" for i in range(120)]
    source, output = names("sentences"), names("word-counts")
    ks.produce(source, [(f"s{i}", s) for i, s in enumerate(sentences[:60])], bootstrap_servers=kafka_bootstrap,
               partitions=4)  # fmt: skip
    b = ks.StreamsBuilder()
    b.stream(source).flat_map_values(str.split).group_by(lambda k, w: w).count(store="counts").to_stream().to(
        output
    )
    topology = b.build()
    first = make_kafka_app(topology, application_id=names("shared"))
    second = make_kafka_app(topology, application_id=names("shared"))
    first.start().wait_until_running(60)
    assert len(first.assignment()[first.threads[0].name]) == 8  # alone: all 2 x 4 tasks
    second.start()

    def tasks(app: ks.KafkaStreams) -> set[str]:
        return {tid for per_thread in app.assignment().values() for tid in per_thread}

    def split() -> bool:
        return (
            first.state is ks.State.RUNNING
            and second.state is ks.State.RUNNING
            and len(tasks(first)) == 4
            and len(tasks(second)) == 4
        )

    wait_for(split, 60, "both instances running with 4 tasks each")
    mine, theirs = tasks(first), tasks(second)
    assert not mine & theirs
    assert mine | theirs == {f"{s}_{p}" for s in (0, 1) for p in range(4)}
    for app in (first, second):  # balanced per sub-topology: 2 of the 4 tasks of each
        assert sorted(t.split("_")[0] for t in tasks(app)) == ["0", "0", "1", "1"]

    ks.produce(source, [(f"t{i}", s) for i, s in enumerate(sentences[60:])], bootstrap_servers=kafka_bootstrap,
               partitions=4)  # fmt: skip
    expected = expected_word_counts(sentences)
    wait_for(
        lambda: first.wait_until_idle(60) and second.wait_until_idle(60) and {
            **dict(store_rows(first, "counts")), **dict(store_rows(second, "counts"))
        } == expected,
        60,
        "the two instances to count everything",
    )  # fmt: skip
    assert not set(dict(store_rows(first, "counts"))) & set(dict(store_rows(second, "counts")))
    out = ks.read_topic(output, bootstrap_servers=kafka_bootstrap)
    assert len(out) == sum(expected.values())
    final = per_key(out, timestamps=False)
    assert {k: v[1][-1] for k, v in final.items()} == expected


def test_seed_order_example_on_a_broker_of_its_own(tmp_path) -> None:
    """Seed 000's example (fixed topic names, so a broker of its own) matches pandas, as on memory://."""
    from kstream_nb.examples import seed_orders

    with running_kafka(tmp_path / "kafka") as broker:
        bootstrap = broker.bootstrap_servers
        data = seed_orders.generate(seed=7, orders=1_500)
        # as seed_orders.produce_inputs, but from timestamp 1: librdkafka turns a timestamp of 0 into "now",
        # which would put that user after every order
        ks.produce("users", data["users"], bootstrap_servers=bootstrap, partitions=3, timestamps=1)
        items = data["items"].copy()
        items["partition"] = [seed_orders.item_partitioner(k, None, 6) for k in items["key"]]
        ks.produce("items", items, bootstrap_servers=bootstrap, partitions=6, timestamps=1)
        app = ks.KafkaStreams(
            seed_orders.build_topology(),
            application_id="seed-orders",
            bootstrap_servers=bootstrap,
            num_stream_threads=2,
            client_config=FAST_CLIENT_CONFIG,
            commit_interval_ms=100,
        )
        try:
            app.start().wait_until_running(60).wait_until_idle(60)
            orders = data["orders"]
            ks.produce("orders", orders[["key", "user", "item", "ts", "quantity"]], bootstrap_servers=bootstrap,
                       partitions=3, timestamps=orders["ts"].tolist())  # fmt: skip
            app.wait_until_idle(120)
        finally:
            app.stop(15)
        updates = ks.read_topic("matches-per-hour", bootstrap_servers=bootstrap)
        last = updates.sort_values(["timestamp", "offset"]).groupby("key")["value"].last()
        live = {int(start): int(n) for start, n in last.items()}
        expected = seed_orders.expected_counts(data)
        assert sum(expected.values()) > 100
        assert live == expected


def test_fk_join_started_before_its_left_topic_exists(make_kafka_app, names, kafka_bootstrap) -> None:
    """The foreign-key join's response topic is created with the left topic's partition count once that
    topic exists, and its tasks start whole at the rebalance that follows (no crash, exact join)."""
    customers, orders_topic, out = names("customers"), names("orders"), names("enriched")
    ks.produce(customers, [(f"c{i}", {"name": f"n{i}"}) for i in range(4)], bootstrap_servers=kafka_bootstrap,
               partitions=2)  # fmt: skip
    b = ks.StreamsBuilder()
    o, c = b.table(orders_topic), b.table(customers)
    o.join(c, lambda order, cust: {**order, "name": cust["name"]}, store="enriched",
           foreign_key_extractor=lambda v: v["customer"]).to_stream().to(out)  # fmt: skip
    app_id = names("fk-late")
    app = make_kafka_app(b.build(), application_id=app_id).start()
    wait_for(lambda: app.state is ks.State.RUNNING, 60, "the app to run without its left topic")
    orders = [(f"o{i}", {"customer": f"c{i % 4}", "qty": i}) for i in range(12)]
    ks.produce(orders_topic, orders, bootstrap_servers=kafka_bootstrap, partitions=3)
    expected = {k: {**v, "name": f"n{int(v['customer'][1:])}"} for k, v in orders}

    def joined() -> bool:
        try:
            return dict(store_rows(app, "enriched")) == expected
        except InvalidStateStoreError:  # between the rebalances that bring the new topics' tasks
            assert app.state is not ks.State.ERROR, app.error
            return False

    wait_for(joined, 60, "the join of every order")
    admin = connect(kafka_bootstrap).admin()
    assert admin.partition_count(f"{app_id}-KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-0000000014-topic") == 3
