"""Column expressions against an independent oracle, through real topologies.

``test_expressions.py`` checks that the per-record and the batch evaluation agree with each other; a bug
shared by both (the operator table) passes there. Here every expression runs in a topology
(``s.assign(...)``, ``s[expr]``) and each output is compared with a value computed by plain Python in
this file: one small function per operator family, written with Python's own operators and the null
rule of ``kstream_nb.processor.expressions``' docstring (a missing field, None and NaN are null;
arithmetic with null is null; comparisons with null are False except ``!=``; ``& | ^ ~`` treat null as
False). Nothing from ``kstream_nb.processor.expressions`` computes an expected value. Where pandas has
the same semantics, the output is also compared with pandas' own result on the same DataFrame.

Records come from ``random.Random(seed)`` (fixed seeds) and enter in five ways:

- ``records-json``/``records-pickle``: piped one by one into a ``TopologyTestDriver`` (fused chains),
  with the JSON serde (NaN and +-inf travel as null) or a pickle serde (values exactly as computed);
- ``columnar-json``/``columnar-pickle``: the DataFrame of the records handed to the driver's task as one
  columnar batch (what a consumer fetches after ``ks.produce(frame)``), so that the processors run
  ``process_batch`` (a batch falling back to records fails the test);
- ``app-columnar-json``: ``ks.produce(frame)`` into a ``memory://`` cluster and a ``KafkaStreams`` app,
  the public path of a pandas DataFrame.

Documented or pandas-inherited rules asserted here (not plain Python): ``x / 0`` and ``x // 0`` are
+-inf (IEEE sign), ``0 / 0`` and ``x % 0`` NaN (null), ``0 ** negative`` inf, a negative base to a
fractional power NaN, an overflowing ``**`` inf (as numpy and pandas); ``//`` and ``%`` floor like
Python (not Java's truncation); ``round`` is half to even; ``astype`` keeps nulls null; string methods
give null (tests: False) on non-strings. In a batch an int field with nulls is a float64 column, so the
columnar modes compare numbers by value (``3`` and ``3.0`` are equal) while the record modes also check
the type.
"""

from __future__ import annotations

import functools
import math
import operator
import pickle
import random
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import kstream_nb as ks
from kstream_nb.cluster.memory import reset_cluster
from kstream_nb.cluster.records import ColumnarBatch, FetchedBatch
from kstream_nb.cluster.serde_specs import serde_from
from kstream_nb.cluster.serdes import FunctionSerde, Serde
from kstream_nb.dsl.kstream import KStream
from kstream_nb.processor import node as node_module

SEEDS = (3, 1789, 20240611)
N_RANDOM = 40
NAN = float("nan")
INF = math.inf
PICKLE = FunctionSerde(pickle.dumps, pickle.loads)
WORDS = ["apple", "Banana", "cherry pie", "  kiwi ", "MANGO", "an", "", "a.b", "straße", "Éclair", "date", "be"]

# ---- records --------------------------------------------------------------------------------------

# i: small ints with None and missing; j: ints in [-5, 5] never null (zeros divide); f: floats with None,
# NaN, missing and zeros; g: floats never null (0.0 and -0.0 divide); p, e: small base and exponent;
# h: quarters (exact halves for round); s: strings with None/missing; t: strings never null; b: bools
# with None; k: bools never null; m: mixed int/float/str/None; n: numeric strings. "missing" never exists.
EDGE_RECORDS: list[dict[str, Any]] = [
    {"i": 7, "j": 0, "f": NAN, "g": -0.0, "p": 0, "e": -1, "h": 2.5, "s": None, "t": "an",
     "b": None, "k": True, "m": None, "n": "-3"},
    {"i": None, "j": 2, "f": None, "g": 0.0, "p": -4, "e": 3, "h": -0.75, "t": "", "b": True,
     "k": False, "m": "apple", "n": None},
    {"j": -3, "f": 0.0, "g": 7.5, "p": None, "e": -2, "h": None, "s": "", "t": "Banana", "b": False,
     "k": True, "m": 1, "n": "12"},
    {"i": 0, "j": 0, "f": -2.25, "g": -6.125, "p": 3, "e": 0, "h": 0.0, "s": "apple", "t": "date",
     "k": False, "m": 2.5, "n": "0"},
    {"i": -7, "j": 2, "f": 7.5, "g": 2.0, "p": 0, "e": 0, "h": -2.5, "s": "  kiwi ", "t": "straße",
     "b": True, "k": True, "m": "", "n": "5"},
]  # fmt: skip


_MISSING = object()


def _maybe(rng: random.Random, value: Any, p_none: float, p_missing: float = 0.0, p_nan: float = 0.0) -> Any:
    """``value``, or None, a missing field (``_MISSING``) or NaN with the given probabilities."""
    u = rng.random()
    if u < p_missing:
        return _MISSING
    if u < p_missing + p_none:
        return None
    if u < p_missing + p_none + p_nan:
        return NAN
    return value


def _float(rng: random.Random, lo: float, hi: float, digits: int, p_zero: float, p_neg_zero: float = 0.0) -> float:
    u = rng.random()
    if u < p_zero:
        return 0.0
    if u < p_zero + p_neg_zero:
        return -0.0
    return round(rng.uniform(lo, hi), digits)


def make_records(seed: int) -> list[dict[str, Any]]:
    """The edge records, then ``N_RANDOM`` records drawn from ``random.Random(seed)``."""
    rng = random.Random(seed)
    records = [dict(r) for r in EDGE_RECORDS]
    for _ in range(N_RANDOM):
        mixed = rng.choice([rng.randint(-3, 3), rng.choice(WORDS), rng.randint(-6, 6) / 2, None])
        fields = {
            "i": _maybe(rng, rng.randint(-12, 12), 0.12, p_missing=0.08),
            "j": rng.randint(-5, 5),
            "f": _maybe(rng, _float(rng, -40, 40, 2, 0.08), 0.1, p_missing=0.05, p_nan=0.08),
            "g": _float(rng, -8, 8, 3, 0.08, 0.04),
            "p": _maybe(rng, rng.randint(-4, 4), 0.12),
            "e": rng.randint(-2, 3),
            "h": _maybe(rng, rng.randint(-40, 40) / 4, 0.1),
            "s": _maybe(rng, rng.choice(WORDS), 0.12, p_missing=0.06),
            "t": rng.choice(WORDS),
            "b": _maybe(rng, rng.random() < 0.5, 0.2),
            "k": rng.random() < 0.5,
            "m": mixed,
            "n": _maybe(rng, str(rng.randint(-50, 50)), 0.15),
        }
        records.append({name: v for name, v in fields.items() if v is not _MISSING})
    return records


# ---- the oracle: plain Python, written here -----------------------------------------------------


def is_null(x: Any) -> bool:
    """The documented null: a missing field (read as None), None or NaN."""
    return x is None or (isinstance(x, float) and math.isnan(x))


def truthy(x: Any) -> bool:
    """How ``& | ^ ~`` and filters read a value: null is False, else Python truth."""
    return (not is_null(x)) and bool(x)


def ieee_div(a: Any, b: Any) -> float:
    """``a / 0`` as IEEE 754 (numpy, pandas): 0/0 is NaN, else inf signed by a and by the zero's sign."""
    if a == 0:
        return NAN
    return math.copysign(INF, a) * math.copysign(1.0, b)


def py_pow(a: Any, b: Any) -> Any:
    if a == 0 and b < 0:
        return INF  # IEEE pow(+0, negative); no base here is -0.0
    try:
        result = a**b
    except OverflowError:
        odd = float(b).is_integer() and int(b) % 2 == 1
        return -INF if a < 0 and odd else INF
    return NAN if isinstance(result, complex) else result


def py_arith(op: str, a: Any, b: Any) -> Any:
    if is_null(a) or is_null(b):
        return None
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op == "/":
        return a / b if b != 0 else ieee_div(a, b)
    if op == "//":
        return a // b if b != 0 else ieee_div(a, b)
    if op == "%":
        return a % b if b != 0 else NAN
    if op == "**":
        return py_pow(a, b)
    raise AssertionError(op)


def py_compare(op: str, a: Any, b: Any) -> bool:
    if is_null(a) or is_null(b):
        return op == "!="
    if op == "==":
        return bool(a == b)
    if op == "!=":
        return bool(a != b)
    if op == "<":
        return bool(a < b)
    if op == "<=":
        return bool(a <= b)
    if op == ">":
        return bool(a > b)
    if op == ">=":
        return bool(a >= b)
    raise AssertionError(op)


def py_logic(op: str, a: Any, b: Any) -> bool:
    x, y = truthy(a), truthy(b)
    if op == "&":
        return x and y
    if op == "|":
        return x or y
    if op == "^":
        return x != y
    raise AssertionError(op)


STR_TESTS = ("contains", "startswith", "endswith")


def py_str(method: str, x: Any, arg: str = "") -> Any:
    if not isinstance(x, str):
        return False if method in STR_TESTS else None
    if method == "lower":
        return x.lower()
    if method == "upper":
        return x.upper()
    if method == "strip":
        return x.strip()
    if method == "len":
        return len(x)
    if method == "contains":
        return arg in x
    if method == "startswith":
        return x.startswith(arg)
    if method == "endswith":
        return x.endswith(arg)
    raise AssertionError(method)


def py_cast(name: str, x: Any) -> Any:
    if is_null(x):
        return None
    return {"int": int, "float": float, "str": str, "bool": bool}[name](x)


def py_between(x: Any, left: Any, right: Any, inclusive: str) -> bool:
    if is_null(x):
        return False
    lo = left <= x if inclusive in ("both", "left") else left < x
    hi = x <= right if inclusive in ("both", "right") else x < right
    return bool(lo and hi)


def py_isin(x: Any, values: list[Any]) -> bool:
    if is_null(x):
        return any(is_null(v) for v in values)
    return x in [v for v in values if not is_null(v)]


# ---- operands and cases -------------------------------------------------------------------------

# How each operator is spelled; applied to expressions (the library) and to Series (pandas) only.
BUILD: dict[str, Callable[[Any, Any], Any]] = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "/": lambda a, b: a / b,
    "//": lambda a, b: a // b,
    "%": lambda a, b: a % b,
    "**": lambda a, b: a**b,
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
    "&": lambda a, b: a & b,
    "|": lambda a, b: a | b,
    "^": lambda a, b: a ^ b,
}

PandasFn = Callable[[pd.DataFrame], Any]


@dataclass(frozen=True)
class Term:
    """One operand three ways: the library expression (from the stream), the Python value of a record,
    and the pandas Series of the frame (None where pandas cannot take it)."""

    label: str
    lib: Callable[[KStream], Any]
    py: Callable[[dict[str, Any]], Any]
    pd: PandasFn | None

    def __repr__(self) -> str:
        return self.label


def c(name: str) -> Term:
    """A field; pandas only for fields that exist as a column."""
    return Term(
        name,
        lambda s: s[name],
        lambda r: r.get(name),
        None if name == "missing" else (lambda df: df[name]),
    )


def k(value: Any) -> Term:
    """A constant operand."""
    return Term(repr(value), lambda s: value, lambda r: value, None if value is None else (lambda df: value))


@dataclass(frozen=True)
class Case:
    """An expression (``lib``), its Python value per record (``py``) and optionally pandas' result."""

    label: str
    lib: Callable[[KStream], Any]
    py: Callable[[dict[str, Any]], Any]
    pandas: PandasFn | None = None
    #: records whose pandas result deliberately differs (documented null rule): not compared with pandas
    pandas_skip: Callable[[dict[str, Any]], bool] | None = None
    #: also run as a filter ``s[expr]``
    predicate: bool = False


def binary(op: str, a: Term, b: Term, *, pandas: bool = True, predicate: bool = False) -> Case:
    oracle = py_arith if op in ("+", "-", "*", "/", "//", "%", "**") else py_compare
    if op in ("&", "|", "^"):
        oracle = py_logic
    pd_fn: PandasFn | None = None
    a_pd, b_pd = a.pd, b.pd
    if pandas and a_pd is not None and b_pd is not None:
        if op == "**":  # pandas raises on int ** negative int: the base as float, as the library does

            def pd_fn(df: pd.DataFrame) -> Any:
                base = a_pd(df)
                return BUILD[op](base.astype(float) if isinstance(base, pd.Series) else float(base), b_pd(df))

        else:

            def pd_fn(df: pd.DataFrame) -> Any:
                return BUILD[op](a_pd(df), b_pd(df))

    skip = None
    if op == "**":  # pandas/numpy: NaN ** 0 == 1 ** NaN == 1; documented here: arithmetic with null is null

        def skip(r: dict[str, Any]) -> bool:
            return is_null(a.py(r)) or is_null(b.py(r))

    return Case(
        f"{a!r} {op} {b!r}",
        lambda s: BUILD[op](a.lib(s), b.lib(s)),
        lambda r: oracle(op, a.py(r), b.py(r)),
        pd_fn,
        skip,
        predicate,
    )


def cmp_term(op: str, a: Term, b: Term) -> Term:
    """A comparison as an operand of a logical operator."""
    pd_fn = None
    a_pd, b_pd = a.pd, b.pd
    if a_pd is not None and b_pd is not None:

        def pd_fn(df: pd.DataFrame) -> Any:
            return BUILD[op](a_pd(df), b_pd(df))

    return Term(
        f"({a!r} {op} {b!r})",
        lambda s: BUILD[op](a.lib(s), b.lib(s)),
        lambda r: py_compare(op, a.py(r), b.py(r)),
        pd_fn,
    )


def method_term(label: str, lib: Callable[[Any], Any], py: Callable[[Any], Any], base: Term) -> Term:
    """A method of another term (``base.str.contains("an")``), Python value from ``py(base value)``."""
    return Term(f"{base!r}.{label}", lambda s: lib(base.lib(s)), lambda r: py(base.py(r)), None)


def field_case(
    label: str,
    name: str,
    lib: Callable[[Any], Any],
    py: Callable[[Any], Any],
    pdf: Callable[[pd.Series], Any] | None = None,
    predicate: bool = False,
) -> Case:
    """A function of one field: ``lib(s[name])``, ``py(record.get(name))``, ``pdf(df[name])``."""
    return Case(
        label,
        lambda s: lib(s[name]),
        lambda r: py(r.get(name)),
        None if pdf is None else (lambda df: pdf(df[name])),
        predicate=predicate,
    )


def _neg(x: Any) -> Any:
    return None if is_null(x) else -x


def _abs(x: Any) -> Any:
    return None if is_null(x) else abs(x)


def _not_null(x: Any) -> bool:
    return not is_null(x)


# ---- families -----------------------------------------------------------------------------------

NUMERIC_PAIRS = [
    (c("i"), c("j")),
    (c("j"), c("i")),
    (c("f"), c("g")),
    (c("g"), c("f")),
    (c("j"), c("g")),
    (c("g"), c("j")),
    (c("i"), c("f")),
    (c("i"), k(3)),
    (c("f"), k(-2.5)),
    (c("j"), k(0)),
    (k(10), c("j")),
    (k(1.5), c("f")),
    (k(-7), c("g")),
    (c("k"), c("j")),
    (c("missing"), k(1)),
    (c("i"), k(None)),
]
POW_PAIRS = [
    (c("p"), c("e")),
    (c("i"), c("j")),
    (c("p"), c("p")),
    (c("h"), c("e")),
    (c("g"), k(2)),
    (c("f"), k(0.5)),
    (k(2), c("e")),
    (k(-8.0), c("h")),
    (c("p"), k(-1)),
    (c("g"), k(400)),
    (c("g"), k(401)),
    (c("missing"), k(2)),
    (c("f"), k(None)),
]
STRING_ARITH = {
    "+": [(c("t"), k("!")), (k("<"), c("t")), (c("s"), c("t"))],
    "*": [(c("t"), k(2)), (k(3), c("t")), (c("s"), k(2))],
}
ORDERING_PAIRS = [
    (c("i"), c("j")),
    (c("j"), c("i")),
    (c("f"), c("g")),
    (c("j"), c("g")),
    (c("i"), c("f")),
    (c("h"), c("g")),
    (c("i"), k(0)),
    (c("f"), k(1.5)),
    (k(0), c("f")),
    (k(2), c("j")),
    (c("t"), k("cherry pie")),
    (c("k"), k(True)),
    (c("missing"), k(1)),
    (c("s"), k(None)),
]
# with None among strings or bools: pandas raises in an ordering comparison (== and != go element-wise)
OBJECT_PAIRS = [(c("s"), c("t")), (k("m"), c("s")), (c("k"), c("b"))]
EQUALITY_ONLY = [(c("m"), k(1)), (c("m"), k("apple")), (c("m"), c("i")), (c("b"), k(True))]


def arith_family(op: str) -> list[Case]:
    pairs = POW_PAIRS if op == "**" else NUMERIC_PAIRS + STRING_ARITH.get(op, [])
    return [binary(op, a, b) for a, b in pairs]


def compare_family(op: str) -> list[Case]:
    cases = [binary(op, a, b, predicate=True) for a, b in ORDERING_PAIRS]
    if op in ("==", "!="):
        return cases + [binary(op, a, b, predicate=True) for a, b in OBJECT_PAIRS + EQUALITY_ONLY]
    return cases + [binary(op, a, b, pandas=False, predicate=True) for a, b in OBJECT_PAIRS]


def unary_family() -> list[Case]:
    cases = []
    for name in ("i", "j", "f", "g", "h", "k", "b", "missing"):
        pandas = name in ("i", "j", "f", "g", "h")  # pandas refuses -bool; missing is no column
        cases.append(field_case(f"-{name}", name, operator.neg, _neg, operator.neg if pandas else None))
        cases.append(field_case(f"abs({name})", name, abs, _abs, operator.methodcaller("abs") if pandas else None))
    cases += [
        Case("f.abs()", lambda s: s["f"].abs(), lambda r: _abs(r.get("f")), lambda df: df["f"].abs()),
        Case(
            "-(i - j) * 2",
            lambda s: -(s["i"] - s["j"]) * 2,
            lambda r: py_arith("*", _neg(py_arith("-", r.get("i"), r["j"])), 2),
            lambda df: -(df["i"] - df["j"]) * 2,
        ),
    ]
    return cases


I_POS = cmp_term(">", c("i"), k(0))
F_NONPOS = cmp_term("<=", c("f"), k(0))
T_AN = method_term(
    "str.contains('an')", lambda e: e.str.contains("an"), lambda x: py_str("contains", x, "an"), c("t")
)
T_AN_PD = Term(T_AN.label, T_AN.lib, T_AN.py, lambda df: df["t"].str.contains("an", regex=False))
LOGIC_PAIRS = [
    (I_POS, T_AN_PD),
    (I_POS, F_NONPOS),
    (c("b"), c("k")),
    (c("f"), c("k")),
    (c("s"), c("b")),
    (c("i"), c("j")),
    (c("missing"), c("k")),
    (c("k"), k(True)),
    (k(False), c("b")),
    (c("b"), k(None)),
]


def invert_case(term: Term, pandas: bool) -> Case:
    term_pd = term.pd if pandas else None
    return Case(
        f"~{term!r}",
        lambda s: ~term.lib(s),
        lambda r: not truthy(term.py(r)),
        None if term_pd is None else (lambda df: ~term_pd(df)),
        predicate=True,
    )


def logic_family() -> list[Case]:
    cases = []
    for op in ("&", "|", "^"):
        for a, b in LOGIC_PAIRS:
            pandas = a.label in ("k", I_POS.label) and b.label in (T_AN.label, F_NONPOS.label, "True")
            cases.append(binary(op, a, b, pandas=pandas, predicate=True))
    for term in (c("b"), c("k"), I_POS, c("f"), c("s"), c("i"), c("missing")):
        cases.append(invert_case(term, pandas=term.label in ("k", I_POS.label)))
    cases.append(
        Case(
            "~((i > 0) | (f <= 0)) & k",
            lambda s: ~(I_POS.lib(s) | F_NONPOS.lib(s)) & s["k"],
            lambda r: not (truthy(I_POS.py(r)) or truthy(F_NONPOS.py(r))) and truthy(r["k"]),
            predicate=True,
        )
    )
    return cases


STR_METHODS: list[tuple[str, Callable[[Any], Any], Callable[[pd.Series], pd.Series], str]] = [
    ("lower", lambda e: e.str.lower(), lambda x: x.str.lower(), ""),
    ("upper", lambda e: e.str.upper(), lambda x: x.str.upper(), ""),
    ("strip", lambda e: e.str.strip(), lambda x: x.str.strip(), ""),
    ("len", lambda e: e.str.len(), lambda x: x.str.len(), ""),
    ("contains", lambda e: e.str.contains("an"), lambda x: x.str.contains("an", regex=False, na=False), "an"),
    ("contains", lambda e: e.str.contains("."), lambda x: x.str.contains(".", regex=False, na=False), "."),
    ("startswith", lambda e: e.str.startswith("a"), lambda x: x.str.startswith("a", na=False), "a"),
    ("startswith", lambda e: e.str.startswith("B"), lambda x: x.str.startswith("B", na=False), "B"),
    ("endswith", lambda e: e.str.endswith("e"), lambda x: x.str.endswith("e", na=False), "e"),
    ("endswith", lambda e: e.str.endswith(" "), lambda x: x.str.endswith(" ", na=False), " "),
]


def string_family() -> list[Case]:
    cases = []
    for name in ("s", "t", "m", "i", "n", "missing"):
        for method, lib, pdf, arg in STR_METHODS:
            pandas = name in ("s", "t", "m", "n")
            oracle = functools.partial(py_str, method, arg=arg)
            label = f"{name}.str.{method}({arg!r})"
            cases.append(field_case(label, name, lib, oracle, pdf if pandas else None, method in STR_TESTS))
    cases += [
        Case(
            "s.str.strip().str.upper()",
            lambda s: s["s"].str.strip().str.upper(),
            lambda r: py_str("upper", py_str("strip", r.get("s"))),
            lambda df: df["s"].str.strip().str.upper(),
        ),
        Case(
            "t.str.len() > 4",
            lambda s: s["t"].str.len() > 4,
            lambda r: py_compare(">", py_str("len", r["t"]), 4),
            lambda df: df["t"].str.len() > 4,
            predicate=True,
        ),
    ]
    return cases


def nulls_family() -> list[Case]:
    cases = []
    for name in ("i", "j", "f", "g", "s", "b", "m", "missing"):
        pandas = name != "missing"
        for method, oracle in (
            ("isnull", is_null),
            ("notnull", _not_null),
            ("isna", is_null),
            ("notna", _not_null),
        ):
            call = operator.methodcaller(method)
            cases.append(field_case(f"{name}.{method}()", name, call, oracle, call if pandas else None, True))
    fills: list[tuple[Term, Term]] = [
        (c("i"), k(0)),
        (c("f"), k(-1.5)),
        (c("s"), k("zz")),
        (c("b"), k(False)),
        (c("m"), k("?")),
        (c("missing"), k(7)),
        (c("i"), c("j")),
        (c("f"), c("g")),
        (c("s"), c("t")),
        (c("i"), k(None)),
        (c("i"), k("none")),
    ]
    cases += [fillna_case(x, other) for x, other in fills]
    return cases


def fillna_case(x: Term, other: Term) -> Case:
    x_pd, o_pd = x.pd, other.pd
    pd_fn: PandasFn | None = None
    if x_pd is not None and o_pd is not None and x.label != "b":  # pandas: no fillna(False) on object

        def pd_fn(df: pd.DataFrame) -> Any:
            return x_pd(df).fillna(o_pd(df))

    return Case(
        f"{x!r}.fillna({other!r})",
        lambda s: x.lib(s).fillna(other.lib(s)),
        lambda r: other.py(r) if is_null(x.py(r)) else x.py(r),
        pd_fn,
    )


def selection_family() -> list[Case]:
    """where, isin, between."""

    def where(x: Any, cond: Any, other: Any) -> Any:
        return x if truthy(cond) else other

    cases = [
        Case(
            "j.where(j > 0)",
            lambda s: s["j"].where(s["j"] > 0),
            lambda r: where(r["j"], r["j"] > 0, None),
            lambda df: df["j"].where(df["j"] > 0),
        ),
        Case(
            "j.where(j > 0, 0)",
            lambda s: s["j"].where(s["j"] > 0, 0),
            lambda r: where(r["j"], r["j"] > 0, 0),
            lambda df: df["j"].where(df["j"] > 0, 0),
        ),
        Case(
            "f.where(b, i)",
            lambda s: s["f"].where(s["b"], s["i"]),
            lambda r: where(r.get("f"), r.get("b"), r.get("i")),
        ),
        Case(
            "t.where(t.str.len() > 4, 'short')",
            lambda s: s["t"].where(s["t"].str.len() > 4, "short"),
            lambda r: where(r["t"], len(r["t"]) > 4, "short"),
            lambda df: df["t"].where(df["t"].str.len() > 4, "short"),
        ),
        Case(
            "i.where(k, 'no')",
            lambda s: s["i"].where(s["k"], "no"),
            lambda r: where(r.get("i"), r["k"], "no"),
        ),
        Case(
            "g.where(s.notnull(), h)",
            lambda s: s["g"].where(s["s"].notnull(), s["h"]),
            lambda r: where(r["g"], not is_null(r.get("s")), r.get("h")),
        ),
    ]
    isins: list[tuple[str, list[Any], bool]] = [
        ("i", [1, 2, 3], True),
        ("i", [0, None], False),  # pandas: NaN is not in [None]; documented: null matches a null in values
        ("f", [0.0, 7.5, -2.25], True),
        ("s", ["apple", "an", ""], True),
        ("m", [1, "apple", None], False),
        ("m", [2.5, "", -1], True),
        ("j", [], True),
        ("k", [True], True),
        ("missing", [None], False),
        ("missing", [1], False),
    ]
    for name, values, pandas in isins:
        call = operator.methodcaller("isin", values)
        oracle = functools.partial(py_isin, values=values)
        cases.append(field_case(f"{name}.isin({values!r})", name, call, oracle, call if pandas else None, True))
    betweens: list[tuple[str, Any, Any, str, bool]] = [
        *(("j", -2, 3, inclusive, True) for inclusive in ("both", "neither", "left", "right")),
        ("f", -10, 7.5, "neither", True),
        ("h", -2.5, 2.5, "right", True),
        ("i", 0, 7, "left", True),
        ("s", "b", "m", "both", False),
        ("missing", 0, 1, "both", False),
    ]
    for name, lo, hi, inclusive, pandas in betweens:
        call = operator.methodcaller("between", lo, hi, inclusive=inclusive)
        oracle = functools.partial(py_between, left=lo, right=hi, inclusive=inclusive)
        label = f"{name}.between({lo!r}, {hi!r}, {inclusive!r})"
        cases.append(field_case(label, name, call, oracle, call if pandas else None, True))
    return cases


def _round(x: Any, decimals: int) -> Any:
    return None if is_null(x) else round(x, decimals)


def conversion_family() -> list[Case]:
    """round (half to even, on exact values) and astype."""
    cases = [
        Case(
            "h.round(0)", lambda s: s["h"].round(0), lambda r: _round(r.get("h"), 0), lambda df: df["h"].round(0)
        ),
        Case(
            "h.round(1)", lambda s: s["h"].round(1), lambda r: _round(r.get("h"), 1), lambda df: df["h"].round(1)
        ),
        Case("round(h)", lambda s: round(s["h"]), lambda r: _round(r.get("h"), 0), lambda df: df["h"].round()),
        Case(
            "round(h, 1)", lambda s: round(s["h"], 1), lambda r: _round(r.get("h"), 1), lambda df: df["h"].round(1)
        ),
        Case(
            "i.round(-1)",
            lambda s: s["i"].round(-1),
            lambda r: _round(r.get("i"), -1),
            lambda df: df["i"].round(-1),
        ),
        Case(
            "j.round(-1)",
            lambda s: s["j"].round(-1),
            lambda r: _round(r["j"], -1),
            lambda df: df["j"].round(-1),
        ),
    ]
    casts = [
        ("j", "float", True),
        ("j", "str", True),
        ("j", "bool", True),
        ("f", "int", False),
        ("f", "float", False),
        ("f", "bool", False),
        ("g", "int", True),
        ("g", "bool", True),
        ("h", "str", False),
        ("k", "int", True),
        ("k", "float", True),
        ("k", "str", True),
        ("t", "str", True),
        ("s", "bool", False),
        ("n", "int", False),
        ("n", "float", False),
        ("b", "int", False),
        ("missing", "int", False),
    ]
    for name, dtype, pandas in casts:
        call = operator.methodcaller("astype", dtype)
        oracle = functools.partial(py_cast, dtype)
        cases.append(field_case(f"{name}.astype({dtype})", name, call, oracle, call if pandas else None))
    return cases


def constants_family() -> list[Case]:
    lit = ks.lit
    return [
        Case("lit(2) + lit(3)", lambda s: lit(2) + lit(3), lambda r: 2 + 3),
        Case("lit(7) // lit(-2)", lambda s: lit(7) // lit(-2), lambda r: 7 // -2),
        Case("lit(-7) % lit(3)", lambda s: lit(-7) % lit(3), lambda r: -7 % 3),
        Case("lit(1) / lit(0)", lambda s: lit(1) / lit(0), lambda r: INF),
        Case("lit(2) ** lit(-1)", lambda s: lit(2) ** lit(-1), lambda r: 2**-1),
        Case("lit(None) > 1", lambda s: lit(None) > 1, lambda r: False, predicate=True),
        Case("lit(None) != 1", lambda s: lit(None) != 1, lambda r: True, predicate=True),
        Case("lit(None) + 1", lambda s: lit(None) + 1, lambda r: None),
        Case("lit('ab').str.upper()", lambda s: lit("ab").str.upper(), lambda r: "AB"),
        Case("lit(True)", lambda s: lit(True), lambda r: True, predicate=True),
        Case("lit(0)", lambda s: lit(0), lambda r: 0, predicate=True),
        Case("scalar 5", lambda s: 5, lambda r: 5),
        Case("scalar 'x'", lambda s: "x", lambda r: "x"),
        Case("scalar None", lambda s: None, lambda r: None),
        Case("j * 0 + 5", lambda s: s["j"] * 0 + 5, lambda r: r["j"] * 0 + 5, lambda df: df["j"] * 0 + 5),
        Case(
            "(j > 100) | True",
            lambda s: (s["j"] > 100) | True,
            lambda r: True,
            lambda df: (df["j"] > 100) | True,
            predicate=True,
        ),
        Case("lambda v: v['j'] * 2", lambda s: lambda v: v["j"] * 2, lambda r: r["j"] * 2),
    ]


ARITH_NAMES = {"+": "add", "-": "sub", "*": "mul", "/": "truediv", "//": "floordiv", "%": "mod", "**": "pow"}
COMPARE_NAMES = {"==": "eq", "!=": "ne", "<": "lt", "<=": "le", ">": "gt", ">=": "ge"}
FAMILIES: dict[str, Callable[[], list[Case]]] = {
    **{f"arith-{name}": functools.partial(arith_family, op) for op, name in ARITH_NAMES.items()},
    **{f"compare-{name}": functools.partial(compare_family, op) for op, name in COMPARE_NAMES.items()},
    "unary": unary_family,
    "logic": logic_family,
    "strings": string_family,
    "nulls": nulls_family,
    "where-isin-between": selection_family,
    "round-astype": conversion_family,
    "constants": constants_family,
}

# ---- running a topology -------------------------------------------------------------------------


@dataclass(frozen=True)
class Mode:
    name: str
    columnar: bool
    serde: Serde
    app: bool = False

    @property
    def json(self) -> bool:
        return not isinstance(self.serde, FunctionSerde)

    def __repr__(self) -> str:
        return self.name


MODES = [
    Mode("records-json", False, serde_from("json")),
    Mode("records-pickle", False, PICKLE),
    Mode("columnar-json", True, serde_from("json")),
    Mode("columnar-pickle", True, PICKLE),
    Mode("app-columnar-json", True, serde_from("json"), app=True),
]
KEYS = serde_from("json")
Outputs = dict[str, list[tuple[Any, Any]]]


def run(
    mode: Mode,
    records: list[dict[str, Any]],
    build: Callable[[KStream], dict[str, KStream]],
    tmp: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Outputs:
    """Runs ``build``'s streams (each written to the topic it is keyed by) over ``records``, keyed by
    their position; returns each output topic's (key, value) list."""
    b = ks.StreamsBuilder()
    s = b.stream("in", key_serde=KEYS, value_serde=mode.serde)
    ends = build(s)
    for topic, end in ends.items():
        end.to(topic, value_serde=mode.serde)  # a changed value goes out with the default serde otherwise
    topology = b.build()
    if mode.columnar:
        # every processor here has a batch path: a batch handed on record by record is a failure
        def no_unbatch(*args: Any) -> None:
            raise AssertionError(f"{mode}: a columnar batch fell back to records")

        monkeypatch.setattr(node_module.NodeContext, "_unbatch", no_unbatch)
    if mode.app:
        return _run_app(topology, records, list(ends), tmp)
    with ks.TopologyTestDriver(topology, {"state_dir": str(tmp / uuid.uuid4().hex)}) as driver:
        if mode.columnar:
            (task,) = driver.tasks
            n = len(records)
            batch = ColumnarBatch(
                list(range(n)), pd.DataFrame(records), np.arange(n, dtype=np.int64), KEYS, mode.serde
            )
            task.add(FetchedBatch("in", 0, 0, columnar=batch))
            task.process(1 << 30)
            task.flush()
        else:
            source = driver.create_input_topic("in", key_serde=KEYS, value_serde=mode.serde)
            for n, record in enumerate(records):
                source.pipe_input(n, record, timestamp=n)
        return {
            name: driver.create_output_topic(name, KEYS, mode.serde).read_key_values_to_list() for name in ends
        }


def _run_app(topology: ks.Topology, records: list[dict[str, Any]], outputs: list[str], tmp: Path) -> Outputs:
    url = f"memory://expr-oracle-{uuid.uuid4().hex}"
    frame = pd.DataFrame(records)
    frame.insert(0, "key", range(len(records)))
    try:
        ks.produce("in", frame, bootstrap_servers=url, timestamps=0)
        for name in outputs:  # the output topics exist even when a filter keeps nothing
            ks.produce(name, [], bootstrap_servers=url)
        app = ks.KafkaStreams(
            topology,
            application_id=f"expr-oracle-{uuid.uuid4().hex}",
            bootstrap_servers=url,
            state_dir=str(tmp / uuid.uuid4().hex),
            commit_interval_ms=50,
            poll_ms=20,
        )
        try:
            app.start()
            app.wait_until_running().wait_until_idle()
        finally:
            app.stop()
        return {
            name: [
                (key, value)
                for key, value in ks.read_topic(name, bootstrap_servers=url)[["key", "value"]].values.tolist()
            ]
            for name in outputs
        }
    finally:
        reset_cluster(url)


# ---- comparing ----------------------------------------------------------------------------------


def wire(mode: Mode, value: Any) -> Any:
    """A computed value as it arrives through the mode's serde: JSON has no NaN or infinity (null)."""
    if mode.json and isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def matches(got: Any, want: Any, exact_types: bool) -> bool:
    """``got`` is ``want``: nulls (None/NaN) alike; bools only as bools; numbers by value (floats to
    1e-12 relative), with the same type when ``exact_types``; anything else equal and of the same type."""
    got, want = (x.item() if isinstance(x, np.generic) else x for x in (got, want))
    if is_null(want) or is_null(got):
        return is_null(want) and is_null(got)
    if isinstance(want, bool) or isinstance(got, bool):
        return isinstance(want, bool) and isinstance(got, bool) and got == want
    if isinstance(want, (int, float)) and isinstance(got, (int, float)):
        if exact_types and type(got) is not type(want):
            return False
        if math.isinf(want) or math.isinf(got):
            return got == want
        return got == want or math.isclose(got, want, rel_tol=1e-12, abs_tol=1e-12)
    return type(got) is type(want) and got == want


def check_cases(mode: Mode, records: list[dict[str, Any]], cases: list[Case], outputs: Outputs) -> None:
    frame = pd.DataFrame(records)
    assigned = outputs["assigned"]
    assert [key for key, _ in assigned] == list(range(len(records))), f"{mode}: assign lost or moved records"
    errors: list[str] = []
    for n, case in enumerate(cases):
        column = f"out{n}"
        pandas = case.pandas(frame) if case.pandas is not None else None
        if isinstance(pandas, pd.Series):
            pandas = pandas.tolist()
        for row, (record, (_, value)) in enumerate(zip(records, assigned)):
            got = value.get(column, "<absent>")
            want = wire(mode, case.py(record))
            if not matches(got, want, exact_types=not mode.columnar):
                errors.append(f"{case.label}: row {row} {record}: got {got!r}, oracle {want!r}")
            if pandas is not None and not (case.pandas_skip and case.pandas_skip(record)):
                expected = pandas[row] if isinstance(pandas, list) else pandas
                if not matches(got, wire(mode, expected), exact_types=False):
                    errors.append(f"{case.label}: row {row} {record}: got {got!r}, pandas {expected!r}")
        if case.predicate:
            kept = [key for key, _ in outputs[f"kept{n}"]]
            want_kept = [row for row, record in enumerate(records) if truthy(case.py(record))]
            if kept != want_kept:
                errors.append(f"s[{case.label}] kept rows {kept}, oracle {want_kept}")
    assert not errors, f"{mode}: {len(errors)} mismatches:\n" + "\n".join(errors[:40])


def family_topology(cases: list[Case]) -> Callable[[KStream], dict[str, KStream]]:
    def build(s: KStream) -> dict[str, KStream]:
        ends = {"assigned": s.assign(**{f"out{n}": case.lib(s) for n, case in enumerate(cases)})}
        for n, case in enumerate(cases):
            if case.predicate:
                expr = case.lib(s)
                ends[f"kept{n}"] = s[expr if not isinstance(expr, bool) else ks.lit(expr)]
        return ends

    return build


@pytest.fixture(scope="module")
def state_dirs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the drivers and apps keep state (each run in a subdirectory of its own)."""
    return tmp_path_factory.mktemp("expr-oracle")


@pytest.fixture(params=MODES, ids=repr)
def mode(request: pytest.FixtureRequest) -> Mode:
    return request.param


@pytest.fixture(params=SEEDS, ids=lambda seed: f"seed{seed}")
def records(request: pytest.FixtureRequest) -> list[dict[str, Any]]:
    return make_records(request.param)


@pytest.mark.parametrize("family", list(FAMILIES))
def test_family_against_oracle(
    family: str, mode: Mode, records: list[dict[str, Any]], state_dirs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cases = FAMILIES[family]()
    outputs = run(mode, records, family_topology(cases), state_dirs, monkeypatch)
    check_cases(mode, records, cases, outputs)


# ---- DSL shapes: chained assign, replaced fields, filter then assign, projection -------------------


def test_assign_chains_replaces_and_filters(
    mode: Mode, records: list[dict[str, Any]], state_dirs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def build(s: KStream) -> dict[str, KStream]:
        chained = s.assign(a=s["j"] + 1, b=s["a"] * 2, j=s["j"] - s["a"], s=s["s"].str.upper())
        big = s[(s["i"] > 0) & (s["j"] != 0)].assign(q=s["i"] // s["j"], r=s["i"] % s["j"])
        return {"chained": chained, "big": big, "projected": s[["i", "s", "missing"]]}

    outputs = run(mode, records, build, state_dirs, monkeypatch)
    exact = not mode.columnar
    errors = []
    for (key, value), record in zip(outputs["chained"], records, strict=True):
        a = record["j"] + 1
        want = {"a": a, "b": a * 2, "j": record["j"] - a, "s": py_str("upper", record.get("s"))}
        for name, w in want.items():
            if not matches(value[name], w, exact):
                errors.append(f"chained {key} {record}: {name} = {value[name]!r}, oracle {w!r}")
        if not matches(value.get("i"), record.get("i"), exact):
            errors.append(f"chained {key} {record}: i changed to {value.get('i')!r}")
    kept = [row for row, r in enumerate(records) if truthy(py_compare(">", r.get("i"), 0)) and r["j"] != 0]
    assert [key for key, _ in outputs["big"]] == kept
    for key, value in outputs["big"]:
        i, j = records[key]["i"], records[key]["j"]
        if not (matches(value["q"], i // j, exact) and matches(value["r"], i % j, exact)):
            errors.append(f"big {key}: q, r = {value['q']!r}, {value['r']!r}, oracle {i // j}, {i % j}")
    for (key, value), record in zip(outputs["projected"], records, strict=True):
        if list(value) != ["i", "s", "missing"] or not all(
            matches(value[name], record.get(name), exact) for name in ("i", "s", "missing")
        ):
            errors.append(f"projected {key} {record}: {value}")
    assert not errors, f"{mode}:\n" + "\n".join(errors[:40])


# ---- edges the random records do not reach ------------------------------------------------------


@pytest.mark.parametrize("mode", MODES, ids=repr)
def test_division_edges(mode: Mode, state_dirs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Floor division and modulo floor (Python, numpy and pandas), not truncate (Java); by zero: IEEE."""
    records = [{"a": a, "b": b} for a in (-7, 7, -7.5, 7.5, 0, 1, -1) for b in (2, -2, 3, -3, 2.5, -2.5, 0, -0.0)]
    cases = [binary(op, c("a"), c("b")) for op in ("/", "//", "%")]
    outputs = run(mode, records, family_topology(cases), state_dirs, monkeypatch)
    check_cases(mode, records, cases, outputs)
    signs = {(r["a"], r["b"]): v["out1"] for (_, v), r in zip(outputs["assigned"], records, strict=True)}
    assert signs[(-7, 2)] == -4 and signs[(7, -2)] == -4  # Java's -7 / 2 == -3


def test_pow_overflow_is_inf_in_both_modes() -> None:
    """A float ``**`` that overflows is inf per record, as in a batch (numpy) and pandas; it raised
    OverflowError in the record path (Python's float pow) and so failed the task."""
    records = [{"g": 10.0}, {"g": -10.0}, {"g": 0.5}]
    lib = [ks.col("g") ** 400, ks.col("g") ** 401, ks.col("g") ** ks.lit(400.0)]
    frame = pd.DataFrame(records)
    for expr, power in zip(lib, (400, 401, 400.0), strict=True):
        want = [py_pow(r["g"], power) for r in records]
        assert want[0] == INF
        assert [expr.eval_record(r) for r in records] == want
        assert expr.eval_batch(frame).tolist() == want == (frame["g"] ** power).tolist()


def test_oracle_sanity() -> None:
    """The oracle itself on hand-checked values (a wrong oracle would pass a wrong library)."""
    assert py_arith("-", 5, 3) == 2 and py_arith("+", 5, None) is None and py_arith("*", NAN, 2) is None
    assert py_arith("//", -7, 2) == -4 and py_arith("%", -7, 2) == 1 and py_arith("%", 7, -2) == -1
    assert py_arith("/", 1, 0) == INF and py_arith("/", -1, 0) == -INF and py_arith("/", 1, -0.0) == -INF
    assert math.isnan(py_arith("/", 0, 0)) and math.isnan(py_arith("%", 3, 0))
    assert py_arith("**", 0, -1) == INF and math.isnan(py_arith("**", -8.0, 0.5)) and py_arith("**", 2, -2) == 0.25
    assert py_compare("<", 1, 1) is False and py_compare("<=", 1, 1) is True and py_compare("!=", None, 1)
    assert py_compare("==", None, None) is False and py_compare(">", NAN, 0) is False
    assert py_logic("|", None, NAN) is False and py_logic("^", "", 1) is True and truthy(0.0) is False
    assert py_str("len", 3) is None and py_str("contains", None, "a") is False and py_str("strip", " a ") == "a"
    assert py_isin(None, [1, None]) and not py_isin(NAN, [1]) and py_between(5, 5, 6, "right") is False
    assert _round(2.5, 0) == 2.0 and _round(-0.75, 1) == -0.8 and _round(25, -1) == 20
    records = make_records(SEEDS[0])
    assert records == make_records(SEEDS[0]) and len(records) == len(EDGE_RECORDS) + N_RANDOM
    for name in ("i", "f", "s"):
        assert any(name not in r for r in records) and any(is_null(r.get(name)) for r in records)
    assert all(isinstance(r["j"], int) for r in records) and any(r["j"] == 0 for r in records)
