"""Column expressions: the batch (pandas) and per-record modes agree on the same records."""

from __future__ import annotations

import copy
import math
import pickle
from typing import Any

import numpy as np
import pandas as pd
import pytest

from kstream_nb.processor.expressions.frames import (
    assign_batch,
    assign_record,
    compile_predicate,
    evaluate_predicate_batch,
    project_batch,
    project_record,
)
from kstream_nb.processor.expressions.tree import BinOp, Call, Expr, Lit, UnaryOp, as_expr, col, lit
from kstream_nb.spark.expressions import to_spark

NAN = float("nan")

# i: ints with nulls (float in a frame), j: ints without nulls (int64), f: floats, s: strings,
# m: mixed types, b: bools with nulls (object), k: bools without nulls, n: numeric strings.
RECORDS: list[dict[str, Any]] = [
    {"i": 1, "j": 3, "f": 1.5, "s": "Apple", "m": 1, "b": True, "k": True, "n": "12"},
    {"i": 2, "j": -7, "f": -2.25, "s": "banana", "m": "x", "b": False, "k": False, "n": "-3"},
    {"i": None, "j": 0, "f": None, "s": None, "m": None, "b": None, "k": True, "n": None},
    {"j": 5, "f": 0.0, "s": "", "m": 2.5, "k": False, "n": "0"},
    {"i": 0, "j": 2, "f": 2.675, "s": "  Cherry ", "m": "ABC", "b": True, "k": True, "n": "7"},
    {"i": -3, "j": 4, "f": -0.5, "s": "apple pie", "m": 0, "b": False, "k": False, "n": "100"},
    {"i": 10, "j": -1, "f": 3.0, "s": "BANANA", "m": "", "b": None, "k": True},
    {"i": 7, "j": 1, "s": "cherry", "m": 7, "k": False, "n": "5"},
    {"i": 4, "j": 10, "f": 9.99, "s": "date", "m": "date", "b": True, "k": True, "n": "8"},
    {"i": 5, "j": -4, "f": NAN, "s": "a", "m": None, "b": False, "k": False, "n": "2"},
    {"i": None, "j": 6, "f": -7.5, "s": "b", "m": 3, "k": True, "n": "1"},
    {"i": 6, "j": 0, "f": 0.125, "s": "Apple", "m": "Apple", "b": True, "k": False, "n": "9"},
    {"i": -1, "j": 8, "f": 100.0, "s": "kiwi", "b": False, "k": True, "n": "4"},
    {"i": 3, "j": -2, "f": 2.5, "s": "KIWI", "m": 1.5, "b": None, "k": False, "n": "6"},
    {"i": 8, "j": 9, "f": -1.0, "s": "lemon", "m": "lemon", "b": True, "k": True, "n": "11"},
    {"i": 9, "j": 3, "f": 4.75, "s": "Lime", "m": 9, "b": False, "k": False, "n": "13"},
    {"i": 2, "j": -5, "f": 0.5, "s": "mango", "m": None, "b": True, "k": True, "n": "-8"},
    {"i": 1, "j": 7, "f": 1.0, "s": "melon", "m": "melon", "b": False, "k": False, "n": "20"},
    {"i": 5, "j": 2, "f": 6.5, "m": 4, "b": True, "k": True, "n": "3"},
    {"i": 0, "j": 1, "f": -3.5, "s": "zucchini", "m": "z", "b": False, "k": False, "n": "15"},
]


@pytest.fixture
def df() -> pd.DataFrame:
    return pd.DataFrame(RECORDS)


def is_null(x: Any) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


def same(a: Any, b: Any) -> bool:
    a, b = (x.item() if isinstance(x, np.generic) else x for x in (a, b))
    if is_null(a) or is_null(b):
        return is_null(a) and is_null(b)
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, float) or isinstance(b, float):
        return a == b or math.isclose(a, b, rel_tol=1e-12)
    return type(a) is type(b) and a == b


def check_both(expr: Expr, df: pd.DataFrame, records: list[dict[str, Any]] = RECORDS) -> list[Any]:
    batch = expr.eval_batch(df)
    assert isinstance(batch, pd.Series)
    assert batch.index.equals(df.index)
    batch_values = batch.tolist()
    record_values = [expr.eval_record(r) for r in records]
    diffs = [(n, r, b) for n, (r, b) in enumerate(zip(record_values, batch_values, strict=True)) if not same(r, b)]
    assert not diffs, f"{expr!r}: (row, record, batch) differ: {diffs}"
    return record_values


ARITH = ["+", "-", "*", "/", "//", "%", "**"]
CMP = ["==", "!=", "<", "<=", ">", ">="]
NUMERIC_PAIRS = [
    (col("i"), col("j")),
    (col("j"), col("i")),
    (col("f"), col("j")),
    (col("j"), col("f")),
    (col("i"), col("f")),
    (col("j"), lit(3)),
    (col("j"), lit(-2)),
    (col("i"), lit(0)),
    (col("f"), lit(0.0)),
    (lit(10), col("j")),
    (lit(2), col("i")),
    (col("j"), col("j")),
    (col("i"), lit(None)),
    (col("missing"), lit(2)),
]


def binop(op: str, a: Expr, b: Expr) -> Expr:
    ops = {
        "+": lambda: a + b,
        "-": lambda: a - b,
        "*": lambda: a * b,
        "/": lambda: a / b,
        "//": lambda: a // b,
        "%": lambda: a % b,
        "**": lambda: a**b,
        "==": lambda: a == b,
        "!=": lambda: a != b,
        "<": lambda: a < b,
        "<=": lambda: a <= b,
        ">": lambda: a > b,
        ">=": lambda: a >= b,
        "&": lambda: a & b,
        "|": lambda: a | b,
        "^": lambda: a ^ b,
    }
    expr = ops[op]()
    assert isinstance(expr, BinOp) and expr.op == op
    return expr


@pytest.mark.parametrize("op", ARITH)
@pytest.mark.parametrize("pair", NUMERIC_PAIRS, ids=repr)
def test_arithmetic_both_modes(df: pd.DataFrame, op: str, pair: tuple[Expr, Expr]) -> None:
    check_both(binop(op, *pair), df)


@pytest.mark.parametrize("op", CMP)
@pytest.mark.parametrize(
    "pair",
    [
        *NUMERIC_PAIRS,
        (col("s"), lit("b")),
        (col("s"), col("n")),
        (lit("c"), col("s")),
        (col("missing"), lit("x")),
        (col("s"), lit(None)),
        (col("k"), lit(True)),
    ],
    ids=repr,
)
def test_comparisons_both_modes(df: pd.DataFrame, op: str, pair: tuple[Expr, Expr]) -> None:
    values = check_both(binop(op, *pair), df)
    assert all(isinstance(v, bool) for v in values)


@pytest.mark.parametrize("op", ["==", "!="])
def test_equality_on_mixed_column(df: pd.DataFrame, op: str) -> None:
    for other in (1, "x", 2.5, True):
        check_both(binop(op, col("m"), lit(other)), df)


def test_comparison_with_null_is_false_and_not_equal_is_true(df: pd.DataFrame) -> None:
    nulls = [n for n, r in enumerate(RECORDS) if is_null(r.get("i"))]
    assert [(col("i") > 0).eval_record(RECORDS[n]) for n in nulls] == [False] * len(nulls)
    assert [(col("i") == 0).eval_record(RECORDS[n]) for n in nulls] == [False] * len(nulls)
    assert [(col("i") != 0).eval_record(RECORDS[n]) for n in nulls] == [True] * len(nulls)
    assert (col("i") + 1).eval_record({"i": None}) is None
    assert (col("i") + 1).eval_record({}) is None


def test_floor_division_and_modulo_follow_python(df: pd.DataFrame) -> None:
    records = [{"a": a, "b": b} for a in (-7, 7, -7.5, 7.5, 0) for b in (2, -2, 3, -3, 2.5, -2.5)]
    frame = pd.DataFrame(records)
    floor = check_both(col("a") // col("b"), frame, records)
    mod = check_both(col("a") % col("b"), frame, records)
    assert floor == [r["a"] // r["b"] for r in records]
    assert mod == [r["a"] % r["b"] for r in records]


def test_division_by_zero_gives_inf_or_nan(df: pd.DataFrame) -> None:
    records: list[dict[str, Any]] = [
        {"a": 1, "b": 0},
        {"a": -1, "b": 0},
        {"a": 0, "b": 0},
        {"a": 1.5, "b": 0.0},
    ]
    frame = pd.DataFrame(records)
    assert check_both(col("a") / col("b"), frame, records)[:2] == [math.inf, -math.inf]
    assert check_both(col("a") // col("b"), frame, records)[:2] == [math.inf, -math.inf]
    assert all(math.isnan(v) for v in check_both(col("a") % col("b"), frame, records))


def test_string_arithmetic(df: pd.DataFrame) -> None:
    assert check_both(col("s") + "!", df)[0] == "Apple!"
    assert check_both("<" + col("s"), df)[1] == "<banana"
    assert check_both(col("s") * 2, df)[0] == "AppleApple"
    with pytest.raises(TypeError):
        (col("s") + 1).eval_record(RECORDS[0])
    with pytest.raises(TypeError):
        (col("s") + 1).eval_batch(pd.DataFrame(RECORDS))


@pytest.mark.parametrize("op", ["&", "|", "^"])
@pytest.mark.parametrize(
    "pair",
    [
        (col("i") > 1, col("s") == "Apple"),
        (col("b"), col("k")),
        (col("b"), col("i") < 5),
        (col("f"), col("s")),
        (col("missing"), col("k")),
        (col("k"), lit(True)),
        (lit(False), col("b")),
        (col("b"), lit(None)),
    ],
    ids=repr,
)
def test_logical_ops_both_modes(df: pd.DataFrame, op: str, pair: tuple[Expr, Expr]) -> None:
    values = check_both(binop(op, *pair), df)
    assert all(isinstance(v, bool) for v in values)


def test_logical_ops_treat_null_as_false(df: pd.DataFrame) -> None:
    assert (col("b") | col("k")).eval_record({"b": None, "k": False}) is False
    assert (col("b") ^ col("k")).eval_record({"k": True}) is True
    assert (~col("b")).eval_record({"b": None}) is True


@pytest.mark.parametrize(
    "expr",
    [
        -col("i"),
        -col("j"),
        -col("f"),
        -col("k"),
        -col("missing"),
        abs(col("i")),
        col("f").abs(),
        abs(col("j")),
        ~(col("i") > 2),
        ~col("b"),
        ~col("k"),
        ~col("s"),
        ~col("missing"),
        -(col("j") * 2) + 1,
    ],
    ids=repr,
)
def test_unary_ops_both_modes(df: pd.DataFrame, expr: Expr) -> None:
    assert isinstance(expr, (UnaryOp, BinOp))
    check_both(expr, df)


@pytest.mark.parametrize(
    "expr",
    [
        col("i").isin([1, 2, 3]),
        col("i").isin([1, None]),
        col("f").isin([1.5, 2]),
        col("s").isin(["Apple", "kiwi"]),
        col("s").isin([]),
        col("m").isin([1, "x", None]),
        col("k").isin([True]),
        col("missing").isin([1]),
        col("missing").isin([None]),
    ],
    ids=repr,
)
def test_isin_both_modes(df: pd.DataFrame, expr: Expr) -> None:
    check_both(expr, df)


@pytest.mark.parametrize("name", ["i", "j", "f", "s", "m", "b", "k", "n", "missing"])
def test_isnull_notnull_both_modes(df: pd.DataFrame, name: str) -> None:
    nulls = check_both(col(name).isnull(), df)
    assert nulls == [is_null(r.get(name)) for r in RECORDS]
    assert check_both(col(name).notnull(), df) == [not v for v in nulls]
    assert check_both(col(name).isna(), df) == nulls
    assert check_both(col(name).notna(), df) == [not v for v in nulls]


@pytest.mark.parametrize(
    "expr",
    [
        col("i").fillna(0),
        col("f").fillna(-1.5),
        col("s").fillna("zz"),
        col("i").fillna("none"),
        col("i").fillna(col("j")),
        col("s").fillna(col("n")),
        col("b").fillna(False),
        col("missing").fillna(1),
        col("i").fillna(None),
        lit(None).fillna(col("j")),
    ],
    ids=repr,
)
def test_fillna_both_modes(df: pd.DataFrame, expr: Expr) -> None:
    check_both(expr, df)


def test_fillna_values(df: pd.DataFrame) -> None:
    assert check_both(col("i").fillna(0), df)[:3] == [1, 2, 0]
    assert check_both(col("s").fillna("zz"), df)[2] == "zz"
    assert check_both(col("f").fillna(col("j")), df)[9] == -4


@pytest.mark.parametrize(
    "expr",
    [
        col("j").where(col("j") > 0),
        col("j").where(col("j") > 0, 0),
        col("f").where(col("b"), col("i")),
        col("s").where(col("s").str.len() > 4, "short"),
        col("i").where(col("k"), "no"),
        lit(1).where(col("k"), 0),
    ],
    ids=repr,
)
def test_where_both_modes(df: pd.DataFrame, expr: Expr) -> None:
    check_both(expr, df)


@pytest.mark.parametrize("inclusive", ["both", "neither", "left", "right"])
def test_between_both_modes(df: pd.DataFrame, inclusive: str) -> None:
    values = check_both(col("j").between(-2, 5, inclusive=inclusive), df)
    lo_ok = {"both": -2 <= 0, "left": True, "right": False, "neither": False}
    assert values[RECORDS.index(next(r for r in RECORDS if r["j"] == -2))] is lo_ok[inclusive]
    check_both(col("i").between(0, 5, inclusive=inclusive), df)
    check_both(col("s").between("a", "c", inclusive=inclusive), df)


def test_between_rejects_bad_inclusive() -> None:
    with pytest.raises(ValueError, match="inclusive"):
        col("a").between(1, 2, inclusive="both-ish")


@pytest.mark.parametrize(
    "expr",
    [
        col("f").round(1),
        col("f").round(2),
        col("f").round(),
        round(col("f")),
        round(col("f"), 1),
        col("i").round(),
        col("j").round(-1),
        (col("f") * 3.3).round(3),
        col("missing").round(2),
    ],
    ids=repr,
)
def test_round_both_modes(df: pd.DataFrame, expr: Expr) -> None:
    check_both(expr, df)


def test_round_is_half_to_even_as_numpy() -> None:
    records = [{"x": 0.5}, {"x": 1.5}, {"x": 2.5}, {"x": 2.675}]
    assert check_both(col("x").round(), pd.DataFrame(records), records)[:3] == [0.0, 2.0, 2.0]
    assert check_both(col("x").round(2), pd.DataFrame(records), records)[3] == float(np.round(2.675, 2))


@pytest.mark.parametrize(
    "expr",
    [
        col("f").astype(int),
        col("j").astype(float),
        col("j").astype(str),
        col("j").astype(bool),
        col("i").astype(int),
        col("i").astype(float),
        col("i").astype(bool),
        col("f").astype(bool),
        col("f").astype("float"),
        col("s").astype(str),
        col("s").astype(bool),
        col("n").astype(int),
        col("n").astype(float),
        col("k").astype(int),
        col("k").astype(str),
        col("b").astype(int),
        col("m").astype(str),
        col("missing").astype(int),
    ],
    ids=repr,
)
def test_astype_both_modes(df: pd.DataFrame, expr: Expr) -> None:
    check_both(expr, df)


def test_astype_details(df: pd.DataFrame) -> None:
    assert check_both(col("f").astype(int), df)[:2] == [1, -2]
    assert check_both(col("n").astype(int), df)[:3] == [12, -3, None]
    assert check_both(col("j").astype(str), df)[:2] == ["3", "-7"]
    assert check_both(col("s").astype(str), df)[2] is None
    with pytest.raises(TypeError, match="astype"):
        col("a").astype(list)


@pytest.mark.parametrize("name", ["s", "m", "i", "k", "n", "missing"])
@pytest.mark.parametrize(
    "method",
    [
        lambda e: e.str.lower(),
        lambda e: e.str.upper(),
        lambda e: e.str.strip(),
        lambda e: e.str.len(),
        lambda e: e.str.contains("an"),
        lambda e: e.str.contains("."),
        lambda e: e.str.startswith("A"),
        lambda e: e.str.endswith("e"),
    ],
    ids=["lower", "upper", "strip", "len", "contains", "contains_dot", "startswith", "endswith"],
)
def test_string_methods_both_modes(df: pd.DataFrame, name: str, method: Any) -> None:
    check_both(method(col(name)), df)


def test_string_method_values(df: pd.DataFrame) -> None:
    assert check_both(col("s").str.lower(), df)[:3] == ["apple", "banana", None]
    assert check_both(col("s").str.upper(), df)[0] == "APPLE"
    assert check_both(col("s").str.strip(), df)[4] == "Cherry"
    assert check_both(col("s").str.len(), df)[:4] == [5, 6, None, 0]
    assert check_both(col("s").str.contains("an"), df)[:3] == [False, True, False]
    assert check_both(col("s").str.contains("."), df)[0] is False
    assert check_both(col("s").str.startswith("A"), df)[:2] == [True, False]
    assert check_both(col("m").str.endswith("C"), df)[4] is True


def test_nested_expression_both_modes(df: pd.DataFrame) -> None:
    expr = ((col("f").fillna(0) * col("j") + col("i").fillna(1) // 2) > 1) | col("s").str.lower().isin(
        ["kiwi", "lime"]
    )
    check_both(expr, df)
    check_both((col("f") * col("j")).round(2).where(col("k"), -col("i")), df)


def test_literal_only_expressions_broadcast(df: pd.DataFrame) -> None:
    assert check_both(lit(1) + lit(2), df) == [3] * len(RECORDS)
    assert check_both(lit("a").str.upper(), df) == ["A"] * len(RECORDS)
    assert check_both(lit(None) > 1, df) == [False] * len(RECORDS)
    assert check_both(lit(None), df) == [None] * len(RECORDS)
    assert check_both(lit([1, 2]), df) == [[1, 2]] * len(RECORDS)


def test_missing_field_is_null_never_keyerror(df: pd.DataFrame) -> None:
    assert col("nope").eval_record({"a": 1}) is None
    assert col("nope").eval_record(None) is None
    assert all(is_null(v) for v in col("nope").eval_batch(df))
    assert check_both(col("nope") < "x", df) == [False] * len(RECORDS)
    assert check_both(col("nope").str.lower(), df) == [None] * len(RECORDS)
    assert check_both(col("nope").fillna("d"), df) == ["d"] * len(RECORDS)


def test_empty_frame() -> None:
    empty = pd.DataFrame([])
    assert (col("a") > 1).eval_batch(empty).tolist() == []
    assert evaluate_predicate_batch(col("a") > 1, empty).tolist() == []
    assert assign_batch(empty, {"t": col("a") * 2})["t"].tolist() == []


def test_non_dict_value_gives_friendly_type_error() -> None:
    with pytest.raises(TypeError, match=r"col\('amount'\).*int: 5"):
        (col("amount") > 1).eval_record(5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"col\('amount'\).*str: 'hello'"):
        col("amount").eval_record("hello")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"assign\(total\).*list"):
        assign_record([1, 2], {"total": col("a")})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"'user'.*int"):
        project_record(3, ["user", "amount"])  # type: ignore[arg-type]


def test_bool_raises() -> None:
    with pytest.raises(TypeError, match=r"& \| ~"):
        bool(col("a") > 1)
    with pytest.raises(TypeError, match="ambiguous"):
        _ = (col("a") > 1) and (col("b") < 2)
    with pytest.raises(TypeError):
        _ = not col("a")
    with pytest.raises(TypeError):
        if col("a") == 1:
            pass


def test_eq_builds_an_expression_and_exprs_are_unhashable() -> None:
    eq = col("a") == 1
    assert isinstance(eq, BinOp) and eq.op == "=="
    ne = col("a") != "x"
    assert isinstance(ne, BinOp) and ne.op == "!="
    with pytest.raises(TypeError):
        hash(col("a"))


def test_repr() -> None:
    assert repr(col("price") * col("qty")) == "(col('price') * col('qty'))"
    assert repr(col("amount") > 100) == "(col('amount') > 100)"
    assert repr(2 * col("a")) == "(2 * col('a'))"
    assert repr(lit(5)) == "lit(5)"
    assert repr(~(col("a") > 1)) == "(~(col('a') > 1))"
    assert repr(-col("a")) == "(-col('a'))"
    assert repr(abs(col("a"))) == "abs(col('a'))"
    assert repr((col("a") > 1) & (col("b") == "x")) == "((col('a') > 1) & (col('b') == 'x'))"
    assert repr(col("a").isin([1, 2])) == "col('a').isin([1, 2])"
    assert repr(col("a").isnull()) == "col('a').isnull()"
    assert repr(col("a").fillna(0)) == "col('a').fillna(0)"
    assert repr(col("a").astype(int)) == "col('a').astype(int)"
    assert repr(col("a").round(2)) == "col('a').round(2)"
    assert repr(col("s").str.lower()) == "col('s').str.lower()"
    assert repr(col("s").str.contains("x")) == "col('s').str.contains('x')"
    assert repr(col("a").where(col("b") > 0, col("c"))) == "col('a').where((col('b') > 0), col('c'))"
    assert repr(col("a").between(1, 2)) == "((col('a') >= 1) & (col('a') <= 2))"


def test_columns() -> None:
    assert col("a").columns() == {"a"}
    assert lit(1).columns() == set()
    expr = ((col("a") + col("b")) > col("c")).fillna(col("d")).where(col("e").str.len() > 1, col("f"))
    assert expr.columns() == {"a", "b", "c", "d", "e", "f"}
    assert (-col("x")).columns() == {"x"}
    assert col("x").isin([1]).columns() == {"x"}


def test_same_as() -> None:
    assert (col("a") + 1).same_as(col("a") + 1)
    assert not (col("a") + 1).same_as(col("a") + 1.0)
    assert not (col("a") + 1).same_as(col("a") - 1)
    assert not (col("a") + 1).same_as(col("b") + 1)
    assert col("a").isin([1, 2]).same_as(col("a").isin((1, 2)))
    assert lit(None).same_as(lit(None))
    assert lit(NAN).same_as(lit(NAN))
    assert not col("a").same_as("a")


def test_immutable_and_picklable() -> None:
    expr = (col("a") * 2 > 3) & col("s").str.startswith("x")
    with pytest.raises(AttributeError):
        expr.op = "|"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        col("a").__dict__  # noqa: B018
    expr.eval_record({"a": 5, "s": "xy"})
    for clone in (pickle.loads(pickle.dumps(expr)), copy.deepcopy(expr), copy.copy(expr)):
        assert clone.same_as(expr)
        assert clone.eval_record({"a": 5, "s": "xy"}) is True


def test_compile_record_is_cached() -> None:
    expr = col("a") + col("b")
    fn = expr.compile_record()
    assert expr.compile_record() is fn
    assert fn({"a": 1, "b": 2}) == 3


def test_validation() -> None:
    with pytest.raises(ValueError, match="unknown binary operator"):
        BinOp("@", col("a"), lit(1))
    with pytest.raises(ValueError, match="unknown unary operator"):
        UnaryOp("+", col("a"))
    with pytest.raises(ValueError, match="unknown function"):
        Call("nope", (col("a"),))
    with pytest.raises(TypeError, match="column names"):
        col(1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="list-like"):
        col("a").isin("abc")
    with pytest.raises(TypeError):
        lit(col("a"))
    assert as_expr(col("a")).same_as(col("a"))
    assert as_expr(3).same_as(Lit(3))


def test_evaluate_predicate_batch_and_compile_predicate(df: pd.DataFrame) -> None:
    for expr in (col("i") > 2, col("b"), col("s").str.len(), col("missing"), (col("f") > 0) & col("k")):
        mask = evaluate_predicate_batch(expr, df)
        assert isinstance(mask, np.ndarray) and mask.dtype == np.bool_
        predicate = compile_predicate(expr)
        assert mask.tolist() == [predicate(r) for r in RECORDS]
    assert compile_predicate(col("a") > 1)(None) is False
    assert evaluate_predicate_batch(lit(True), df).tolist() == [True] * len(RECORDS)


def test_assign_batch_and_record_agree_and_do_not_mutate(df: pd.DataFrame) -> None:
    before_df = df.copy(deep=True)
    before_records = copy.deepcopy(RECORDS)
    assignments = {
        "total": col("f") * col("j"),
        "j": col("j") + 1,
        "next": col("j") * 10,
        "const": "x",
        "fn": lambda v: v["j"] - 1,
        "label": col("s").str.upper().fillna("?"),
    }
    out = assign_batch(df, assignments)
    pd.testing.assert_frame_equal(df, before_df)
    outs = [assign_record(r, assignments) for r in RECORDS]
    assert before_records == RECORDS
    assert list(out.columns) == [*df.columns, "total", "next", "const", "fn", "label"]
    for n, rec in enumerate(outs):
        assert list(rec)[: len(RECORDS[n])] == list(RECORDS[n])
        for name in assignments:
            assert same(rec[name], out[name].iloc[n]), (n, name, rec[name], out[name].iloc[n])
    assert outs[0]["j"] == 4 and outs[0]["next"] == 40 and outs[0]["fn"] == 3
    assert assign_record(None, {"a": lit(1), "b": col("x")}) == {"a": 1, "b": None}


def test_project_batch_and_record(df: pd.DataFrame) -> None:
    before = df.copy(deep=True)
    out = project_batch(df, ["s", "j", "nope"])
    pd.testing.assert_frame_equal(df, before)
    assert list(out.columns) == ["s", "j", "nope"]
    assert out["nope"].isna().all()
    record = {"s": "a", "j": 1, "x": 2}
    assert project_record(record, ["s", "j", "nope"]) == {"s": "a", "j": 1, "nope": None}
    assert record == {"s": "a", "j": 1, "x": 2}
    assert project_record(None, ["s"]) == {"s": None}
    for n, r in enumerate(RECORDS):
        projected = project_record(r, ["s", "j", "nope"])
        assert all(same(projected[k], out[k].iloc[n]) for k in projected)


def test_filter_and_assign_on_a_million_rows() -> None:
    n = 1_000_000
    rng = np.random.default_rng(7)
    amount = rng.uniform(-50, 500, n)
    amount[rng.random(n) < 0.05] = np.nan
    frame = pd.DataFrame(
        {
            "user": rng.choice(np.array(["ann", "bob", "cy", None], dtype=object), n),
            "amount": amount,
            "qty": rng.integers(0, 10, n),
            "price": rng.uniform(0, 100, n).round(2),
        }
    )
    predicate = (col("amount") > 100) & col("user").notnull() & (col("qty") != 3)
    assignments = {"total": col("price") * col("qty"), "bucket": col("amount") // 50, "neg": -col("qty")}
    mask = evaluate_predicate_batch(predicate, frame)
    out = assign_batch(frame[mask], assignments)
    assert len(out) == int(mask.sum()) and 0 < len(out) < n
    sample = rng.choice(n, 2000, replace=False)
    records = frame.iloc[sample].to_dict("records")
    for row, rec in zip(sample, records, strict=True):
        keep = predicate.eval_record(rec)
        assert keep == bool(mask[row])
        if keep:
            got = assign_record(rec, assignments)
            for name in assignments:
                assert same(got[name], out.at[row, name])


class FakeColumn:
    """Stands in for pyspark.sql.Column: builds a text form of the expression."""

    def __init__(self, text: str) -> None:
        self.text = text

    def _op(self, op: str, other: Any) -> FakeColumn:
        return FakeColumn(f"({self.text} {op} {getattr(other, 'text', repr(other))})")

    def __add__(self, o: Any) -> FakeColumn:
        return self._op("+", o)

    def __sub__(self, o: Any) -> FakeColumn:
        return self._op("-", o)

    def __mul__(self, o: Any) -> FakeColumn:
        return self._op("*", o)

    def __truediv__(self, o: Any) -> FakeColumn:
        return self._op("/", o)

    def __mod__(self, o: Any) -> FakeColumn:
        return self._op("%", o)

    def __eq__(self, o: Any) -> FakeColumn:  # type: ignore[override]
        return self._op("=", o)

    def __ne__(self, o: Any) -> FakeColumn:  # type: ignore[override]
        return self._op("!=", o)

    def __lt__(self, o: Any) -> FakeColumn:
        return self._op("<", o)

    def __le__(self, o: Any) -> FakeColumn:
        return self._op("<=", o)

    def __gt__(self, o: Any) -> FakeColumn:
        return self._op(">", o)

    def __ge__(self, o: Any) -> FakeColumn:
        return self._op(">=", o)

    def __and__(self, o: Any) -> FakeColumn:
        return self._op("AND", o)

    def __or__(self, o: Any) -> FakeColumn:
        return self._op("OR", o)

    def __invert__(self) -> FakeColumn:
        return FakeColumn(f"(NOT {self.text})")

    def __neg__(self) -> FakeColumn:
        return FakeColumn(f"(- {self.text})")

    def __getattr__(self, name: str) -> Any:
        return lambda *args: FakeColumn(f"{self.text}.{name}({', '.join(map(_text, args))})")


def _text(x: Any) -> str:
    return x.text if isinstance(x, FakeColumn) else repr(x)


class FakeFunctions:
    """Stands in for pyspark.sql.functions."""

    def __getattr__(self, name: str) -> Any:
        return lambda *args: FakeColumn(f"{name}({', '.join(map(_text, args))})")


def test_to_spark_translates_every_node() -> None:
    F = FakeFunctions()
    exprs = [
        *(binop(op, col("a"), lit(2)) for op in [*ARITH, *CMP, "&", "|", "^"]),
        -col("a"),
        ~col("a"),
        abs(col("a")),
        col("a").isin([1, None]),
        col("a").isin([]),
        col("a").isnull(),
        col("a").notnull(),
        col("a").fillna(0),
        col("a").where(col("b"), 1),
        col("a").round(2),
        col("a").astype(int),
        *(
            m(col("s"))
            for m in (
                lambda e: e.str.lower(),
                lambda e: e.str.upper(),
                lambda e: e.str.strip(),
                lambda e: e.str.len(),
                lambda e: e.str.contains("x"),
                lambda e: e.str.startswith("x"),
                lambda e: e.str.endswith("x"),
            )
        ),
    ]
    texts = [to_spark(e, F).text for e in exprs]
    assert texts[0] == "(col('a') + lit(2))"
    assert "coalesce((col('a') = lit(2)), lit(False))" in texts
    assert "coalesce((col('a') != lit(2)), lit(True))" in texts
    assert "floor((col('a') / lit(2)))" in texts
    assert "col('a').cast('long')" in texts
    assert "bround(col('a'), 2)" in texts
