"""Seeded random topologies the compiled backtest path translates, with their inputs (issue 26, item 3).

``generate(seed, n)`` yields ``n`` cases over JSON dict values with fields ``n`` (int), ``x`` (float), ``s``
(string) and ``b`` (bool), some missing or null, some tombstones and null keys, timestamps out of order
with late records. Each case is a source stream, column-expression filters/``assign``/projections, then
one or more branches: a sink, a ``select_key`` by a column and a sink, or ``group_by_key``/``group_by`` by a
column, ``count``/``agg`` (optionally tumbling or hopping windows with grace, emitting on update or on
close, or ``suppress(until_window_closes())``), ``to_stream`` and a sink. Every expression keeps one type
per field (the compiled path refuses a field mixing ints and floats), so every case compiles.

Each partition of an output or repartition topic has one writer task, so its order is the same live and
in a backtest whatever the live threads do: a case that re-keys reads one input partition; a case of two
partitions keeps its keys (its output topics have two partitions too) and sends null keys only into an
aggregation (which drops them), never to a sink (their round robin is per producer live, per task here).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import kstream_nb as ks
from kstream_nb.processor.expressions.tree import Expr

__all__ = ["Case", "generate"]

USERS = ["ann", "bob", "cid", "dee", "Éva", "fay"]
WORDS = ["ann", "Bob", " cid ", "dee", "Éva", "", "x y"]
#: the fields of the input values and their kinds
FIELDS = {"n": "int", "x": "float", "s": "str", "b": "bool"}


@dataclass
class Branch:
    """One path after the case's common steps: its own steps, then a sink or an aggregation and a sink."""

    steps: list[tuple[str, Any]]
    rekey: Expr | None = None  # select_key by this expression before the sink (no aggregation)
    group: Expr | str | None = None  # "key": group_by_key; an expression: group_by it; None: a plain sink
    windows: tuple[int, int, int] | None = None  # size, advance, grace (ms)
    emit_close: bool = False
    string_keys: bool = False  # group_by_key(key_serde="string"): windowed keys go out in Kafka's binary form
    suppress: bool = False
    specs: dict[str, tuple[str, str]] | None = None  # None: count()
    topic: str = ""
    store: str = ""


@dataclass
class Case:
    """A generated topology piece (``build`` adds it to a builder) and its input records."""

    name: str
    partitions: int
    steps: list[tuple[str, Any]]
    branches: list[Branch]
    records: list[ks.Record] = field(default_factory=list)

    @property
    def source(self) -> str:
        return f"{self.name}-in"

    @property
    def subtopologies(self) -> int:
        """How many sub-topologies the case makes: its source's, and one after each group_by by a column."""
        return 1 + sum(1 for b in self.branches if b.group is not None and not isinstance(b.group, str))

    def outputs(self) -> dict[str, int]:
        """Output topic -> its partition count (one writer task per partition)."""
        rekeys = self.partitions == 1
        return {b.topic: 2 if rekeys else self.partitions for b in self.branches}

    def build(self, builder: ks.StreamsBuilder, topic: Callable[[str], str]) -> None:
        s = builder.stream(topic(self.source))
        s = _apply(s, self.steps)
        for branch in self.branches:
            out = _apply(s, branch.steps)
            if branch.group is None:
                if branch.rekey is not None:
                    out = out.select_key(branch.rekey)
                out.to(topic(branch.topic))
                continue
            if isinstance(branch.group, str):
                grouped = out.group_by_key(key_serde="string" if branch.string_keys else None)
            else:
                grouped = out.group_by(branch.group)
            if branch.windows is not None:
                size, advance, grace = branch.windows
                windowed = grouped.windowed_by(ks.TimeWindows.of(size).advance_by(advance).grace(grace))
                if branch.emit_close:
                    windowed = windowed.emit_strategy("on_window_close")
                grouped = windowed
            table = grouped.count(store=branch.store) if branch.specs is None else grouped.agg(
                store=branch.store, **branch.specs
            )  # fmt: skip
            if branch.suppress:
                table = table.suppress(ks.until_window_closes(), name=f"{branch.store}-final")
            table.to_stream().to(topic(branch.topic))

    def describe(self) -> str:
        """The case as code a human can rerun, and its input records."""
        lines = [f"# case {self.name}: {self.partitions} input partition(s)", f"s = b.stream({self.source!r})"]
        lines += [f"s = {_show('s', self.steps)}"] if self.steps else []
        for i, br in enumerate(self.branches):
            code = _show("s", br.steps)
            if br.group is None:
                code += f".select_key({br.rekey!r})" if br.rekey is not None else ""
            else:
                if isinstance(br.group, str):
                    code += '.group_by_key(key_serde="string")' if br.string_keys else ".group_by_key()"
                else:
                    code += f".group_by({br.group!r})"
                if br.windows is not None:
                    size, advance, grace = br.windows
                    code += f".windowed_by(TimeWindows.of({size}).advance_by({advance}).grace({grace}))"
                    code += '.emit_strategy("on_window_close")' if br.emit_close else ""
                code += (
                    f".count(store={br.store!r})"
                    if br.specs is None
                    else f".agg(store={br.store!r}, **{br.specs})"
                )
                code += ".suppress(until_window_closes())" if br.suppress else ""
                code += ".to_stream()"
            lines.append(f"{code}.to({br.topic!r})  # branch {i}")
        lines.append("records = [")
        lines += [f"    Record({r.key!r}, {r.value!r}, {r.timestamp})," for r in self.records]
        return "\n".join([*lines, "]"])


def _apply(s: Any, steps: list[tuple[str, Any]]) -> Any:
    for kind, arg in steps:
        s = s[arg] if kind in ("filter", "project") else s.assign(**arg)
    return s


def _show(name: str, steps: list[tuple[str, Any]]) -> str:
    for kind, arg in steps:
        if kind == "filter":
            name += f"[{arg!r}]"
        elif kind == "project":
            name += f"[{list(arg)!r}]"
        else:
            name += ".assign(" + ", ".join(f"{k}={v!r}" for k, v in arg.items()) + ")"
    return name


class _Exprs:
    """Random expressions of one kind over the fields visible at a step (their kinds in ``fields``)."""

    def __init__(self, rng: random.Random, fields: dict[str, str]) -> None:
        self.rng = rng
        self.fields = fields

    def _col(self, kind: str) -> Expr | None:
        names = sorted(n for n, k in self.fields.items() if k == kind)
        return ks.col(self.rng.choice(names)) if names else None

    def of(self, kind: str, depth: int = 0) -> Expr:
        rng, c = self.rng, self._col(kind)
        if kind == "bool":
            return self.condition(depth)
        if kind == "int":
            s = self._col("str")
            forms: list[Callable[[], Expr]] = [lambda: ks.lit(rng.randint(-3, 9))]
            if c is not None:
                k = rng.randint(1, 5)
                forms += [
                    lambda: c, lambda: c + k, lambda: c * k, lambda: c // k, lambda: c % k, lambda: -c,
                    lambda: abs(c - k), lambda: c.fillna(k), lambda: c + self.of("int", depth + 1),
                ]  # fmt: skip
            if s is not None:
                forms.append(lambda: s.str.len())
            return rng.choice(forms)()
        if kind == "float":
            n = self._col("int")
            forms = [lambda: ks.lit(rng.randint(0, 8) / 4)]
            if c is not None:
                forms += [lambda: c, lambda: c * 1.5, lambda: c - 2.25, lambda: c / 4, lambda: c.fillna(0.5)]
                if n is not None:
                    forms += [lambda: c + n, lambda: c * n]
            if n is not None:
                forms += [lambda: n / 2, lambda: n * 0.25]
            return rng.choice(forms)()
        forms = [lambda: ks.lit(rng.choice(["k", "Z"]))]
        if c is not None:
            forms += [lambda: c, lambda: c.str.upper(), lambda: c.str.lower(), lambda: c.fillna("none")]
        return rng.choice(forms)()

    def condition(self, depth: int = 0) -> Expr:
        rng = self.rng
        if not self.fields:
            return ks.lit(True)
        name = rng.choice(sorted(self.fields))
        kind = self.fields[name]
        c = ks.col(name)
        forms: list[Callable[[], Expr]] = [lambda: c.notnull(), lambda: c.isnull()]
        if kind == "int":
            forms += [lambda: c > rng.randint(0, 9), lambda: c <= rng.randint(0, 9), lambda: c % 2 == 0,
                      lambda: c.isin([1, 3, 5, None]), lambda: c.between(2, 6), lambda: c != 4]  # fmt: skip
        elif kind == "float":
            forms += [lambda: c >= rng.randint(0, 10), lambda: c < rng.randint(0, 40) / 4, lambda: c * 2 > 7]
        elif kind == "str":
            forms += [lambda: c == rng.choice(WORDS), lambda: c.isin(rng.sample(WORDS, 3))]
            forms += [lambda: c.str.startswith("d"), lambda: c.str.contains("a"), lambda: c.str.len() > 2]
        elif kind == "bool":
            forms += [lambda: c, lambda: ~c]
        if depth < 1:
            forms += [lambda: self.condition(depth + 1) & self.condition(depth + 1),
                      lambda: self.condition(depth + 1) | self.condition(depth + 1)]  # fmt: skip
        return rng.choice(forms)()


def _steps(rng: random.Random, fields: dict[str, str], assigned: set[str], tombstones: bool, prefix: str) -> list:
    """0-3 stateless steps; updates ``fields`` (name -> kind) and ``assigned`` as they change the values."""
    out: list[tuple[str, Any]] = []
    for i in range(rng.choice([0, 0, 1, 2, 3])):
        kind = rng.choice(["filter", "filter", "assign", "assign", "project"])
        if kind == "filter":
            # a filter reading an assigned field is wrong on null values in the compiled path (the lead fixes it)
            readable = {n: k for n, k in fields.items() if not (tombstones and n in assigned)}
            out.append(("filter", _Exprs(rng, readable).condition()))
        elif kind == "assign":
            columns: dict[str, Expr] = {}
            for j in range(rng.randint(1, 2)):
                target = rng.choice([f"{prefix}{i}{j}", *sorted(set(fields) - set(columns))])
                what = fields.get(target) or rng.choice(["int", "float", "str", "bool"])
                columns[target] = _Exprs(rng, fields).of(what)
                fields[target] = what  # each assignment sees the ones before it
                assigned.add(target)
            out.append(("assign", columns))
        elif len(fields) > 1:
            names = rng.sample(sorted(fields), rng.randint(1, len(fields)))
            for gone in set(fields) - set(names):
                del fields[gone]
            out.append(("project", tuple(names)))
    return out


_FUNCTIONS = {
    "int": ["sum", "count", "min", "max", "mean", "first", "last"],
    "float": ["sum", "count", "min", "max", "mean", "first", "last"],
    "str": ["count", "min", "max", "first", "last"],
    "bool": ["count", "first", "last"],
}


def _branch(rng: random.Random, case: str, i: int, fields: dict[str, str], assigned: set[str],
            tombstones: bool, rekeys: bool, keyed_aggregate: bool, alone: bool) -> Branch:  # fmt: skip
    fields = dict(fields)
    steps = _steps(rng, fields, assigned, tombstones, f"b{i}_")
    branch = Branch(steps, topic=f"{case}-out{i}", store=f"{case}-store{i}")
    kind = rng.choice(["sink", "aggregate", "aggregate", "aggregate"])
    if kind == "sink":
        if rekeys and rng.random() < 0.5:
            branch.rekey = rng.choice(_keys(rng, fields))
        return branch
    branch.group = rng.choice(_keys(rng, fields)) if rekeys and (keyed_aggregate or rng.random() < 0.6) else "key"
    if rng.random() < 0.7:
        size = rng.choice([4_000, 10_000])
        advance = rng.choice([size, size, size // 2])
        branch.windows = (size, advance, rng.choice([0, 1_000, 3_000]))
        # windowed keys written as JSON go to the partition of the whole key's bytes: several tasks would
        # write one partition; with a key serde the sink partitions by the key inside, as the task's input
        branch.string_keys = isinstance(branch.group, str) and (not rekeys or rng.random() < 0.5)
        # a suppress needs its aggregation alone in its sub-topology: after group_by_key, alone in the case
        suppressible = alone or not isinstance(branch.group, str)
        branch.emit_close = rng.random() < 0.3
        branch.suppress = not branch.emit_close and suppressible and rng.random() < 0.6
    if fields and rng.random() < 0.7:
        names = sorted(fields)
        specs: dict[str, tuple[str, str]] = {}
        for j in range(rng.randint(1, 3)):
            name = rng.choice(names)
            specs[f"r{j}"] = (name, rng.choice(_FUNCTIONS[fields[name]]))
        branch.specs = specs
        if branch.windows is not None and tombstones:
            # a windowed named aggregation fails on a null value (live too): a filter first drops them (a null
            # value reads as all fields null), on a field no assign set (see ``_steps``)
            original = sorted(n for n in fields if n not in assigned)
            if original:
                steps.append(("filter", ks.col(rng.choice(original)).notnull()))
            else:
                branch.specs = None
    return branch


def _keys(rng: random.Random, fields: dict[str, str]) -> list[Expr]:
    """New keys of one type per case: a string field (as is, upper-cased, with a default) or an int one % 3."""
    out: list[Expr] = []
    for name, kind in sorted(fields.items()):
        if kind == "str":
            out += [ks.col(name), ks.col(name).str.upper().fillna("none")]
        elif kind == "int":
            out.append(ks.col(name) % 3)
    return out or [ks.lit("k")]


def _value(rng: random.Random) -> dict[str, Any]:
    value: dict[str, Any] = {
        "n": rng.randint(0, 9), "x": rng.randint(0, 40) / 4, "s": rng.choice(WORDS), "b": rng.random() < 0.5,
    }  # fmt: skip
    for name in list(value):
        roll = rng.random()
        if roll < 0.08:
            del value[name]
        elif roll < 0.16:
            value[name] = None
    return value


def _records(rng: random.Random, count: int, null_keys: bool, tombstones: bool) -> list[ks.Record]:
    """Timestamps rising ~600 ms a record, some jumping back up to 9 s (late past a small grace)."""
    out = []
    for i in range(count):
        key = None if null_keys and rng.random() < 0.08 else rng.choice(USERS)
        value = None if tombstones and rng.random() < 0.08 else _value(rng)
        back = rng.randint(0, 9_000) if rng.random() < 0.2 else rng.randint(0, 500)
        out.append(ks.Record(key, value, max(1, 1_000 + i * 600 - back)))
    return out


def generate(seed: int, n: int) -> Iterator[Case]:
    """``n`` random cases (named ``g{seed}c{i}``), each with tens of input records, all from ``seed``."""
    rng = random.Random(seed)
    for i in range(n):
        name = f"g{seed}c{i}"
        partitions = rng.choice([1, 2])
        rekeys = partitions == 1
        tombstones = rng.random() < 0.6
        fields, assigned = dict(FIELDS), set[str]()
        steps = _steps(rng, fields, assigned, tombstones, "a")
        count = rng.choice([1, 1, 2, 3])
        branches: list[Branch] = []
        for j in range(count):
            # one aggregation after group_by_key per sub-topology: the others group by a column
            keyed = any(isinstance(b.group, str) for b in branches)
            if keyed and not rekeys:
                branches.append(Branch(_steps(rng, dict(fields), set(assigned), tombstones, f"b{j}_"),
                                       topic=f"{name}-out{j}"))  # fmt: skip
                continue
            branches.append(_branch(rng, name, j, fields, set(assigned), tombstones, rekeys, keyed, count == 1))
        sinks = any(b.group is None for b in branches)
        case = Case(name, partitions, steps, branches)
        case.records = _records(rng, rng.randint(25, 60), null_keys=rekeys or not sinks, tombstones=tombstones)
        for branch in branches:
            _counts_unset_sums(case, branch)
        yield case


def _counts_unset_sums(case: Case, branch: Branch) -> None:
    """KNOWN LIMITATION (reported): after a group_by by a column, a sum or mean of a field no record reaching
    the repartition sets (all filtered out, or null) is refused by the compiled path (``values.value_schema``
    reads a never-set field as string, ``aggregate`` sums numbers only), though live it is 0 or None. Such a
    sum or mean becomes a count, found by running the case's steps over its records (the runtime's
    expressions)."""
    if branch.specs is None or isinstance(branch.group, str) or branch.group is None:
        return
    reached = []
    for record in case.records:
        value = record.value
        for kind, arg in [*case.steps, *branch.steps]:
            if value is None:
                break
            if kind == "filter":
                value = value if arg.eval_record(value) is True else None
            elif kind == "assign":
                for name, expr in arg.items():
                    value = {**value, name: expr.eval_record(value)}
            else:
                value = {name: value.get(name) for name in arg}
        if value is not None and branch.group.eval_record(value) is not None:
            reached.append(value)
    for name, (column, fn) in branch.specs.items():
        if fn in ("sum", "mean") and all(v.get(column) is None for v in reached):
            branch.specs[name] = (column, "count")
