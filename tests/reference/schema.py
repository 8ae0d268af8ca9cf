"""What each node of a case is (stream, table, grouped, windowed...) and its value type, from SPEC.md's rules.

``analyse(case)`` is shared by the Python runner (serdes, store kinds), the generator and the shrinker (a
shrunk case must stay valid). ``strict=True`` also demands what generated cases promise: every function a
vocabulary name of the right kind reading the right type, and every value type known.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tests.reference import vocabulary as vocab

STREAM, TABLE, GROUPED_STREAM, GROUPED_TABLE, WINDOWED_GROUPED, GLOBAL, TERMINAL = (
    "stream", "table", "grouped_stream", "grouped_table", "windowed_grouped", "global", "terminal",
)  # fmt: skip
WINDOW_KINDS = ("tumbling", "hopping", "sliding", "session")
VALUE_TYPES = ("string", "long")


class CaseError(ValueError):
    """The case is not valid under SPEC.md's grammar."""


@dataclass
class NodeInfo:
    kind: str
    value_type: str | None
    windowed: bool = False  # keys are Windowed (a windowed aggregation's table and what follows it)
    window: dict[str, Any] | None = None  # {"tumbling": {...}} etc. for windowed grouped streams/tables
    sources: frozenset[str] = field(default_factory=frozenset)  # ids of the source nodes it reads from
    store_kind: str | None = None  # "kv", "window", "session" when the node names a store
    key_type: str = "string"  # of the plain key (inside Windowed for windowed nodes)

    @property
    def window_kind(self) -> str | None:
        return None if self.window is None else next(iter(self.window))


def window_of(node: dict[str, Any]) -> dict[str, Any] | None:
    for kind in WINDOW_KINDS:
        if kind in node:
            return {kind: node[kind]}
    return None


def window_end(window: dict[str, Any], start: int) -> int:
    """The end a window store reports for a window starting at ``start`` (time and sliding windows)."""
    kind, spec = next(iter(window.items()))
    if kind == "sliding":
        return start + int(spec["time_difference_ms"])
    return start + int(spec["size_ms"])


class _Analyser:
    def __init__(self, case: dict[str, Any], strict: bool) -> None:
        self.strict = strict
        self.info: dict[str, NodeInfo] = {}
        self.topics: set[str] = set()
        self.stores: set[str] = set()
        self.consumed: set[str] = set()
        for node in case.get("topology") or []:
            self._node(node)

    def fail(self, node: dict[str, Any], message: str) -> CaseError:
        return CaseError(f"node {node.get('id')!r} ({node.get('op')}): {message}")

    def get(self, node: dict[str, Any], ref: Any, *kinds: str) -> NodeInfo:
        if not isinstance(ref, str) or ref not in self.info:
            raise self.fail(node, f"reads unknown node {ref!r}")
        info = self.info[ref]
        if kinds and info.kind not in kinds:
            raise self.fail(node, f"{ref!r} is a {info.kind}, expected {' or '.join(kinds)}")
        self.consumed.add(ref)
        return info

    def function(self, node: dict[str, Any], fld: str, kind: str | tuple[str, ...], reads: str | None) -> Any:
        """The vocabulary entry of a function field (checking kind and input type), None for a lambda."""
        text = node.get(fld)
        if not isinstance(text, str):
            raise self.fail(node, f"missing function {fld!r}")
        kinds = (kind,) if isinstance(kind, str) else kind
        entry = vocab.lookup(text, kinds)
        if entry is None:
            if self.strict:
                raise self.fail(node, f"{fld} {text!r} is not a vocabulary name")
            return None
        if entry.kind not in kinds:
            raise self.fail(node, f"{fld} {entry.name!r} is a {entry.kind}, expected {' or '.join(kinds)}")
        if self.strict and entry.reads != "any" and entry.reads != reads:
            raise self.fail(node, f"{fld} {entry.name!r} reads {entry.reads} values, got {reads}")
        return entry

    def returns(self, entry: Any, current: str | None) -> str | None:
        if entry is None:
            return None
        if entry.kind in vocab.VALUE_KEEPING_KINDS or entry.returns == "same":
            return current
        return str(entry.returns)

    def store(self, node: dict[str, Any]) -> str | None:
        name = (node.get("store") or {}).get("name")
        if name is None:
            return None
        if name in self.stores:
            raise self.fail(node, f"store name {name!r} used twice")
        self.stores.add(name)
        return str(name)

    def source_topic(self, node: dict[str, Any]) -> None:
        topic = node.get("topic")
        if not isinstance(topic, str) or topic in self.topics:
            raise self.fail(node, f"topic {topic!r} missing or used by another source/sink")
        self.topics.add(topic)

    def _node(self, node: dict[str, Any]) -> None:
        nid = node.get("id")
        if not isinstance(nid, str) or nid in self.info:
            raise self.fail(node, "missing or duplicate id")
        info = self._infer(node)
        info.key_type = self._key_type(node, info)
        explicit = node.get("value_type")
        if explicit is not None and info.kind not in (TERMINAL,):
            if info.value_type is not None and explicit != info.value_type and self.strict:
                raise self.fail(node, f"value_type {explicit} but the op gives {info.value_type}")
            info.value_type = explicit
        if self.strict and info.kind != TERMINAL and info.value_type not in VALUE_TYPES:
            raise self.fail(node, f"value type {info.value_type!r} is not string or long")
        self.info[nid] = info

    def _infer(self, node: dict[str, Any]) -> NodeInfo:
        op = node.get("op")
        if op in ("stream", "table", "globalTable"):
            self.source_topic(node)
            if node.get("key_type", "string") != "string" and self.strict:
                raise self.fail(node, "keys must be strings")
            kind = {"stream": STREAM, "table": TABLE, "globalTable": GLOBAL}[op]
            info = NodeInfo(kind, node.get("value_type"), sources=frozenset([node["id"]]))
            if op != "stream" and self.store(node):
                info.store_kind = "kv"
            return info
        if op == "merge":
            inputs = node.get("inputs") or []
            if len(inputs) < 2 or len(set(inputs)) != len(inputs):
                raise self.fail(node, "merge needs two or more distinct inputs")
            infos = [self.get(node, i, STREAM) for i in inputs]
            types = {i.value_type for i in infos}
            if len(types) != 1 or any(i.windowed for i in infos):
                raise self.fail(node, "merged streams must have one value type and plain keys")
            return NodeInfo(STREAM, types.pop(), sources=frozenset().union(*(i.sources for i in infos)))
        if op in ("join", "leftJoin", "outerJoin", "fkJoin", "fkLeftJoin"):
            return self._join(node, op)
        src = self.get(node, node.get("from"))
        vt = src.value_type
        same = NodeInfo(src.kind, vt, src.windowed, src.window, src.sources)
        if op in ("filter", "filterNot"):
            self._expect(node, src, STREAM, TABLE)
            self.function(node, "predicate", "predicate", vt)
            return self._table_store(node, same)
        if op == "mapValues":
            self._expect(node, src, STREAM, TABLE)
            entry = self.function(node, "mapper", "value_mapper", vt)
            info = NodeInfo(src.kind, self.returns(entry, vt), src.windowed, src.window, src.sources)
            return self._table_store(node, info)
        if op in ("flatMapValues", "flatMap", "map", "selectKey", "repartition", "through", "toTable",
                  "groupByKey", "process", "split"):  # fmt: skip
            self._expect(node, src, STREAM)
            if src.windowed:
                raise self.fail(node, "needs plain keys (use windowKeyToString first)")
        if op == "flatMapValues":
            return NodeInfo(STREAM, self.returns(self.function(node, "mapper", "flat_value_mapper", vt), vt),
                            sources=src.sources)  # fmt: skip
        if op == "flatMap":
            return NodeInfo(STREAM, self.returns(self.function(node, "mapper", "flat_key_value_mapper", vt), vt),
                            sources=src.sources)  # fmt: skip
        if op == "map":
            return NodeInfo(STREAM, self.returns(self.function(node, "mapper", "key_value_mapper", vt), vt),
                            sources=src.sources)  # fmt: skip
        if op == "selectKey":
            self.function(node, "mapper", ("key_selector", "global_key_selector"), vt)
            return same
        if op in ("repartition", "through"):
            if op == "through":
                self.source_topic(node)
            return same
        if op == "windowKeyToString":
            self._expect(node, src, STREAM)
            if not src.windowed:
                raise self.fail(node, "needs a windowed stream")
            return NodeInfo(STREAM, vt, sources=src.sources)
        if op == "split":
            branches = node.get("branches") or []
            if not branches:
                raise self.fail(node, "split needs branches")
            for branch in branches:
                self.function(branch, "predicate", "predicate", vt)
                if branch.get("id") in self.info or not isinstance(branch.get("id"), str):
                    raise self.fail(node, f"branch id {branch.get('id')!r} missing or used twice")
                self.info[branch["id"]] = NodeInfo(STREAM, vt, sources=src.sources, key_type=src.key_type)
            if node.get("default_branch") and self.strict:
                raise self.fail(node, "default_branch must be null")
            return NodeInfo(TERMINAL, None)
        if op == "toStream":
            self._expect(node, src, TABLE)
            return NodeInfo(STREAM, vt, src.windowed, src.window, src.sources)
        if op == "toTable":
            return self._table_store(node, NodeInfo(TABLE, vt, sources=src.sources))
        if op == "groupByKey":
            return NodeInfo(GROUPED_STREAM, vt, sources=src.sources)
        if op == "groupBy":
            self._expect(node, src, STREAM, TABLE)
            if src.windowed:
                raise self.fail(node, "cannot group windowed keys")
            if src.kind == STREAM:
                kinds = ("key_selector", "global_key_selector")
                self.function(node, "selector" if "selector" in node else "mapper", kinds, vt)
                return NodeInfo(GROUPED_STREAM, vt, sources=src.sources)
            entry = self.function(node, "mapper", ("table_group_mapper", "key_value_mapper"), vt)
            return NodeInfo(GROUPED_TABLE, self.returns(entry, vt), sources=src.sources)
        if op == "windowedBy":
            self._expect(node, src, GROUPED_STREAM)
            window = window_of(node)
            if window is None:
                raise self.fail(node, "no window")
            if node.get("emit_strategy") not in (None, "on_window_update", "on_window_close"):
                raise self.fail(node, f"emit_strategy {node.get('emit_strategy')!r}")
            return NodeInfo(WINDOWED_GROUPED, vt, window=window, sources=src.sources)
        if op in ("count", "reduce", "aggregate"):
            return self._aggregate(node, op, src)
        if op == "suppress":
            self._expect(node, src, TABLE)
            if node.get("until") == "window_closes" and not src.windowed:
                raise self.fail(node, "until window_closes needs a windowed table")
            if node.get("until") not in ("window_closes", "time_limit"):
                raise self.fail(node, f"until {node.get('until')!r}")
            return same
        if op == "process":
            if node.get("processor") != "running_count":
                raise self.fail(node, f"unknown processor {node.get('processor')!r}")
            return NodeInfo(STREAM, "long", sources=src.sources)
        if op == "capture":
            self._expect(node, src, STREAM, TABLE)
            return NodeInfo(TERMINAL, None)
        if op == "to":
            self._expect(node, src, STREAM, TABLE)
            if src.windowed and self.strict:
                raise self.fail(node, "needs plain keys (use windowKeyToString first)")
            self.source_topic(node)
            return NodeInfo(TERMINAL, None)
        raise self.fail(node, "unknown op")

    def _table_store(self, node: dict[str, Any], info: NodeInfo) -> NodeInfo:
        """A table op that names its store (materialized: key-value, or window/session for windowed keys)."""
        if node.get("store") is None:
            return info
        if info.kind != TABLE or (info.windowed and self.strict):
            raise self.fail(node, "only plain tables name a store here")
        if self.store(node):
            info.store_kind = "kv"
        return info

    def _key_type(self, node: dict[str, Any], info: NodeInfo) -> str:
        """The node's key type (Java's runner: sources declare it, key-changing vocabulary functions give
        ``string`` or keep it)."""
        op = node.get("op")
        if op in ("stream", "table", "globalTable"):
            return str(node.get("key_type") or "string")
        if op == "merge":
            return self.info[node["inputs"][0]].key_type
        if "left" in node:
            return self.info[node["left"]].key_type
        if op not in ("windowKeyToString", "map", "flatMap", "selectKey", "groupBy") or "from" not in node:
            return self.info[node["from"]].key_type if node.get("from") in self.info else info.key_type
        current = self.info[node["from"]].key_type
        if op == "windowKeyToString":
            return "string"
        text = node.get("selector") or node.get("mapper") or node.get("key_selector")
        entry = vocab.lookup(text) if isinstance(text, str) else None
        if entry is None:
            return current
        returned = vocab.key_returns(entry.name)
        return current if returned == "same" else returned

    def _expect(self, node: dict[str, Any], info: NodeInfo, *kinds: str) -> None:
        if info.kind not in kinds:
            raise self.fail(node, f"reads a {info.kind}, expected {' or '.join(kinds)}")

    def _aggregate(self, node: dict[str, Any], op: str, src: NodeInfo) -> NodeInfo:
        self._expect(node, src, GROUPED_STREAM, GROUPED_TABLE, WINDOWED_GROUPED)
        vt = src.value_type
        table = src.kind == GROUPED_TABLE
        session = src.window_kind == "session"
        if op == "count":
            result: str | None = "long"
        elif op == "reduce":
            if table:
                self.function(node, "adder", "reducer", vt)
                self.function(node, "subtractor", "reducer", vt)
            else:
                self.function(node, "reducer", "reducer", vt)
            result = vt
        else:
            init = self.function(node, "initializer", "initializer", None)
            result = None if init is None else init.returns
            for fld in ("aggregator", "subtractor") if table else ("aggregator",):
                entry = self.function(node, fld, "aggregator", vt)
                if entry is not None and result is not None and entry.returns != result and self.strict:
                    raise self.fail(node, f"{fld} {entry.name} gives {entry.returns}, initializer {result}")
            if session:
                entry = self.function(node, "session_merger", "session_merger", result)
            elif "session_merger" in node and self.strict:
                raise self.fail(node, "session_merger outside session windows")
        info = NodeInfo(TABLE, result, src.kind == WINDOWED_GROUPED, src.window, src.sources)
        if self.store(node):
            info.store_kind = "kv" if src.window is None else ("session" if session else "window")
        return info

    def _join(self, node: dict[str, Any], op: str) -> NodeInfo:
        left = self.get(node, node.get("left"), STREAM, TABLE)
        right = self.get(node, node.get("right"), STREAM, TABLE, GLOBAL)
        if left.windowed or right.windowed:
            raise self.fail(node, "joins need plain keys")
        joiner = self.function(node, "joiner", "joiner", None)
        result = None if joiner is None else joiner.returns
        sources = left.sources | right.sources
        if op in ("fkJoin", "fkLeftJoin"):
            if left.kind != TABLE or right.kind != TABLE:
                raise self.fail(node, "foreign-key joins join two tables")
            self.function(node, "extractor", "fk_extractor", left.value_type)
            info = NodeInfo(TABLE, result, sources=sources)
            if self.store(node):
                info.store_kind = "kv"
            return info
        if node.get("left") == node.get("right") and left.kind != STREAM:
            raise self.fail(node, "a table cannot be joined with itself")
        if left.kind == STREAM and right.kind == STREAM:
            if "windows" not in node:
                raise self.fail(node, "stream-stream joins need windows")
            return NodeInfo(STREAM, result, sources=sources)
        if "windows" in node:
            raise self.fail(node, "windows only for stream-stream joins")
        if op == "outerJoin" and (left.kind, right.kind) != (TABLE, TABLE):
            raise self.fail(node, "outer joins are stream-stream or table-table")
        if left.kind == STREAM and right.kind == GLOBAL:
            self.function(node, "key_selector", "global_key_selector", left.value_type)
            return NodeInfo(STREAM, result, sources=sources)
        if right.kind == GLOBAL:
            raise self.fail(node, "only streams join global tables")
        if left.kind == STREAM:
            return NodeInfo(STREAM, result, sources=sources)
        if right.kind != TABLE:
            raise self.fail(node, "a table joins tables only")
        if self.strict and left.sources & right.sources:
            raise self.fail(node, "tables of one source are not joined")
        return self._table_store(node, NodeInfo(TABLE, result, sources=sources))


def analyse(case: dict[str, Any], strict: bool = False) -> dict[str, NodeInfo]:
    """Node id -> NodeInfo (split branches included); raises CaseError when the case breaks the grammar."""
    return _Analyser(case, strict).info


def validate(case: dict[str, Any]) -> None:
    """Raises CaseError unless ``case`` is a valid generated-style case (strict grammar, an output node,
    inputs on its topics, every grouped node aggregated)."""
    analyser = _Analyser(case, strict=True)
    inputs = {n["topic"] for n in case["topology"] if n["op"] in ("stream", "table", "globalTable")}
    outputs = [n for n in case["topology"] if n["op"] in ("to", "capture")]
    if not outputs:
        raise CaseError("no to/capture node")
    for step in case.get("steps") or []:
        for record in step.get("input") or []:
            if record.get("topic") not in inputs:
                raise CaseError(f"input on topic {record.get('topic')!r}, which no source reads")
    for nid, info in analyser.info.items():
        if info.kind in (GROUPED_STREAM, GROUPED_TABLE, WINDOWED_GROUPED) and nid not in analyser.consumed:
            raise CaseError(f"grouped node {nid!r} has no aggregation")
