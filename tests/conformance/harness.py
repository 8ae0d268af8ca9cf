"""Runs a Kafka Streams conformance case (format: tests/conformance/cases/FORMAT.md) on the test driver.

``CaseGraph`` also reads the reference-diff additions of tests/reference/SPEC.md (more ops, vocabulary
names as functions); with ``typed=True`` it gives every source, sink, repartition and grouping Kafka's
String/Long serdes by the value types SPEC.md infers (tests/reference/schema.py).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Any, Protocol

import kstream_nb as ks
from kstream_nb.cluster.serde_specs import serde_from
from kstream_nb.processor.suppress import BufferConfig, until_time_limit, until_window_closes
from kstream_nb.processor.windows import JoinWindows, SessionWindows, SlidingWindows, TimeWindows, Windowed
from kstream_nb.state.builders import Stores
from tests.reference import vocabulary
from tests.reference.schema import NodeInfo, analyse

s = vocabulary.s

#: a case's type name -> kstream_nb serde name (Kafka's serializers)
SERDES = {"string": "string", "long": "long", "int": "integer", "integer": "integer", "double": "double"}


def fn(source: str) -> Any:
    """The function of a function field: a vocabulary name or Python lambda source."""
    return vocabulary.function(source)


class Capture(ks.Processor):
    """Records every record reaching it, like Kafka's MockApiProcessor."""

    def __init__(self, sink: list[ks.Record]) -> None:
        self.sink = sink

    def process(self, record: ks.Record) -> None:
        self.sink.append(record)


def _windows(node: dict[str, Any]) -> Any:
    if "tumbling" in node:
        w = node["tumbling"]
        return TimeWindows.of(w["size_ms"]).grace(w.get("grace_ms", 0))
    if "hopping" in node:
        w = node["hopping"]
        return TimeWindows.of(w["size_ms"]).advance_by(w["advance_ms"]).grace(w.get("grace_ms", 0))
    if "sliding" in node:
        w = node["sliding"]
        return SlidingWindows.of(w["time_difference_ms"]).grace(w.get("grace_ms", 0))
    w = node["session"]
    return SessionWindows.with_gap(w["inactivity_gap_ms"]).grace(w.get("grace_ms", 0))


class RunningCount(ks.Processor):
    """SPEC.md's ``running_count``: per non-null key a count kept in ``store``, forwarded as the value."""

    def __init__(self, store: str) -> None:
        self.store_name = store

    def init(self, context: ks.ProcessorContext) -> None:
        super().init(context)
        self.store: Any = context.get_state_store(self.store_name)

    def process(self, record: ks.Record) -> None:
        if record.key is None:
            self.context.forward(record.with_value(None))
            return
        count = (self.store.get(record.key) or 0) + 1
        self.store.put(record.key, count)
        self.context.forward(record.with_value(count))


#: a sink serde for windowed keys (kstream_nb has none): only for ``to`` nodes of windowed streams, whose
#: records are reported as they reach the sink, as the Java runner does
WINDOWED_KEYS = ks.Serde.of(lambda w: repr((w.key, w.start, w.end)).encode(), lambda data: data)


def window_key_to_string(key: Windowed, value: Any) -> tuple[str, Any]:
    """SPEC.md's ``windowKeyToString``: ``key@start/end``."""
    return f"{key.key}@{key.start}/{key.end}", value


class CaseGraph:
    """A case's topology added to ``builder``; topic and store names pass through ``rename`` (to share a builder),
    its sources use ``timestamp_extractor`` if given (else the app's default); ``typed``: Kafka's serdes
    for the value types SPEC.md infers (keys are strings)."""

    def __init__(
        self,
        case: dict[str, Any],
        builder: ks.StreamsBuilder,
        rename: Callable[[str], str] = lambda name: name,
        timestamp_extractor: Any = None,
        typed: bool = False,
    ) -> None:
        self.case = case
        self.rename = rename
        self.timestamp_extractor = timestamp_extractor
        self.typed = typed
        self.info: dict[str, NodeInfo] = analyse(case) if typed else {}
        self.captured: dict[str, list[ks.Record]] = defaultdict(list)
        self.objects: dict[str, Any] = {}
        self.stores: dict[str, str] = {}
        self.builder = builder
        for node in case["topology"]:
            built = self._build(builder, node)
            if typed and isinstance(built, (ks.KStream, ks.KTable)):
                self._type(built, self.info[node["id"]])
            self.objects[node["id"]] = built

    def input_topics(self) -> dict[str, str]:
        """The case's input topic -> its (renamed) topic in the builder."""
        return {
            n["topic"]: self.rename(n["topic"])
            for n in self.case["topology"]
            if n["op"] in ("stream", "table", "globalTable")
        }

    def output_topics(self) -> list[str]:
        """The (renamed) topics the case's ``to`` nodes write to."""
        return [self.rename(n["topic"]) for n in self.case["topology"] if n["op"] == "to"]

    def serde(self, type_name: str | None) -> Any:
        """The serde of a value type in typed mode (None: the app's default)."""
        if not self.typed or type_name is None:
            return None
        return serde_from(SERDES[type_name])

    def key_serde(self, node_id: str) -> Any:
        """The serde of a node's (plain) keys in typed mode."""
        return self.serde(self.info[node_id].key_type) if self.typed else None

    def value_serde(self, node_id: str) -> Any:
        return self.serde(self.info[node_id].value_type) if self.typed else None

    def _type(self, built: Any, info: NodeInfo) -> None:
        """Kafka's serdes on a stream/table, as the Java runner states them on every operation."""
        if not info.windowed:
            built.key_serde = self.serde(info.key_type)
        if info.value_type is not None:
            built.value_serde = self.serde(info.value_type)

    def _capture(self, stream: ks.KStream, node_id: str) -> None:
        sink = self.captured[node_id]
        stream.process(lambda: Capture(sink))

    def _build(self, b: ks.StreamsBuilder, node: dict[str, Any]) -> Any:
        op = node["op"]
        nid = node["id"]
        src: Any = self.objects.get(node.get("from", ""))
        if op in ("stream", "table", "globalTable"):
            return self._source(b, node)
        if op == "toStream":
            return src.to_stream()
        if op == "toTable":
            return src.to_table(**self._named_store(node))
        if op in ("filter", "filterNot", "mapValues"):
            method = {"filter": src.filter, "filterNot": src.filter_not, "mapValues": src.map_values}[op]
            function = fn(node["predicate" if op != "mapValues" else "mapper"])
            return method(function, **self._named_store(node)) if isinstance(src, ks.KTable) else method(function)
        if op == "flatMapValues":
            return src.flat_map_values(fn(node["mapper"]))
        if op == "flatMap":
            return src.flat_map(fn(node["mapper"]))
        if op == "selectKey":
            return src.select_key(fn(node["mapper"]))
        if op == "map":
            return src.map(fn(node["mapper"]))
        if op == "windowKeyToString":
            return src.map(window_key_to_string)
        if op == "merge":
            first, *rest = (self.objects[i] for i in node["inputs"])
            for other in rest:
                first = first.merge(other)
            return first
        if op == "split":
            split = src.split()
            for branch in node["branches"]:
                split = split.branch(fn(branch["predicate"]), name=branch["id"])
            default = node.get("default_branch")
            branches = split.default_branch(default) if default else split.no_default_branch()
            for branch in node["branches"]:
                self.objects[branch["id"]] = branches[branch["id"]]
                if self.typed:
                    self._type(branches[branch["id"]], self.info[branch["id"]])
            if default:
                self.objects[default] = branches[default]
            return None
        if op == "repartition":
            return src.repartition(key_serde=self.key_serde(nid), value_serde=self.value_serde(nid))
        if op == "through":
            return src.through(self.rename(node["topic"]), self.key_serde(nid), self.value_serde(nid))
        if op == "groupByKey":
            return src.group_by_key(self.key_serde(nid), self.value_serde(nid))
        if op == "groupBy":
            selector = fn(node.get("selector") or node["mapper"])
            return src.group_by(selector, self.key_serde(nid), self.value_serde(nid))
        if op == "windowedBy":
            windowed = src.windowed_by(_windows(node))
            if node.get("emit_strategy"):
                windowed.emit_strategy(node["emit_strategy"])
            return windowed
        if op in ("count", "reduce", "aggregate"):
            return self._aggregate(src, node)
        if op == "suppress":
            if node["until"] == "window_closes":
                return src.suppress(until_window_closes(_buffer(node["buffer"])))
            return src.suppress(until_time_limit(node["time_limit_ms"], _buffer(node["buffer"])))
        if op in ("join", "leftJoin", "outerJoin"):
            return self._join(node)
        if op in ("fkJoin", "fkLeftJoin"):
            left, right = self.objects[node["left"]], self.objects[node["right"]]
            method = left.join if op == "fkJoin" else left.left_join
            store = self._store(node)
            if store:
                self.stores[nid] = store
            return method(right, fn(node["joiner"]), store=store, foreign_key_extractor=fn(node["extractor"]))
        if op == "process":
            name = self.rename(f"running-count-{nid}")
            store = Stores.key_value_store_builder(
                Stores.in_memory_key_value_store(name), self.key_serde(nid), self.serde("long")
            )
            return src.process(lambda: RunningCount(name), stores=[store])
        if op in ("capture", "to") and isinstance(src, ks.KTable):
            src = src.to_stream()
        if op == "capture":
            self._capture(src, nid)
            return None
        if op == "to":
            windowed = self.typed and self.info[node["from"]].windowed
            key_serde = WINDOWED_KEYS if windowed else self.key_serde(node["from"])
            src.to(self.rename(node["topic"]), key_serde, self.value_serde(node["from"]))
            if windowed or not self.typed:  # typed (reference) cases read a plain `to` from its topic, as Java
                self._capture(src, nid)
            return None
        raise ValueError(f"unknown op {op!r}")

    def _source(self, b: ks.StreamsBuilder, node: dict[str, Any]) -> Any:
        topic = self.rename(node["topic"])
        key_serde, value_serde = self.serde(node.get("key_type")), self.serde(node.get("value_type"))
        if node["op"] == "stream":
            return b.stream(topic, key_serde, value_serde, timestamp_extractor=self.timestamp_extractor)
        if node["op"] == "globalTable":
            store = self._store(node)
            if store:
                self.stores[node["id"]] = store
            return b.global_table(topic, key_serde, value_serde, store=store)
        materialized = self._named_store(node).get("store")
        return b.table(
            topic, key_serde, value_serde, timestamp_extractor=self.timestamp_extractor, store=materialized
        )

    def _aggregate(self, src: Any, node: dict[str, Any]) -> Any:
        store = self._store(node)
        if store:
            self.stores[node["id"]] = store
        op = node["op"]
        serde = self.value_serde(node["id"])
        if op == "count":
            return src.count(store=store)
        if op == "reduce":
            if "subtractor" in node:
                return src.reduce(fn(node["adder"]), fn(node["subtractor"]), store=store)
            if isinstance(src, ks.KGroupedStream):
                return src.reduce(fn(node["reducer"]), store=store, value_serde=serde)
            return src.reduce(fn(node["reducer"]), store=store)
        if "subtractor" in node:
            return src.aggregate(
                fn(node["initializer"]), fn(node["aggregator"]), fn(node["subtractor"]), store=store,
                value_serde=serde,
            )  # fmt: skip
        if "session_merger" in node:
            return src.aggregate(
                fn(node["initializer"]), fn(node["aggregator"]), fn(node["session_merger"]), store=store,
                value_serde=serde,
            )  # fmt: skip
        return src.aggregate(fn(node["initializer"]), fn(node["aggregator"]), store=store, value_serde=serde)

    def _join(self, node: dict[str, Any]) -> Any:
        left, right = self.objects[node["left"]], self.objects[node["right"]]
        method = {"join": "join", "leftJoin": "left_join", "outerJoin": "outer_join"}[node["op"]]
        joiner = fn(node["joiner"])
        if "windows" in node:
            w = node["windows"]
            windows = JoinWindows(
                w["before_ms"], w["after_ms"], w.get("grace_ms", 0), w.get("legacy_eager_non_joined", False)
            )
            return getattr(left, method)(right, joiner, windows)
        if isinstance(right, ks.GlobalKTable):
            return getattr(left, method)(right, joiner, key_selector=fn(node["key_selector"]))
        if "grace_ms" in node:
            return getattr(left, method)(right, joiner, grace=node["grace_ms"])
        if isinstance(left, ks.KTable):
            return getattr(left, method)(right, joiner, **self._named_store(node))
        return getattr(left, method)(right, joiner)

    def _named_store(self, node: dict[str, Any]) -> dict[str, Any]:
        """``store=`` for a table op whose node names its store (else nothing: the op stays unmaterialized); with
        ``store.versioned_history_retention_ms`` a versioned store supplier, named like the Java runner does
        (``store.name``, else the node id)."""
        store = self._store(node)
        retention = (node.get("store") or {}).get("versioned_history_retention_ms")
        if retention is not None:
            name = store or self.rename(node["id"])
            self.stores[node["id"]] = name
            return {"store": ks.Stores.persistent_versioned_key_value_store(name, retention)}
        if store is None:
            return {}
        self.stores[node["id"]] = store
        return {"store": store}

    def _store(self, node: dict[str, Any]) -> str | None:
        name = (node.get("store") or {}).get("name")
        return None if name is None else self.rename(name)


class CaseRun:
    """Runs a case on the test driver; ``captured[node]`` holds what each node produced."""

    def __init__(self, case: dict[str, Any], settings: dict[str, Any] | None = None) -> None:
        self.case = case
        builder = ks.StreamsBuilder()
        self.graph = CaseGraph(case, builder)
        self.captured = self.graph.captured
        self.stores = self.graph.stores
        self.driver = ks.TopologyTestDriver(builder.build(), {"statestore_cache_max_bytes": 0, **(settings or {})})
        self.inputs = {t: self.driver.create_input_topic(t) for t in self.graph.input_topics().values()}

    def table_entry(self, store: str, key: Any) -> Any:
        """The ``ValueAndTimestamp`` of ``key`` in the timestamped key-value store ``store`` (None if absent)."""
        return self.driver.get_timestamped_key_value_store(store).get(key)

    def pipe(self, record: dict[str, Any]) -> None:
        ts = record.get("timestamp_ms")
        self.inputs[record["topic"]].pipe_input(record["key"], record["value"], timestamp=0 if ts is None else ts)


def _buffer(spec: dict[str, Any]) -> BufferConfig:
    if spec.get("unbounded"):
        return BufferConfig.unbounded()
    config = BufferConfig(max_records=spec.get("max_records"), max_bytes=spec.get("max_bytes"))
    return config.emit_early_when_full() if spec.get("on_full") == "emit_early" else config.shut_down_when_full()


def as_dict(record: ks.Record) -> dict[str, Any]:
    """A produced record in the case format (windowed keys flattened)."""
    if isinstance(record.key, Windowed):
        return {
            "key": record.key.key, "window_start_ms": record.key.start, "window_end_ms": record.key.end,
            "value": record.value, "timestamp_ms": record.timestamp,
        }  # fmt: skip
    return {"key": record.key, "value": record.value, "timestamp_ms": record.timestamp}


def _identity(r: dict[str, Any]) -> tuple[Any, ...]:
    return (r["key"], r.get("window_start_ms"), r.get("window_end_ms"))


def _frozen(r: dict[str, Any]) -> str:
    return repr(sorted(r.items()))


class Observed(Protocol):
    """What ``check`` reads of a run: captured records per node, store names per node, table entries."""

    captured: dict[str, list[ks.Record]]
    stores: dict[str, str]

    def table_entry(self, store: str, key: Any) -> Any: ...


#: the default key serde: it reads a Java String key's bytes back as a number when they are one (``"1"`` -> 1)
_KEYS = serde_from("string_or_json")


def _as_read(record: dict[str, Any]) -> dict[str, Any]:
    """``record`` with a str key as the default key serde reads its UTF-8 bytes (Java's String bytes), so that
    keys compare by their bytes: a case's ``"1"``, Kafka Streams' ``"1"`` and kstream_nb's ``1`` are one key."""
    key = record.get("key")
    return {**record, "key": _KEYS.deserialize("", key.encode("utf-8"))} if isinstance(key, str) else record


def check(run: Observed, node: str, expectation: dict[str, Any], history: dict[str, list[dict[str, Any]]]) -> None:
    """Asserts one expectation; check-and-clear modes consume what the node produced since the last check."""
    match = expectation["match"]
    if match == "table_state":
        for want in expectation["records"]:
            got = run.table_entry(run.stores.get(node, node), want["key"])
            assert got is not None, f"{node}: key {want['key']!r} missing from the table"
            assert (got.value, got.timestamp) == (want["value"], want["timestamp_ms"]), f"{node}: {want['key']!r}"
        return
    produced = [_as_read(as_dict(r)) for r in run.captured[node]]
    expectation = {**expectation, "records": [_as_read(r) for r in expectation.get("records", [])]}
    run.captured[node].clear()
    history[node].extend(produced)
    if match == "last_per_key":
        last: dict[Any, dict[str, Any]] = {}
        for r in history[node]:
            last[_identity(r)] = r
        for want in expectation["records"]:
            got = last.get(_identity(want))
            if want["value"] is None:
                assert got is None or got["value"] is None, f"{node}: expected {want} removed, got {got}"
            else:
                assert got == want, f"{node}: last for {_identity(want)} is {got}, expected {want}"
        return
    if match == "ordered":
        assert produced == expectation["records"], f"{node}: produced {produced}"
    elif match == "set":
        assert {_frozen(r) for r in produced} == {_frozen(r) for r in expectation["records"]}, (
            f"{node}: {produced}"
        )
    elif match == "stable_sorted":
        fields = expectation["sort_by"]
        ordered = sorted(produced, key=lambda r: tuple(_sortable(r.get(f)) for f in fields))
        assert ordered == expectation["records"], f"{node}: produced (sorted) {ordered}"
    elif match == "values_only":
        assert [r["value"] for r in produced] == expectation["values"], f"{node}: produced {produced}"
    elif match == "key_values":
        got = [{"key": r["key"], "value": r["value"]} for r in produced]
        assert got == expectation["records"], f"{node}: produced {got}"
    else:
        raise ValueError(f"unknown match mode {match!r}")


def _sortable(x: Any) -> tuple[int, Any]:
    return (0, "") if x is None else (1, x)


def run_case(case: dict[str, Any], settings: dict[str, Any] | None = None) -> None:
    """Pipes every step of ``case`` (driver config ``settings``) and checks expectations, metrics, drops."""
    run = CaseRun(case, settings)
    history: dict[str, list[dict[str, Any]]] = defaultdict(list)
    dropped_inputs = []
    index = 0
    try:
        for step in case["steps"]:
            for record in step["input"]:
                before = run.driver.dropped_records_total
                run.pipe(record)
                if run.driver.dropped_records_total > before:
                    dropped_inputs.append(index)
                index += 1
            for node, expectation in step.get("expect", {}).items():
                check(run, node, expectation, history)
        metrics = case.get("expect_metrics") or {}
        if "dropped_records_total" in metrics:
            assert run.driver.dropped_records_total == metrics["dropped_records_total"]
        if "expect_dropped_inputs" in case:
            assert dropped_inputs == case["expect_dropped_inputs"]
    finally:
        run.driver.close()
