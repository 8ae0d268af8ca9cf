"""Seed 000's order example: per hour, how many orders bought an item made where the buyer lives.

orders (3 partitions, key user) left-join users (3 partitions) -> keep orders whose user has an address
-> re-key by item and repartition into 6 partitions with a custom partitioner -> left-join items
(6 partitions, written with the same partitioner) -> keep orders whose item origin equals the user's
address -> count per hour of event time (the order's ``ts``).

The count runs in its own task, fed by the six tasks of the join; they do not advance in lock-step, so
the counting task sees event time jump back and forth by the skew between them. The window grace must
cover that skew, or records are dropped as late (``dropped-records-total``): one day here.

Run: ``python -m kstream_nb.examples.seed_orders``.
"""

from __future__ import annotations

import argparse
import uuid
from typing import Any

import numpy as np
import pandas as pd

import kstream_nb as ks
from kstream_nb.processor.windows import TimeWindows

HOUR_MS = 3_600_000
CITIES = ["Beijing", "Shanghai", "Hangzhou", "Shenzhen", "Chengdu"]
CATEGORIES = ["book", "phone", "food", "toy"]


def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode`` (the seed's partitioner hashes the item name with it)."""
    h = 0
    for ch in s:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def item_partitioner(key: Any, value: Any, num_partitions: int) -> int:
    """The seed's custom partitioner: item-name hash, made positive, modulo the partition count."""
    return (java_string_hash(str(key)) & 0x7FFFFFFF) % num_partitions


def generate(seed: int = 0, users: int = 50, items: int = 30, orders: int = 2_000,
             hours: int = 6) -> dict[str, pd.DataFrame]:  # fmt: skip
    """Deterministic users, items and orders (some users without an address, orders out of order)."""
    rng = np.random.default_rng(seed)
    user_names = [f"user-{i}" for i in range(users)]
    item_names = [f"item-{i}" for i in range(items)]
    user_df = pd.DataFrame({
        "key": user_names,
        "gender": rng.choice(["F", "M"], users),
        "address": [None if rng.random() < 0.1 else str(rng.choice(CITIES)) for _ in range(users)],
        "age": rng.integers(18, 70, users),
    })  # fmt: skip
    item_df = pd.DataFrame({
        "key": item_names,
        "price": rng.integers(1, 500, items).astype(float),
        "category": rng.choice(CATEGORIES, items),
        "origin": rng.choice(CITIES, items),
    })  # fmt: skip
    ts = np.sort(rng.integers(HOUR_MS, (hours + 1) * HOUR_MS, orders))
    ts = ts + rng.integers(-600_000, 600_000, orders) * (rng.random(orders) < 0.2)
    order_df = pd.DataFrame({
        "key": rng.choice(user_names, orders),
        "item": rng.choice([*item_names, "item-unknown"], orders),
        "ts": ts.astype(np.int64),
        "quantity": rng.integers(1, 5, orders),
    })  # fmt: skip
    order_df["user"] = order_df["key"]
    return {"users": user_df, "items": item_df, "orders": order_df}


def build_topology(grace: str = "1d") -> ks.Topology:
    """The seed's topology; the result KTable is stored as ``matches-per-hour``."""
    b = ks.StreamsBuilder()
    orders = b.stream("orders", timestamp_extractor="field:ts")
    users = b.table("users")
    items = b.table("items")
    (
        orders.left_join(users, lambda order, user: {**order, "address": user and user.get("address")})
        .filter(lambda user, order: order["address"] is not None)
        .select_key(lambda user, order: order["item"])
        .repartition(number_of_partitions=6, partitioner=item_partitioner, name="orderuser-by-item")
        .left_join(items, lambda order, item: {**order, "origin": item and item.get("origin")})
        .filter(lambda item, order: order["origin"] == order["address"])
        .group_by(lambda item, order: "all")
        .windowed_by(TimeWindows.of("1h").grace(grace))
        .count(store="matches-per-hour")
        .to_stream()
        .map(lambda w, n: (w.start, n))
        .to("matches-per-hour")
    )
    return b.build()


def expected_counts(data: dict[str, pd.DataFrame]) -> dict[int, int]:
    """The same count computed independently with pandas: hour start (ms) -> matching orders."""
    users = data["users"].rename(columns={"key": "user"})[["user", "address"]]
    items = data["items"].rename(columns={"key": "item"})[["item", "origin"]]
    joined = data["orders"].merge(users, on="user", how="left").merge(items, on="item", how="left")
    matches = joined[joined["address"].notna() & (joined["address"] == joined["origin"])]
    hours = (matches["ts"] // HOUR_MS) * HOUR_MS
    return {int(h): int(n) for h, n in hours.value_counts().sort_index().items()}


def produce_inputs(data: dict[str, pd.DataFrame], bootstrap_servers: str) -> None:
    """Creates the three topics; items are partitioned with the seed's partitioner (co-partitioned)."""
    ks.produce("users", data["users"], bootstrap_servers=bootstrap_servers, partitions=3, timestamps=0)
    items = data["items"].copy()
    items["partition"] = [item_partitioner(k, None, 6) for k in items["key"]]
    ks.produce("items", items, bootstrap_servers=bootstrap_servers, partitions=6, timestamps=0)


def run(data: dict[str, pd.DataFrame], bootstrap_servers: str, threads: int = 2) -> dict[int, int]:
    """Runs the topology live on ``bootstrap_servers``; returns the final count per hour."""
    produce_inputs(data, bootstrap_servers)
    app = ks.KafkaStreams(build_topology(), application_id="seed-orders", bootstrap_servers=bootstrap_servers,
                          num_stream_threads=threads)  # fmt: skip
    try:
        app.start().wait_until_running()
        app.wait_until_idle()
        orders = data["orders"].drop(columns=["key"]).assign(key=data["orders"]["key"])
        columns = ["key", "user", "item", "ts", "quantity"]
        ks.produce("orders", orders[columns], bootstrap_servers=bootstrap_servers, partitions=3,
                   timestamps=orders["ts"].tolist())  # fmt: skip
        app.wait_until_idle(timeout=120)
    finally:
        app.stop()
    updates = ks.read_topic("matches-per-hour", bootstrap_servers=bootstrap_servers)
    last = updates.sort_values(["timestamp", "offset"]).groupby("key")["value"].last()
    return {int(start): int(n) for start, n in last.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--orders", type=int, default=5_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    data = generate(args.seed, orders=args.orders)
    live = run(data, f"memory://seed-orders-{uuid.uuid4().hex[:6]}")
    expected = expected_counts(data)
    for hour in sorted(set(live) | set(expected)):
        print(f"hour {hour // HOUR_MS:>3}: live {live.get(hour, 0):>6}  pandas {expected.get(hour, 0):>6}")
    same = live == expected
    print("MATCH" if same else "MISMATCH")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
