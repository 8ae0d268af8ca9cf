"""Pandas style on a KStream of dict values: ``s[expr]``, ``s.assign(...)``, ``s[[...]]``."""

from __future__ import annotations

from typing import Any

import pytest

import kstream_nb as ks
from kstream_nb.processor.expressions import Expr
from kstream_nb.runtime.test_driver import TestRecord

ORDERS: list[dict[str, Any]] = [
    {"user": "ann", "amount": 150, "price": 5.0, "qty": 3, "note": "a"},
    {"user": "bob", "amount": 80, "price": 2.0, "qty": 1, "note": "b"},
    {"user": "cid", "amount": 101, "price": 1.5, "qty": 4, "note": "c"},
    {"user": "dee", "amount": 100, "price": 9.0, "qty": 2, "note": "d"},
]


def _run(build: Any, values: list[Any]) -> list[TestRecord]:
    b = ks.StreamsBuilder()
    build(b.stream("orders")).to("out")
    with ks.TopologyTestDriver(b.build()) as d:
        i = d.create_input_topic("orders")
        for n, value in enumerate(values):
            i.pipe_input(f"k{n}", value, timestamp=10 + n)
        return d.create_output_topic("out").read_records_to_list()


def test_boolean_mask_filters_records() -> None:
    out = _run(lambda s: s[s["amount"] > 100], ORDERS)
    assert out == [TestRecord("k0", ORDERS[0], 10), TestRecord("k2", ORDERS[2], 12)]


def test_combined_mask_with_and_or_not() -> None:
    out = _run(lambda s: s[(s["amount"] >= 100) & ~(s["user"] == "dee") | (s["qty"] == 1)], ORDERS)
    assert [r.key for r in out] == ["k0", "k1", "k2"]


def test_assign_adds_computed_fields_and_keeps_others() -> None:
    out = _run(lambda s: s.assign(total=s["price"] * s["qty"], big=s["amount"] > 100), ORDERS[:2])
    assert out == [
        TestRecord("k0", {**ORDERS[0], "total": 15.0, "big": True}, 10),
        TestRecord("k1", {**ORDERS[1], "total": 2.0, "big": False}, 11),
    ]


def test_assign_replaces_an_existing_field() -> None:
    out = _run(lambda s: s.assign(amount=s["amount"] + 1), [ORDERS[1]])
    assert out[0].value["amount"] == 81


def test_projection_keeps_only_named_fields() -> None:
    out = _run(lambda s: s[["user", "amount"]], ORDERS[:2])
    assert [r.value for r in out] == [{"user": "ann", "amount": 150}, {"user": "bob", "amount": 80}]


def test_filter_assign_project_chained() -> None:
    def build(s: ks.KStream) -> ks.KStream:
        big = s[s["amount"] > 90]
        with_total = big.assign(total=big["price"] * big["qty"])
        return with_total[["user", "total"]]

    out = _run(build, ORDERS)
    assert out == [
        TestRecord("k0", {"user": "ann", "total": 15.0}, 10),
        TestRecord("k2", {"user": "cid", "total": 6.0}, 12),
        TestRecord("k3", {"user": "dee", "total": 18.0}, 13),
    ]


def test_pandas_style_mixes_with_lambdas_and_keeps_headers() -> None:
    b = ks.StreamsBuilder()
    s = b.stream("orders")
    s[s["amount"] > 100].map_values(lambda v: v["user"].upper()).to("out")
    headers = (("h", b"1"),)
    with ks.TopologyTestDriver(b.build()) as d:
        i = d.create_input_topic("orders")
        i.pipe_input("a", ORDERS[0], timestamp=1, headers=headers)
        i.pipe_input("b", ORDERS[1], timestamp=2, headers=headers)
        assert d.create_output_topic("out").read_records_to_list() == [TestRecord("a", "ANN", 1, headers)]


def test_expressions_are_data_not_lambdas() -> None:
    s = ks.StreamsBuilder().stream("orders")
    total = s["price"] * s["qty"]
    mask = (s["amount"] > 100) & s["user"].isin(["ann", "bob"])
    assert isinstance(total, Expr) and isinstance(mask, Expr)
    assert repr(total) == "(col('price') * col('qty'))"
    assert repr(s["amount"] > 100) == "(col('amount') > 100)"
    assert total.columns() == {"price", "qty"}
    assert mask.columns() == {"amount", "user"}
    assert s["user"].same_as(ks.col("user"))
    assert total.eval_record({"price": 2.0, "qty": 4}) == 8.0


def test_expression_cannot_be_used_as_a_python_bool() -> None:
    s = ks.StreamsBuilder().stream("orders")
    with pytest.raises(TypeError):
        bool(s["amount"] > 1)


def test_bad_getitem_argument_is_a_clear_error() -> None:
    s = ks.StreamsBuilder().stream("orders")
    with pytest.raises(TypeError, match="field name"):
        s[3]
