"""Apps with Schema Registry serdes: sources, sinks, stores, global tables and the test driver bound to the
app's registry (the embedded one of its memory:// cluster, or ``schema_registry_url``); records the registry
cannot read go through the deserialization handler. Results are checked against a recount in plain Python."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import pytest

import kstream_nb as ks
from kstream_nb.errors import DeserializationError
from tests.helpers import wait_for
from tests.registry_helpers import ORDER_V1, REGISTRIES, Registry, framing, order_class, registry_for

TOTAL = {
    "type": "record",
    "name": "Total",
    "namespace": "shop",
    "fields": [{"name": "customer", "type": "string"}, {"name": "total", "type": "double"}],
}
CUSTOMER = {
    "type": "record",
    "name": "Customer",
    "namespace": "shop",
    "fields": [{"name": "name", "type": "string"}, {"name": "tier", "type": "string"}],
}
ORDERS = [(f"c{i % 4}", {"id": f"o{i}", "amount": float((i * 7) % 25)}) for i in range(40)]


@pytest.fixture(params=REGISTRIES)
def registry(request: pytest.FixtureRequest) -> Iterator[Registry]:
    yield from registry_for(request)


def totals_topology(registry: Registry) -> ks.Topology:
    """Orders over 10 summed per customer (a store of Avro doubles), written as Avro ``Total`` records."""
    b = ks.StreamsBuilder()
    orders = b.stream(registry.topic("orders"), value_serde="avro")
    big = orders[orders["amount"] > 10]
    totals = big.group_by_key().aggregate(
        lambda: 0.0,
        lambda k, v, total: total + v["amount"],
        store="totals",
        value_serde=ks.Serdes.avro({"type": "double"}),
    )
    totals.to_stream().map_values(lambda k, v: {"customer": k, "total": v}).to(
        registry.topic("totals"), value_serde=ks.Serdes.avro(TOTAL)
    )
    return b.build()


def expected_totals() -> dict[str, float]:
    totals: dict[str, float] = defaultdict(float)
    for customer, order in ORDERS:
        if order["amount"] > 10:
            totals[customer] += order["amount"]
    return dict(totals)


def run(registry: Registry, topology: ks.Topology, app_id: str, **config: Any) -> ks.KafkaStreams:
    config.setdefault("commit_interval_ms", 50)
    config.setdefault("poll_ms", 20)
    return ks.KafkaStreams(
        topology, registry.topic(app_id), registry.bootstrap, schema_registry_url=registry.url, **config
    )


def test_an_app_reads_avro_aggregates_into_an_avro_store_and_writes_avro(registry: Registry) -> None:
    registry.produce(registry.topic("orders"), ORDERS, partitions=3, value_serde=ks.Serdes.avro(ORDER_V1))
    app = run(registry, totals_topology(registry), "totals-app")
    try:
        app.start().wait_until_running().wait_until_idle()
        expected = expected_totals()
        out = registry.read(registry.topic("totals"), value_serde="avro")
        latest = {v["customer"]: v["total"] for v in out["value"]}
        assert latest == expected
        assert dict(app.store("totals").all()) == expected
    finally:
        assert app.stop()
    changelog = f"{registry.topic('totals-app')}-totals-changelog"
    subjects = set(registry.client.get_subjects())
    assert {
        f"{registry.topic('orders')}-value",
        f"{registry.topic('totals')}-value",
        f"{changelog}-value",
    } <= subjects
    # the store's changelog holds Avro doubles under its own subject
    raw = registry.read(changelog, value_serde="bytes")["value"].tolist()
    assert raw and {framing(d)[0] for d in raw} == {registry.schema_id(f"{changelog}-value")}


def test_the_test_driver_uses_the_embedded_registry() -> None:
    b = ks.StreamsBuilder()
    orders = b.stream("orders", value_serde="avro")
    orders[orders["amount"] > 10].map_values(lambda v: {"customer": v["id"], "total": v["amount"]}).to(
        "big", value_serde=ks.Serdes.avro(TOTAL)
    )
    with ks.TopologyTestDriver(b.build()) as driver:
        driver.create_input_topic("orders", value_serde=ks.Serdes.avro(ORDER_V1)).pipe_value_list(
            [{"id": "o1", "amount": 5.0}, {"id": "o2", "amount": 50.0}]
        )
        out = driver.create_output_topic("big", value_serde="avro")
        assert out.read_values_to_list() == [{"customer": "o2", "total": 50.0}]


def test_a_global_table_of_avro_records(registry: Registry) -> None:
    customers = [("c0", {"name": "Ann", "tier": "gold"}), ("c1", {"name": "Bob", "tier": "basic"})]
    registry.produce(registry.topic("customers"), customers, value_serde=ks.Serdes.avro(CUSTOMER))
    registry.produce(registry.topic("orders"), ORDERS[:4], value_serde=ks.Serdes.avro(ORDER_V1))
    b = ks.StreamsBuilder()
    table = b.global_table(registry.topic("customers"), value_serde="avro")
    b.stream(registry.topic("orders"), value_serde="avro").join(
        table, lambda order, customer: [order["id"], customer["tier"]], key_selector=lambda k, v: k
    ).to(registry.topic("enriched"))
    app = run(registry, b.build(), "global-app")
    try:
        app.start().wait_until_running().wait_until_idle()
        out = registry.read(registry.topic("enriched"))
    finally:
        assert app.stop()
    tiers = dict((k, v["tier"]) for k, v in customers)
    assert out["value"].tolist() == [[o["id"], tiers[k]] for k, o in ORDERS[:4] if k in tiers]


def test_protobuf_values_reach_the_app_as_dicts(registry: Registry) -> None:
    order = order_class()
    topic = registry.topic("pb-orders")
    records = [("c1", order(order_id="o1", quantity=2**40)), ("c2", order(order_id="o2", quantity=3))]
    registry.produce(topic, records, value_serde=ks.Serdes.protobuf(order))
    b = ks.StreamsBuilder()
    pb = b.stream(topic, value_serde="protobuf")
    # (this DSL keeps a stream's value serde through map_values, unlike Kafka Streams: the sink names JSON)
    pb[pb["quantity"] > 10].map_values(lambda v: v["order_id"]).to(registry.topic("large"), value_serde="json")
    app = run(registry, b.build(), "pb-app")
    try:
        app.start().wait_until_running().wait_until_idle()
        assert registry.read(registry.topic("large"))["value"].tolist() == ["o1"]
    finally:
        assert app.stop()


def _with_a_bad_record(registry: Registry) -> bytes:
    """orders: a good Avro order, one whose schema id the registry does not know (offset 1), a good one."""
    topic = registry.topic("orders")
    registry.produce(topic, [("c1", {"id": "o1", "amount": 20.0})], value_serde=ks.Serdes.avro(ORDER_V1))
    bad = b"\x00\x7f\xff\xff\xf0\x04o2"
    registry.produce(topic, [("c2", bad)], value_serde="bytes")
    registry.produce(topic, [("c3", {"id": "o3", "amount": 30.0})], value_serde=ks.Serdes.avro(ORDER_V1))
    return bad


def _pass_ids(registry: Registry) -> ks.Topology:
    b = ks.StreamsBuilder()
    b.stream(registry.topic("orders"), value_serde="avro").map_values(lambda v: v["id"]).to(
        registry.topic("ids"), value_serde="json"
    )
    return b.build()


def test_an_unknown_schema_id_fails_the_app_naming_where(registry: Registry) -> None:
    _with_a_bad_record(registry)
    app = run(registry, _pass_ids(registry), "fail-app")
    try:
        app.start()
        wait_for(lambda: app.state is ks.State.ERROR, what="the app to fail")
        assert isinstance(app.error, DeserializationError)
        message = str(app.error)
        assert (
            f"topic={registry.topic('orders')}" in message and "partition=0" in message and "offset=1" in message
        )
        assert "schema id 2147483632" in message and "no such schema" in message
    finally:
        app.stop()


def test_log_and_continue_skips_a_record_of_an_unknown_schema_id(registry: Registry) -> None:
    _with_a_bad_record(registry)
    app = run(
        registry, _pass_ids(registry), "log-app", default_deserialization_exception_handler="log_and_continue"
    )
    try:
        app.start().wait_until_running().wait_until_idle()
        assert registry.read(registry.topic("ids"))["value"].tolist() == ["o1", "o3"]
        assert app.metrics()["skipped-deserialization-total"] == 1
    finally:
        assert app.stop()


def test_dead_letter_gets_the_bytes_and_the_schema_id(registry: Registry) -> None:
    bad = _with_a_bad_record(registry)
    app = run(registry, _pass_ids(registry), "dlq-app", default_deserialization_exception_handler="dead_letter")
    try:
        app.start().wait_until_running().wait_until_idle()
        assert registry.read(registry.topic("ids"))["value"].tolist() == ["o1", "o3"]
        dead = registry.read(f"{registry.topic('dlq-app')}-dlq", value_serde="bytes")
    finally:
        assert app.stop()
    assert dead["key"].tolist() == ["c2"] and dead["value"].tolist() == [bad]
    headers = dict(dead["headers"][0])
    assert headers["__streams.errors.offset"] == b"1"
    assert b"schema id 2147483632" in headers["__streams.errors.message"]


def test_a_table_of_avro_records_logs_them_with_their_schema(registry: Registry) -> None:
    """A KTable read with "avro" (no schema given) writes its changelog with each record's own schema."""
    customers = [("c0", {"name": "Ann", "tier": "gold"}), ("c1", {"name": "Bob", "tier": "basic"})]
    registry.produce(registry.topic("customers"), customers, value_serde=ks.Serdes.avro(CUSTOMER))
    b = ks.StreamsBuilder()
    table = b.table(registry.topic("customers"), value_serde="avro", store="customers")
    table.filter(lambda k, v: v["tier"] == "gold").to_stream().to(registry.topic("gold"), value_serde="avro")
    app = run(registry, b.build(), "table-app")
    try:
        app.start().wait_until_running().wait_until_idle()
        assert dict(app.store("customers").all()) == dict(customers)
        gold = registry.read(registry.topic("gold"), value_serde="avro")
    finally:
        assert app.stop()
    assert list(zip(gold["key"], gold["value"])) == [("c0", {"name": "Ann", "tier": "gold"})]
    changelog = f"{registry.topic('table-app')}-customers-changelog"
    logged = registry.read(changelog, value_serde="avro")
    assert dict(zip(logged["key"], logged["value"])) == dict(customers)
    assert f"{changelog}-value" in registry.client.get_subjects()


def test_a_changed_value_is_written_with_the_default_serde_a_kept_one_with_its_own(registry: Registry) -> None:
    """As Kafka Streams' KStreamImpl: filter keeps the stream's value serde, map_values drops it."""
    registry.produce(registry.topic("orders"), ORDERS[:6], value_serde=ks.Serdes.avro(ORDER_V1))
    b = ks.StreamsBuilder()
    orders = b.stream(registry.topic("orders"), value_serde="avro")
    orders.filter(lambda k, v: v["amount"] > 10).to(registry.topic("big"))
    orders.map_values(lambda v: v["amount"]).to(registry.topic("amounts"))
    app = run(registry, b.build(), "serde-kept")
    try:
        app.start().wait_until_running().wait_until_idle()
    finally:
        assert app.stop(timeout=10)
    big = [o for _, o in ORDERS[:6] if o["amount"] > 10]
    written = registry.read(registry.topic("big"), value_serde="bytes")["value"]
    assert [framing(d)[0] for d in written] == [registry.schema_id(f"{registry.topic('big')}-value")] * len(big)
    assert registry.read(registry.topic("big"), value_serde="avro")["value"].tolist() == big
    amounts = registry.read(registry.topic("amounts"), value_serde="json")["value"].tolist()
    assert amounts == [o["amount"] for _, o in ORDERS[:6]]


def test_avro_values_through_a_table_regrouping_and_a_foreign_key_join(registry: Registry) -> None:
    """Avro serdes inside the internal formats (a table's change records, the foreign-key join's response) are
    bound to the app's registry too."""
    customers = [("c0", {"name": "Ann", "tier": "gold"}), ("c1", {"name": "Bob", "tier": "basic"})]
    registry.produce(registry.topic("customers"), customers, value_serde=ks.Serdes.avro(CUSTOMER))
    orders = [(f"o{i}", {"customer": f"c{i % 2}", "amount": float(i)}) for i in range(6)]
    registry.produce(registry.topic("orders-by-id"), orders)
    b = ks.StreamsBuilder()
    people = b.table(registry.topic("customers"), value_serde="avro")
    people.group_by(lambda k, v: (v["tier"], v), value_serde="avro").count(store="tiers")
    placed = b.table(registry.topic("orders-by-id")).join(
        people, lambda o, c: c["name"], foreign_key_extractor=lambda o: o["customer"]
    )
    placed.to_stream().to(registry.topic("placed"))
    app = run(registry, b.build(), "internal-avro")
    try:
        app.start().wait_until_running().wait_until_idle()
        assert dict(app.store("tiers").all()) == {"gold": 1, "basic": 1}
    finally:
        assert app.stop(timeout=10)
    out = registry.read(registry.topic("placed"))
    assert dict(zip(out["key"], out["value"], strict=True)) == {
        key: dict(customers)[o["customer"]]["name"] for key, o in orders
    }
