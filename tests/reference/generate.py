"""Random valid reference-diff cases (tests/reference/SPEC.md's grammar), deterministic per seed.

``generate(seed, n)`` yields ``n`` cases built type-correctly: value types (string/long) are tracked node by
node and only vocabulary functions reading the current type are used; windowed streams get
``windowKeyToString`` before a ``to``; grouped streams/tables are aggregated at once. Every case is checked
with ``schema.validate`` before it is yielded.

    python -m tests.reference.generate --seed 1 --cases 10 > cases.jsonl
"""

from __future__ import annotations

import argparse
import random
import sys
from collections.abc import Iterator
from typing import Any

import orjson

from tests.reference.schema import analyse, validate

KEYS = ["a", "b", "c", "ab"]
STRING_VALUES = ["a1", "b-2", "", "c", "a-", "-x", "ab", "b1-2-3", "x-y", "A", "bb"]

PREDICATES = {
    "any": ["key_not_null", "value_not_null", "key_is_a"],
    "string": ["value_len_even"],
    "long": ["value_even"],
}
VALUE_MAPPERS = {
    "string": ["upper", "append_x", "length", "to_string"],
    "long": ["append_x", "to_string", "plus_one"],
}
VALUE_MAPPER_RETURNS = {"upper": "string", "append_x": "string", "length": "long", "to_string": "string",
                        "plus_one": "long"}  # fmt: skip
KEY_SELECTORS = ["key_upper", "value_as_key", "constant_key"]
JOINERS = ["join_plus", "join_pipe"]


class _Case:
    """One case under construction: nodes, what each is, which nodes nothing reads yet."""

    def __init__(self, r: random.Random, case_id: str) -> None:
        self.r = r
        self.id = case_id
        self.nodes: list[dict[str, Any]] = []
        self.kind: dict[str, str] = {}  # stream, table, global (grouped ones never stay open)
        self.vt: dict[str, str] = {}
        self.windowed: dict[str, bool] = {}
        self.sources: dict[str, frozenset[str]] = {}
        self.open: list[str] = []  # stream/table nodes nothing reads yet
        self.count = 0

    # ---- nodes -------------------------------------------------------------------------------

    def new_id(self) -> str:
        self.count += 1
        return f"n{self.count}"

    def add(self, node: dict[str, Any], kind: str | None, vt: str | None = None, windowed: bool = False,
            reads: tuple[str, ...] = ()) -> str:  # fmt: skip
        self.nodes.append(node)
        for ref in reads:
            if ref in self.open:
                self.open.remove(ref)
        nid = str(node["id"])
        if kind is not None:
            assert vt is not None
            self.kind[nid], self.vt[nid], self.windowed[nid] = kind, vt, windowed
            self.sources[nid] = frozenset().union(*(self.sources[x] for x in reads)) if reads else frozenset([nid])
            if kind != "global":
                self.open.append(nid)
        return nid

    def source(self, op: str, vt: str | None = None) -> str:
        nid = self.new_id()
        vt = vt or self.r.choice(["string", "string", "long"])
        node: dict[str, Any] = {"id": nid, "op": op, "topic": f"in-{nid}", "key_type": "string", "value_type": vt}
        if op != "stream" and self.r.random() < 0.2:
            node["store"] = {"name": f"store-{nid}"}
        return self.add(node, {"stream": "stream", "table": "table", "globalTable": "global"}[op], vt)

    def unary(self, op: str, src: str, kind: str | None = None, vt: str | None = None,
              windowed: bool | None = None, **fields: Any) -> str:  # fmt: skip
        nid = self.new_id()
        node = {"id": nid, "op": op, "from": src, **fields}
        kind = kind or self.kind[src]
        vt = vt or self.vt[src]
        return self.add(node, kind, vt, self.windowed[src] if windowed is None else windowed, reads=(src,))

    def store(self, p: float) -> dict[str, Any]:
        return {"store": {"name": f"store-{self.count + 1}"}} if self.r.random() < p else {}

    # ---- op families -------------------------------------------------------------------------

    def predicate(self, vt: str) -> str:
        return self.r.choice(PREDICATES["any"] + PREDICATES[vt])

    def filter(self, src: str) -> str:
        op = self.r.choice(["filter", "filterNot"])
        return self.unary(op, src, predicate=self.predicate(self.vt[src]))

    def map_values(self, src: str) -> str:
        mapper = self.r.choice(VALUE_MAPPERS[self.vt[src]])
        return self.unary("mapValues", src, vt=VALUE_MAPPER_RETURNS[mapper], mapper=mapper)

    def stream_op(self, src: str) -> str:
        """One stateless or stateful step from a plain-keyed stream."""
        r, vt = self.r, self.vt[src]
        family = r.choices(
            ["filter", "mapValues", "flatMapValues", "flatMap", "map", "selectKey", "repartition", "through",
             "merge", "split", "aggregate", "windowed", "toTable", "ssjoin", "stjoin", "gjoin", "process"],
            [8, 8, 4, 3, 4, 4, 2, 2, 3, 3, 12, 12, 4, 8, 6, 4, 3],
        )[0]  # fmt: skip
        if family == "filter":
            return self.filter(src)
        if family == "mapValues":
            return self.map_values(src)
        if family == "flatMapValues":
            mapper = r.choice(["dup", "split_dash"] if vt == "string" else ["dup"])
            return self.unary("flatMapValues", src, mapper=mapper)
        if family == "flatMap":
            return self.unary("flatMap", src, mapper="explode")
        if family == "map":
            mapper = r.choice(["swap", "key_first_char"])
            return self.unary("map", src, vt="string" if mapper == "swap" else vt, mapper=mapper)
        if family == "selectKey":
            return self.unary("selectKey", src, mapper=r.choice(KEY_SELECTORS))
        if family == "repartition":
            return self.unary("repartition", src)
        if family == "through":
            nid = self.unary("through", src)
            self.nodes[-1]["topic"] = f"through-{nid}"
            return nid
        if family == "merge":
            return self.merge(src)
        if family == "split":
            return self.split(src)
        if family == "aggregate":
            return self.aggregate(self.group_stream(src), None)
        if family == "windowed":
            grouped = self.group_stream(src)
            return self.aggregate(*self.windowed_by(grouped))
        if family == "toTable":
            return self.unary("toTable", src, kind="table")
        if family == "ssjoin":
            return self.stream_stream_join(src)
        if family == "stjoin":
            return self.stream_table_join(src)
        if family == "gjoin":
            right = self.source("globalTable")
            op = r.choice(["join", "leftJoin"])
            return self.join_node(op, src, right, "stream", key_selector=r.choice(["gk_value", "gk_key"]))
        return self.unary("process", src, vt="long", processor="running_count")

    def merge(self, src: str) -> str:
        vt = self.vt[src]
        others = [n for n in self.open if n != src and self.kind[n] == "stream" and not self.windowed[n]
                  and self.vt[n] == vt]  # fmt: skip
        other = self.r.choice(others) if others and self.r.random() < 0.5 else self.source("stream", vt)
        nid = self.new_id()
        return self.add({"id": nid, "op": "merge", "inputs": [src, other]}, "stream", vt, reads=(src, other))

    def split(self, src: str) -> str:
        nid = self.new_id()
        branches = []
        for _ in range(self.r.randint(1, 3)):
            branches.append({"id": self.new_id(), "predicate": self.predicate(self.vt[src])})
        self.add({"id": nid, "op": "split", "from": src, "branches": branches, "default_branch": None}, None,
                 reads=(src,))  # fmt: skip
        for branch in branches:
            bid = branch["id"]
            self.kind[bid], self.vt[bid], self.windowed[bid] = "stream", self.vt[src], False
            self.sources[bid] = self.sources[src]
            self.open.append(bid)
        return str(self.r.choice(branches)["id"])

    def group_stream(self, src: str) -> str:
        if self.r.random() < 0.65:
            return self.unary("groupByKey", src, kind="grouped_stream")
        return self.unary("groupBy", src, kind="grouped_stream", selector=self.r.choice(KEY_SELECTORS))

    def windowed_by(self, grouped: str) -> tuple[str, str]:
        r = self.r
        kind = r.choice(["tumbling", "hopping", "sliding", "session"])
        grace = r.choice([0, 0, 5, 10, 30])
        if kind == "tumbling":
            spec = {"size_ms": r.choice([5, 10, 20, 50]), "grace_ms": grace}
        elif kind == "hopping":
            size = r.choice([10, 20, 30])
            spec = {
                "size_ms": size,
                "advance_ms": r.choice([d for d in (2, 5, 10, 15) if d < size]),
                "grace_ms": grace,
            }
        elif kind == "sliding":
            spec = {"time_difference_ms": r.choice([3, 5, 10, 20]), "grace_ms": grace}
        else:
            spec = {"inactivity_gap_ms": r.choice([2, 5, 10]), "grace_ms": grace}
        fields: dict[str, Any] = {kind: spec}
        if r.random() < 0.3:
            fields["emit_strategy"] = "on_window_close"
        elif r.random() < 0.2:
            fields["emit_strategy"] = "on_window_update"
        return self.unary("windowedBy", grouped, kind="windowed_grouped", **fields), kind

    def aggregate(self, grouped: str, window_kind: str | None) -> str:
        """count / reduce / aggregate of a grouped stream (windowed when ``window_kind``)."""
        r, vt = self.r, self.vt[grouped]
        op = r.choice(["count", "reduce", "aggregate"])
        windowed = window_kind is not None
        store = self.store(0.4)
        if op == "count":
            return self.unary("count", grouped, kind="table", vt="long", windowed=windowed, **store)
        if op == "reduce":
            reducer = "concat_plus" if vt == "string" else "sum"
            return self.unary("reduce", grouped, kind="table", windowed=windowed, reducer=reducer, **store)
        if r.random() < 0.5:
            fields: dict[str, Any] = {"initializer": "init_zero", "aggregator": "agg_plus"}
            result = "string"
        else:
            fields, result = {"initializer": "init_long_zero", "aggregator": "agg_count"}, "long"
        if window_kind == "session":
            fields["session_merger"] = "merge_plus" if result == "string" else "merge_sum"
        return self.unary("aggregate", grouped, kind="table", vt=result, windowed=windowed, **fields, **store)

    def stream_stream_join(self, src: str) -> str:
        r = self.r
        candidates = [n for n in self.open if self.kind[n] == "stream" and not self.windowed[n]]
        if r.random() < 0.1:
            right = src
        elif candidates and r.random() < 0.3:
            right = r.choice(candidates)
        else:
            right = self.source("stream")
        windows = {"before_ms": r.choice([0, 2, 5, 10, 20]), "after_ms": r.choice([0, 2, 5, 10, 20]),
                   "grace_ms": r.choice([0, 0, 5, 20])}  # fmt: skip
        op = r.choice(["join", "leftJoin", "outerJoin"])
        return self.join_node(op, src, right, "stream", windows=windows)

    def stream_table_join(self, src: str) -> str:
        tables = [n for n in self.open if self.kind[n] == "table" and not self.windowed[n]]
        right = self.r.choice(tables) if tables and self.r.random() < 0.3 else self.source("table")
        return self.join_node(self.r.choice(["join", "leftJoin"]), src, right, "stream")

    def join_node(self, op: str, left: str, right: str, kind: str, **fields: Any) -> str:
        nid = self.new_id()
        node = {"id": nid, "op": op, "left": left, "right": right, "joiner": self.r.choice(JOINERS), **fields}
        return self.add(node, kind, "string", reads=(left, right))

    def table_op(self, src: str) -> str:
        r, vt = self.r, self.vt[src]
        family = r.choices(["filter", "mapValues", "toStream", "groupBy", "ttjoin", "fkjoin", "suppress"],
                           [5, 5, 6, 10, 6, 4 if vt == "string" else 0, 3])[0]  # fmt: skip
        if family == "filter":
            return self.filter(src)
        if family == "mapValues":
            return self.map_values(src)
        if family == "toStream":
            return self.unary("toStream", src, kind="stream")
        if family == "groupBy":
            mapper = r.choice(["regroup_first_char", "regroup_by_value"])
            grouped = self.unary("groupBy", src, kind="grouped_table", vt="string" if mapper == "regroup_by_value"
                                 else vt, mapper=mapper)  # fmt: skip
            return self.table_aggregate(grouped)
        if family == "ttjoin":
            tables = [n for n in self.open if self.kind[n] == "table" and not self.windowed[n]
                      and not self.sources[n] & self.sources[src]]  # fmt: skip
            right = r.choice(tables) if tables and r.random() < 0.3 else self.source("table")
            return self.join_node(r.choice(["join", "leftJoin", "outerJoin"]), src, right, "table")
        if family == "fkjoin":
            right = self.source("table")
            nid = self.join_node(
                r.choice(["fkJoin", "fkLeftJoin"]), src, right, "table", extractor="fk_first_char"
            )
            if r.random() < 0.3:
                self.nodes[-1]["store"] = {"name": f"store-{nid}"}
            return nid
        return self.suppress(src, "time_limit")

    def table_aggregate(self, grouped: str) -> str:
        r, vt = self.r, self.vt[grouped]
        op = r.choice(["count", "reduce", "aggregate"])
        store = self.store(0.4)
        if op == "count":
            return self.unary("count", grouped, kind="table", vt="long", **store)
        if op == "reduce":
            adder, subtractor = ("concat_plus", "concat_minus") if vt == "string" else ("sum", "diff")
            return self.unary("reduce", grouped, kind="table", adder=adder, subtractor=subtractor, **store)
        if r.random() < 0.5:
            fields: dict[str, Any] = {
                "initializer": "init_zero",
                "aggregator": "agg_plus",
                "subtractor": "agg_minus",
            }
            result = "string"
        else:
            fields = {"initializer": "init_long_zero", "aggregator": "agg_count", "subtractor": "agg_uncount"}
            result = "long"
        return self.unary("aggregate", grouped, kind="table", vt=result, **fields, **store)

    def suppress(self, src: str, until: str) -> str:
        r = self.r
        fields: dict[str, Any] = {"until": until}
        if until == "time_limit":
            fields["time_limit_ms"] = r.choice([0, 1, 5, 10, 30])
            roll = r.random()
            if roll < 0.5:
                fields["buffer"] = {"unbounded": True}
            elif roll < 0.95:
                fields["buffer"] = {"max_records": r.randint(1, 3), "on_full": "emit_early"}
            else:
                fields["buffer"] = {"max_records": r.randint(2, 4), "on_full": "shut_down"}
        else:
            fields["buffer"] = (
                {"unbounded": True}
                if r.random() < 0.9
                else {"max_records": r.randint(2, 5), "on_full": "shut_down"}
            )
        return self.unary("suppress", src, **fields)

    def windowed_table_op(self, src: str) -> str:
        # no mapValues: its table would have no value serde in Kafka Streams, which suppress needs
        family = self.r.choices(["suppress", "toStream", "filter"], [6, 6, 1])[0]
        if family == "suppress":
            return self.suppress(src, self.r.choice(["window_closes", "window_closes", "time_limit"]))
        if family == "toStream":
            return self.unary("toStream", src, kind="stream")
        return self.filter(src)

    def windowed_stream_op(self, src: str) -> str:
        family = self.r.choices(["windowKeyToString", "filter", "mapValues"], [5, 2, 2])[0]
        if family == "windowKeyToString":
            return self.unary("windowKeyToString", src, windowed=False)
        return self.filter(src) if family == "filter" else self.map_values(src)

    def step(self, src: str) -> str:
        if self.kind[src] == "stream":
            return self.windowed_stream_op(src) if self.windowed[src] else self.stream_op(src)
        return self.windowed_table_op(src) if self.windowed[src] else self.table_op(src)

    # ---- outputs and inputs ------------------------------------------------------------------

    def output(self, src: str) -> None:
        """A ``to`` or ``capture`` for an open stream (tables: toStream first)."""
        if self.kind[src] == "table":
            src = self.unary("toStream", src, kind="stream")
        if self.windowed[src] and self.r.random() < 0.5:
            src = self.unary("windowKeyToString", src, windowed=False)
        nid = self.new_id()
        if self.windowed[src] or self.r.random() < 0.4:
            self.add({"id": nid, "op": "capture", "from": src}, None, reads=(src,))
        else:
            self.add({"id": nid, "op": "to", "from": src, "topic": f"out-{nid}"}, None, reads=(src,))

    def inputs(self) -> list[dict[str, Any]]:
        r = self.r
        sources = [n for n in self.nodes if n["op"] in ("stream", "table", "globalTable")]
        # no "" on a foreign-key join's right table: Kafka Streams reads it back as no right row, kstream_nb joins
        # it (a deliberate difference: README.md, "Windows and joins")
        by_id = {n["id"]: n for n in self.nodes}
        fk_right = {by_id[n["right"]].get("topic") for n in self.nodes if n["op"] in ("fkJoin", "fkLeftJoin")}
        records: list[dict[str, Any]] = []
        ts = r.randint(0, 20)
        for _ in range(r.randint(1, 30)):
            if records and r.random() < 0.08:
                records.append(dict(r.choice(records)))
                continue
            roll = r.random()
            if roll < 0.6:
                ts += r.randint(0, 8)
            elif roll < 0.8:
                ts = max(0, ts - r.randint(1, 15))
            elif roll < 0.9:
                ts += r.randint(20, 60)
            source = r.choice(sources)
            table = source["op"] != "stream"
            key = None if r.random() < (0.06 if table else 0.1) else r.choice(KEYS + [""] * (r.random() < 0.05))
            if r.random() < (0.2 if table else 0.08):
                value: Any = None
            elif source["value_type"] == "long":
                value = r.randint(-3, 20)
            else:
                value = r.choice(STRING_VALUES)
                if value == "" and source["topic"] in fk_right:
                    value = r.choice([v for v in STRING_VALUES if v])
            records.append({"topic": source["topic"], "key": key, "value": value, "timestamp_ms": ts})
        return records


def generate_case(r: random.Random, case_id: str) -> dict[str, Any]:
    c = _Case(r, case_id)
    first = c.source(r.choices(["stream", "table"], [7, 3])[0])
    cursor = first
    for _ in range(r.randint(1, 8)):
        if not c.open:
            break
        if cursor not in c.open or r.random() < 0.25:
            cursor = r.choice(c.open)
        cursor = c.step(cursor)
    for nid in [n for n in c.kind if c.kind[n] == "stream" and n not in c.open and r.random() < 0.1]:
        if not c.windowed[nid]:
            c.add({"id": c.new_id(), "op": "capture", "from": nid}, None)
    for nid in list(c.open):
        c.output(nid)
    records = c.inputs()
    steps = []
    while records:
        cut = r.randint(1, len(records)) if r.random() < 0.3 else len(records)
        steps.append({"input": records[:cut]})
        records = records[cut:]
    case = {"id": case_id, "config": {"cache": r.random() < 0.5}, "topology": c.nodes, "steps": steps}
    name_table_stores(case, r)
    validate(case)
    return case


#: table ops that take a Materialized (a named store) in Kafka Streams
MATERIALIZABLE = (
    "filter",
    "filterNot",
    "mapValues",
    "toTable",
    "join",
    "leftJoin",
    "outerJoin",
    "fkJoin",
    "fkLeftJoin",
)


def name_table_stores(case: dict[str, Any], r: random.Random) -> None:
    """Names the stores of some plain table ops, and of every table a ``suppress`` or foreign-key join reads
    that would otherwise have no value serde in Kafka Streams (the Java runner states serdes only through a
    node's Materialized: a mapValues or join result without one has none, a filter inherits its input's)."""
    info = analyse(case)
    nodes = {n["id"]: n for n in case["topology"]}
    for n in case["topology"]:
        i = info.get(n["id"])
        plain_table = i is not None and i.kind == "table" and not i.windowed
        if plain_table and n["op"] in MATERIALIZABLE and "store" not in n and r.random() < 0.1:
            n["store"] = {"name": f"store-{n['id']}"}
    while True:
        serde: dict[str, bool] = {}
        missing = None
        for n in case["topology"]:
            op, nid = n["op"], n["id"]
            if op in ("suppress", "fkJoin", "fkLeftJoin"):
                for ref in [n["from"]] if op == "suppress" else [n["left"], n["right"]]:
                    if not serde.get(ref, True):
                        missing = missing or ref
            if info[nid].kind != "table" if nid in info else True:
                continue
            if op in ("filter", "filterNot", "suppress"):
                serde[nid] = "store" in n or serde.get(n["from"], True)
            elif op in ("mapValues", "join", "leftJoin", "outerJoin", "fkJoin", "fkLeftJoin"):
                serde[nid] = "store" in n
            else:
                serde[nid] = True
        if missing is None:
            return
        node = nodes[missing]
        if node["op"] not in MATERIALIZABLE or info[missing].windowed:
            raise AssertionError(f"{case['id']}: {missing} ({node['op']}) has no value serde and takes no store")
        node["store"] = {"name": f"store-{missing}"}


def generate(seed: int, n: int) -> Iterator[dict[str, Any]]:
    """``n`` random valid cases, the same ones for the same seed."""
    r = random.Random(seed)
    for i in range(n):
        yield generate_case(random.Random(r.getrandbits(64)), f"gen-{seed}-{i}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--cases", type=int, default=10)
    args = parser.parse_args()
    for case in generate(args.seed, args.cases):
        sys.stdout.buffer.write(orjson.dumps(case) + b"\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
