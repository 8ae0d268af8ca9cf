"""Stream-GlobalKTable joins: a key selector picks the table row; every instance holds all partitions."""

import uuid

import kstream_nb as ks


def topology() -> ks.Topology:
    b = ks.StreamsBuilder()
    items = b.global_table("items", store="items")
    priced = b.stream("orders").left_join(
        items,
        lambda order, item: {**order, "price": item and item["price"]},
        key_selector=lambda user, order: order["item"],
    )
    priced.to("priced")
    return b.build()


def test_global_table_join_in_the_test_driver():
    with ks.TopologyTestDriver(topology()) as d:
        items, orders = d.create_input_topic("items"), d.create_input_topic("orders")
        items.pipe_input("apple", {"price": 3}, timestamp=1)
        orders.pipe_input("ann", {"item": "apple"}, timestamp=2)
        orders.pipe_input("bob", {"item": "pear"}, timestamp=3)
        items.pipe_input("apple", None, timestamp=4)  # delete: later orders see no price
        orders.pipe_input("cid", {"item": "apple"}, timestamp=5)
        out = d.create_output_topic("priced").read_key_values_to_list()
        assert out == [
            ("ann", {"item": "apple", "price": 3}),
            ("bob", {"item": "pear", "price": None}),
            ("cid", {"item": "apple", "price": None}),
        ]
        assert d.get_key_value_store("items").get("apple") is None


def test_global_table_is_bootstrapped_from_every_partition_before_processing():
    url = f"memory://g-{uuid.uuid4().hex[:8]}"
    prices = [(f"item-{i}", {"price": i}) for i in range(20)]
    ks.produce("items", prices, bootstrap_servers=url, partitions=4)  # spread over 4 partitions
    ks.produce(
        "orders", [(f"u{i}", {"item": f"item-{i}"}) for i in range(20)], bootstrap_servers=url, partitions=2
    )
    app = ks.KafkaStreams(topology(), "global-join", url, num_stream_threads=2)
    try:
        app.start().wait_until_running()
        app.wait_until_idle()
        out = ks.read_topic("priced", bootstrap_servers=url)
        assert sorted(v["price"] for v in out["value"]) == list(range(20))
        assert app.store("items").get("item-7") == {"price": 7}
    finally:
        assert app.stop()
