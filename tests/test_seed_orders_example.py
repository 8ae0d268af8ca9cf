"""Seed 000's order example, live on the embedded cluster, against an independent pandas computation."""

import uuid

from kstream_nb.examples import seed_orders


def test_seed_order_example_matches_pandas():
    data = seed_orders.generate(seed=7, orders=1_500)
    live = seed_orders.run(data, f"memory://seed-{uuid.uuid4().hex[:8]}", threads=2)
    expected = seed_orders.expected_counts(data)
    assert sum(expected.values()) > 100  # the data really exercises the joins
    assert live == expected


def test_custom_partitioner_is_javas_string_hash():
    # well-known values of Java's String.hashCode(), including one that overflows to Integer.MIN_VALUE
    assert seed_orders.java_string_hash("abc") == 96354
    assert seed_orders.java_string_hash("hello") == 99162322
    assert seed_orders.java_string_hash("polygenelubricants") == -(2**31)
    assert all(0 <= seed_orders.item_partitioner(f"item-{i}", None, 6) < 6 for i in range(50))
