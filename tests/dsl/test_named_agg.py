"""Pandas-style ``agg`` on grouped streams, checked against pandas' own groupby on the same rows."""

import pandas as pd
import pytest

import kstream_nb as ks

ROWS = [
    {"user": "a", "amount": 1.0},
    {"user": "b", "amount": 2.0},
    {"user": "a", "amount": 3.5},
    {"user": "a", "amount": None},
    {"user": "c", "amount": -4.0},
    {"user": "b", "amount": 10.0},
]


def run(**named):
    b = ks.StreamsBuilder()
    b.stream("orders").group_by(lambda k, v: v["user"]).agg(store="per_user", **named).to_stream().to("out")
    with ks.TopologyTestDriver(b.build()) as driver:
        topic = driver.create_input_topic("orders")
        for i, row in enumerate(ROWS):
            topic.pipe_input(None, row, timestamp=i)
        store = dict(driver.get_key_value_store("per_user").all())
        updates = driver.create_output_topic("out").read_key_values_to_list()
    return store, updates


def test_named_aggregations_equal_pandas_groupby():
    store, updates = run(
        total=("amount", "sum"), n=("amount", "count"), avg=("amount", "mean"),
        lo=("amount", "min"), hi=("amount", "max"), first=("amount", "first"), last=("amount", "last"),
    )  # fmt: skip
    expected = (
        pd.DataFrame(ROWS).groupby("user")["amount"].agg(["sum", "count", "mean", "min", "max", "first", "last"])
    )
    for user, row in expected.iterrows():
        got = store[user]
        assert got["total"] == pytest.approx(row["sum"])
        assert got["n"] == row["count"]
        assert got["avg"] == pytest.approx(row["mean"])
        assert (got["lo"], got["hi"]) == (row["min"], row["max"])
        assert (got["first"], got["last"]) == (row["first"], row["last"])
    # one update per input record (the null amount still updates user a, unchanged)
    assert [k for k, _ in updates] == [r["user"] for r in ROWS]


def test_agg_rejects_unknown_function_and_bad_spec():
    g = ks.StreamsBuilder().stream("orders").group_by_key()
    with pytest.raises(ValueError, match="median"):
        g.agg(x=("amount", "median"))
    with pytest.raises(TypeError, match="field, function"):
        g.agg(x="amount")
