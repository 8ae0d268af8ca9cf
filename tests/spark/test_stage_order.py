"""How the backtest orders sub-topologies: dependency order, a foreign-key join's two sides as one cycle."""

from __future__ import annotations

import kstream_nb as ks
from kstream_nb.spark.runner import is_cycle, stage_order


def test_foreign_key_join_sides_form_one_cycle_before_their_downstream() -> None:
    b = ks.StreamsBuilder()
    orders, customers = b.table("orders"), b.table("customers")
    joined = orders.join(customers, lambda o, c: {**o, **c}, foreign_key_extractor=lambda o: o["customer"])
    joined.group_by(lambda k, v: (v["tier"], 1)).count(store="per-tier").to_stream().to("tiers")
    b.stream("clicks").group_by_key().count(store="clicks").to_stream().to("click-counts")
    topology = b.build()
    resolve = lambda t: f"app-{t}" if topology.is_internal(t) else t  # noqa: E731
    subs = {s.id: s for s in topology.subtopologies()}
    reading = {t: s.id for s in subs.values() for t in s.source_topics}
    left, right, clicks = reading["orders"], reading["customers"], reading["clicks"]
    tiers = next(i for i, s in subs.items() if "tiers" in s.sink_topics)
    groups = [[s.id for s in group] for group in stage_order(topology, resolve)]
    assert sorted(map(sorted, groups)) == sorted([sorted([left, right]), [tiers], [clicks]])
    assert groups.index(sorted([left, right])) < groups.index([tiers])
    assert [is_cycle([subs[i] for i in g], resolve) for g in groups] == [len(g) == 2 for g in groups]
