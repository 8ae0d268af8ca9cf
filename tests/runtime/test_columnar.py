"""Columnar input: a DataFrame produced without a value column flows through pandas-style ops in the app."""

from __future__ import annotations

import numpy as np
import pandas as pd

import kstream_nb as ks
from tests.helpers import wait_for


def _orders(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "key": [f"c{i % 7}" for i in range(n)],
            "amount": rng.integers(0, 300, n),
            "price": rng.integers(1, 50, n).astype(float),
            "qty": rng.integers(1, 10, n),
        }
    )


def _expected(frame: pd.DataFrame) -> pd.DataFrame:
    big = frame[frame["amount"] > 100]
    return big.assign(total=big["price"] * big["qty"])


def _topology() -> ks.Topology:
    b = ks.StreamsBuilder()
    s = b.stream("orders")
    s[s["amount"] > 100].assign(total=s["price"] * s["qty"]).to("out")
    return b.build()


def _as_rows(frame: pd.DataFrame) -> list[tuple]:
    cols = ["key", "amount", "price", "qty", "total"]
    rows = [tuple(r) for r in frame[cols].itertuples(index=False, name=None)]
    return sorted((k, int(a), float(p), int(q), float(t)) for k, a, p, q, t in rows)


def _read_out(url: str) -> pd.DataFrame:
    out = ks.read_topic("out", bootstrap_servers=url)
    values = pd.DataFrame(out["value"].tolist())
    values.insert(0, "key", out["key"].tolist())
    return values


def test_columnar_frame_through_filter_and_assign_equals_pandas(url, make_app):
    orders = _orders(500, seed=3)
    ks.produce("orders", orders, bootstrap_servers=url, partitions=3)
    app = make_app(_topology(), application_id="columnar", num_stream_threads=2)
    app.start()
    app.wait_until_running().wait_until_idle()

    expected = _expected(orders)
    wait_for(lambda: len(ks.read_topic("out", bootstrap_servers=url)) == len(expected), what="all output")
    out = _read_out(url)
    assert set(out.columns) == {"key", "amount", "price", "qty", "total"}
    assert _as_rows(out) == _as_rows(expected)
    assert app.metrics()["process-total"] == len(orders)

    # keys stay on their partition: the output (same partition count as created) mirrors the input keys
    raw = ks.read_topic("out", bootstrap_servers=url)
    assert len(raw) == len(expected)
    assert (raw["value"].map(lambda v: v["amount"]) > 100).all()


def test_columnar_and_row_records_mixed(url, make_app):
    orders = _orders(60, seed=5)
    ks.produce("orders", orders.iloc[:30], bootstrap_servers=url, partitions=2)
    rows = orders.iloc[30:]
    ks.produce(
        "orders",
        [
            (r["key"], {"amount": int(r["amount"]), "price": float(r["price"]), "qty": int(r["qty"])})
            for _, r in rows.iterrows()
        ],
        bootstrap_servers=url,
        partitions=2,
    )
    app = make_app(_topology(), application_id="mixed")
    app.start()
    app.wait_until_running().wait_until_idle()
    expected = _expected(orders)
    wait_for(lambda: len(ks.read_topic("out", bootstrap_servers=url)) == len(expected), what="all output")
    assert _as_rows(_read_out(url)) == _as_rows(expected)


def test_columnar_input_while_running(url, make_app):
    ks.produce("orders", _orders(5, seed=1), bootstrap_servers=url, partitions=2)
    app = make_app(_topology(), application_id="live")
    app.start()
    app.wait_until_running().wait_until_idle()
    more = _orders(200, seed=9)
    ks.produce("orders", more, bootstrap_servers=url, partitions=2)
    app.wait_until_idle()
    expected = pd.concat([_expected(_orders(5, seed=1)), _expected(more)])
    wait_for(lambda: len(ks.read_topic("out", bootstrap_servers=url)) == len(expected), what="all output")
    assert _as_rows(_read_out(url)) == _as_rows(expected)


def test_columnar_output_feeds_a_record_by_record_consumer(url, make_app):
    orders = _orders(120, seed=11)
    ks.produce("orders", orders, bootstrap_servers=url, partitions=2)
    b = ks.StreamsBuilder()
    s = b.stream("orders")
    s[s["amount"] > 100].assign(total=s["price"] * s["qty"]).to("out")
    b.stream("out").map_values(lambda v: v["total"] * 2).to("doubled")
    app = make_app(b.build(), application_id="chain")
    app.start()
    app.wait_until_running().wait_until_idle()
    expected = _expected(orders)
    wait_for(lambda: len(ks.read_topic("doubled", bootstrap_servers=url)) == len(expected), what="doubled")
    doubled = ks.read_topic("doubled", bootstrap_servers=url)
    assert sorted(zip(doubled["key"], doubled["value"])) == sorted(
        zip(expected["key"], (expected["total"] * 2).tolist())
    )
