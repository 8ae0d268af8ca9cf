"""Which sub-topology compiles to a Spark plan, and why not: the first operation the compiled path cannot
translate is named, with the reason (a lambda is opaque to Catalyst; a Processor API node has its own state).

A sub-topology compiles when it is a tree from one source node whose every branch is: column-expression
filters, ``assign``, projections, ``select_key``/``group_by`` by an expression (then no more than these and a
sink), a repartition's null-key filter, then optionally ``count``/``agg`` by the current key (emitting on
update; windowed: or on close, or ``suppress(until_window_closes())`` in a one-branch sub-topology) and its
table's ``to_stream``, ending in a sink with the default partitioner (or nothing). A branch is a path from
the source to a leaf, in the order a record's writes happen live (children in order, depth first). Processors
are made by their suppliers, as a task makes them, and recognised by class. Tables and stream-table joins
with ``ks.merge_joiner`` (``tables``) compile too: a sub-topology of a stream and the tables it joins is
planned per source. Windowed stream-stream joins: ``stream_join``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kstream_nb.cluster.serdes import JsonSerde, Serde
from kstream_nb.dsl import grouped
from kstream_nb.dsl import windowed as window_dsl
from kstream_nb.dsl.repartition import RepartitionNullKeyFilter
from kstream_nb.processor import stream_stateless as ops
from kstream_nb.processor.expressions.tree import Expr
from kstream_nb.processor.sink import WindowedStreamPartitioner
from kstream_nb.processor.stream_aggregate import KStreamAggregate
from kstream_nb.processor.suppress import KTableSuppress
from kstream_nb.processor.table_joins import KStreamKTableJoin
from kstream_nb.processor.table_ops import KTableMapValues, KTableMaterialize, KTableSource, KTableToStream
from kstream_nb.processor.window_aggregate import KStreamWindowAggregate
from kstream_nb.processor.windows import TimeWindows
from kstream_nb.runtime.config import StreamsConfig
from kstream_nb.state.dsl_window_store import DslWindowStore
from kstream_nb.topology.topology import ProcessorSpec, SinkSpec, SourceSpec, SubTopology, Topology

__all__ = ["CompiledPlan", "NotCompilable", "StagePath", "plan_subtopology"]


class NotCompilable(Exception):
    """Why a sub-topology (or its data) takes the replay path: names the operation and the reason."""


@dataclass(frozen=True)
class StagePath:
    """The path one sub-topology took in a backtest and why (``result.explain()``)."""

    subtopology: int
    engine: str  # "compiled" or "replay"
    reason: str


@dataclass(frozen=True)
class ExprFilter:
    node: str
    expr: Expr


@dataclass(frozen=True)
class Assign:
    node: str
    columns: dict[str, Expr]


@dataclass(frozen=True)
class Project:
    node: str
    names: tuple[str, ...]


@dataclass(frozen=True)
class SelectKey:
    """``select_key``/``group_by`` by a column expression of the value (``rekey``)."""

    node: str
    expr: Expr


@dataclass(frozen=True)
class DropNullKeys:
    """A repartition's filter: null keys are dropped silently (not counted, as Kafka)."""

    node: str


@dataclass(frozen=True)
class Aggregate:
    """``count()`` (``specs`` None) or ``agg(name=(field, function))`` per key, emitting on every update; with
    ``windows``, per key and tumbling/hopping window (``emit_final``: once per window, when it closes)."""

    node: str
    store: str
    specs: dict[str, tuple[str, str]] | None
    windows: TimeWindows | None = None
    emit_final: bool = False
    #: the window store's read retention (windows with start > its stream time - this are kept and read)
    retention_ms: int = 0


@dataclass(frozen=True)
class Finish:
    """The table ``map_values`` that turns a named aggregation's running state into its result (means)."""

    node: str
    store: str | None


@dataclass(frozen=True)
class Suppress:
    """``suppress(until_window_closes())`` of a windowed aggregation: each window's final result once, when it
    closes, its update buffered in ``store`` until then (``suppress``)."""

    node: str
    store: str


@dataclass(frozen=True)
class Table:
    """A table: each key's latest value in ``store`` (None: not materialized), every update forwarded;
    ``source``: a table source, which drops (and counts) null keys (``tables``)."""

    node: str
    store: str | None
    source: bool


@dataclass(frozen=True)
class TableJoin:
    """A stream-table join on the key with ``ks.merge_joiner`` (``left``: a left join), the table in ``store``."""

    node: str
    store: str
    left: bool
    joiner: Any


@dataclass(frozen=True)
class ToStream:
    node: str


@dataclass(frozen=True)
class Sink:
    node: str
    topic: str
    key_serde: Serde
    value_serde: Serde
    #: a windowed key's partitioner (by the key inside), as the DSL's ``to`` sets with a windowed key serde
    partitioner: WindowedStreamPartitioner | None = None


Step = (
    ExprFilter
    | Assign
    | Project
    | SelectKey
    | DropNullKeys
    | Aggregate
    | Finish
    | Suppress
    | Table
    | TableJoin
    | ToStream
    | Sink
)
STATELESS = (ExprFilter, Assign, Project, SelectKey, DropNullKeys)


@dataclass
class Branch:
    """The steps from the source to one leaf of the sub-topology."""

    steps: list[Step] = field(default_factory=list)

    @property
    def aggregate(self) -> Aggregate | None:
        return next((s for s in self.steps if isinstance(s, Aggregate)), None)

    @property
    def sink(self) -> Sink | None:
        return next((s for s in self.steps if isinstance(s, Sink)), None)

    def fields(self) -> set[str]:
        """Value fields read by the expressions and aggregations (before any assign that sets them)."""
        read: set[str] = set()
        assigned: set[str] = set()
        for step in self.steps:
            if isinstance(step, (ExprFilter, SelectKey)):
                read |= step.expr.columns() - assigned
            elif isinstance(step, Assign):
                for name, expr in step.columns.items():
                    read |= expr.columns() - assigned
                    assigned.add(name)
            elif isinstance(step, Project):
                read |= set(step.names) - assigned
                assigned = set(step.names)
            elif isinstance(step, Aggregate) and step.specs:
                read |= {f for f, _ in step.specs.values()} - assigned
        return read

    def describe(self) -> str:
        return " -> ".join(type(s).__name__ for s in self.steps)


@dataclass
class CompiledPlan:
    """One sub-topology as the branches the compiled path translates."""

    subtopology: int
    source: str
    source_topics: tuple[str, ...]
    key_serde: Serde
    value_serde: Serde
    branches: list[Branch] = field(default_factory=list)

    def fields(self) -> set[str]:
        return set().union(*(b.fields() for b in self.branches))

    def describe(self) -> str:
        return "; ".join(b.describe() for b in self.branches)


def plan_subtopology(topology: Topology, sub: SubTopology, config: StreamsConfig) -> CompiledPlan:
    """The compiled plan of ``sub``; raises ``NotCompilable`` naming the first operation it cannot translate."""
    specs = topology.node_specs
    sources = [specs[n] for n in sub.nodes if isinstance(specs[n], SourceSpec)]
    if len(sources) != 1:
        from kstream_nb.spark.compiled.stream_join import is_stream_join, plan_stream_join

        inputs = [s for s in sources if isinstance(s, SourceSpec)]
        if is_stream_join(topology, inputs):  # two sources joined by a windowed stream-stream join
            return plan_stream_join(topology, sub, config, inputs)
        from kstream_nb.spark.compiled.tables import plan_table_join

        return plan_table_join(topology, config, sub.id, inputs)  # a stream and the tables it joins, or refused
    source = sources[0]
    assert isinstance(source, SourceSpec)
    return plan_source(topology, config, sub.id, source)


def plan_source(topology: Topology, config: StreamsConfig, sub: int, source: SourceSpec) -> CompiledPlan:
    """The plan of the branches below one source node."""
    extractor = source.timestamp_extractor or config.default_timestamp_extractor
    if not extractor.uses_record_timestamp:
        raise NotCompilable(f"source {source.name!r}: timestamp extractor {type(extractor).__name__}")
    plan = CompiledPlan(
        sub, source.name, source.topics, source.key_serde or config.default_key_serde,
        source.value_serde or config.default_value_serde,
    )  # fmt: skip
    _walk(topology, config, plan, source.name, [])
    sinks = [b.sink for b in plan.branches if b.sink is not None]
    for branch in plan.branches:
        _check_order(branch)
        if len(plan.branches) > 1 and any(isinstance(s, Suppress) for s in branch.steps):
            raise NotCompilable("a suppress in a sub-topology of several branches is not compiled")
    if len({s.topic for s in sinks}) < len(sinks):
        raise NotCompilable("several sinks write one topic (their null keys share a round robin live)")
    return plan


def _walk(topology: Topology, config: StreamsConfig, plan: CompiledPlan, name: str, steps: list[Step]) -> None:
    """Adds the branches below node ``name`` (reached through ``steps``), children in order."""
    children = topology.children(name)
    if not children:
        plan.branches.append(Branch(list(steps)))
    for child in children:
        spec = topology.node_specs[child]
        if isinstance(spec, SinkSpec):
            step: Step = _sink(spec, config)
        elif isinstance(spec, ProcessorSpec):
            step = _step(spec, plan, steps, topology, config)
        else:
            raise NotCompilable(f"node {child!r}: {type(spec).__name__} is not compiled")
        _walk(topology, config, plan, child, [*steps, step])


def _sink(spec: SinkSpec, config: StreamsConfig) -> Sink:
    windowed = spec.partitioner if isinstance(spec.partitioner, WindowedStreamPartitioner) else None
    if spec.partitioner is not None and windowed is None:
        raise NotCompilable(f"sink {spec.name!r}: a custom partitioner ({_callable_name(spec.partitioner)})")
    return Sink(
        spec.name, spec.topic, spec.key_serde or config.default_key_serde,
        spec.value_serde or config.default_value_serde, windowed,
    )  # fmt: skip


def _step(
    spec: ProcessorSpec, plan: CompiledPlan, steps: list[Step], topology: Topology, config: StreamsConfig
) -> Step:
    name = spec.name
    if isinstance(spec.supplier, RepartitionNullKeyFilter):
        if spec.supplier.keep_null_keys:
            raise NotCompilable(f"node {name!r}: a repartition that keeps null keys (a left join downstream)")
        return DropNullKeys(name)
    if not str(getattr(spec.supplier, "__module__", "")).startswith("kstream_nb."):
        # a user's supplier is not called here: making a processor may have effects (connections, files)
        raise NotCompilable(f"node {name!r}: Processor API ({_callable_name(spec.supplier)})")
    processor: Any = spec.supplier()
    kind = type(processor)
    if kind is ops.KStreamExprFilter:
        _need_json(plan, name)
        return ExprFilter(name, processor.expr)
    if kind is ops.KStreamAssign:
        _need_json(plan, name)
        columns = processor.assignments
        for column, value in columns.items():
            if not isinstance(value, Expr):
                raise NotCompilable(
                    f"node {name!r}: assign({column}=...) is a {type(value).__name__}, not an expression"
                )
        return Assign(name, dict(columns))
    if kind is ops.KStreamProject:
        _need_json(plan, name)
        return Project(name, tuple(processor.names))
    if kind is ops.KStreamExprSelectKey:
        _need_json(plan, name)
        return SelectKey(name, processor.expr)
    if kind is KStreamAggregate or kind is KStreamWindowAggregate:
        return _aggregate(processor, spec, plan, steps, topology, config)
    if kind is KTableMapValues:
        previous = steps[-1] if steps else None
        if not (isinstance(previous, Aggregate) and previous.specs is not None and _is_finish(processor.mapper)):
            raise NotCompilable(f"node {name!r}: table map_values with {_callable_name(processor.mapper)}")
        return Finish(name, processor.store_name)
    if kind is KTableToStream:
        return ToStream(name)
    if kind is KTableSuppress:
        return _suppress(processor, name, steps)
    if kind is KTableSource or kind is KTableMaterialize or kind is KStreamKTableJoin:
        from kstream_nb.spark.compiled.tables import table_step

        return table_step(processor, spec, plan, steps, topology, config)
    names: dict[type, str] = {
        ops.KStreamFilter: "filter", ops.KStreamMap: "map", ops.KStreamMapValues: "map_values",
        ops.KStreamSelectKey: "select_key/group_by", ops.KStreamFlatMap: "flat_map",
        ops.KStreamFlatMapValues: "flat_map_values", ops.KStreamPeek: "peek/foreach", ops.KStreamBranch: "split",
    }  # fmt: skip
    what = names.get(kind)
    if what is not None:
        fn = getattr(processor, "predicate", None) or getattr(processor, "mapper", None)
        fn = fn or getattr(processor, "action", None)
        return _refuse(name, f"{what} with a Python function ({_callable_name(fn)}): opaque to Spark")
    if kind is ops.PassThrough:
        return _refuse(name, "merge of several streams")
    later = _NOT_YET.get(kind.__name__)
    if later is not None:
        return _refuse(name, f"{later} ({kind.__name__}): not compiled yet")
    return _refuse(name, f"{kind.__name__}: no compiled form")


#: operations of the DSL the compiled path does not translate yet (they replay), by processor class
_NOT_YET = {
    "KTableKTableJoinSide": "a table-table join",
    "KStreamKStreamJoinSide": "a windowed stream-stream join",
    "KStreamSlidingWindowAggregate": "sliding windows",
    # a record may merge sessions earlier records made (out of timestamp order, bridging two): each record's
    # sessions depend on every earlier record of its key, a scan per key rather than window functions
    "KStreamSessionWindowAggregate": "session windows (merges depend on every earlier record of the key)",
    "KStreamReduce": "reduce (a Python function)",
    "KTableAggregate": "a table aggregation (a Python function)",
    "KTableReduce": "a table reduce (a Python function)",
    "KTableFilter": "a table filter (a Python function)",
    "KTableTransformValues": "transform_values (a Processor API function)",
    "KTableRepartitionMap": "a table group_by (a Python function)",
}


def _refuse(name: str, reason: str) -> Step:
    raise NotCompilable(f"node {name!r}: {reason}")


def _aggregate(
    processor: Any, spec: ProcessorSpec, plan: CompiledPlan, steps: list[Step], topology: Topology,
    config: StreamsConfig,
) -> Aggregate:  # fmt: skip
    name = spec.name
    if config.statestore_cache_max_bytes > 0:
        raise NotCompilable(
            f"node {name!r}: statestore_cache_max_bytes > 0 (the record cache decides which updates are emitted)"
        )
    if any(isinstance(s, Aggregate) for s in steps):
        raise NotCompilable(f"node {name!r}: a second aggregation in one sub-topology")
    windowed: dict[str, Any] = {}
    if isinstance(processor, KStreamWindowAggregate):
        store = topology.store_builders[processor.store_name]._make()  # type: ignore[attr-defined]
        if not isinstance(store, DslWindowStore):
            raise NotCompilable(f"node {name!r}: a window store of its own ({type(store).__name__})")
        windowed = {
            "windows": processor.windows,
            "emit_final": not processor.emit_on_update,
            "retention_ms": store.read_retention_ms,
        }
    counting = (grouped._count_add, grouped._zero) if not windowed else (window_dsl._count_add, window_dsl._zero)
    if (processor.aggregator, processor.initializer) == counting:
        return Aggregate(name, processor.store_name, None, **windowed)
    if _qualname(processor.aggregator) == "named_aggregation.<locals>.aggregator":
        _need_json(plan, name)
        checked = inspect.getclosurevars(processor.aggregator).nonlocals.get("checked")
        assert isinstance(checked, dict)
        return Aggregate(name, processor.store_name, dict(checked), **windowed)
    raise NotCompilable(f"node {name!r}: aggregate with {_callable_name(processor.aggregator)}: opaque to Spark")


def _suppress(processor: KTableSuppress, name: str, steps: list[Step]) -> Suppress:
    aggregate = next((s for s in steps if isinstance(s, Aggregate)), None)
    if not processor.suppressed.until_window_closes:
        raise NotCompilable(f"node {name!r}: suppress(until_time_limit) (a time limit per key) is not compiled")
    if processor.suppressed.buffer.max_records is not None or processor.suppressed.buffer.max_bytes is not None:
        raise NotCompilable(f"node {name!r}: suppress with a bounded buffer (it fails when full) is not compiled")
    if processor.view is not None and processor.view.store_name is not None:
        raise NotCompilable(f"node {name!r}: a suppressed table a join looks up is not compiled")
    windows = aggregate.windows if aggregate is not None else None
    if not (
        aggregate is not None and windows is not None and not aggregate.emit_final
        and isinstance(steps[-1], Aggregate | Finish) and processor.duration == windows.grace_ms
    ):  # fmt: skip
        raise NotCompilable(f"node {name!r}: suppress of what is not a windowed count/agg emitting on update")
    return Suppress(name, processor.store_name)


def _is_finish(fn: Callable[..., Any]) -> bool:
    return _qualname(fn) == "named_aggregation.<locals>.finish"


def _check_order(branch: Branch) -> None:
    """After an aggregation only its finish, ``to_stream`` and a sink are compiled."""
    seen_aggregate = False
    for i, step in enumerate(branch.steps):
        rekeyed = any(isinstance(s, SelectKey) for s in branch.steps[:i])
        if rekeyed and not isinstance(step, (*STATELESS, Sink)):  # live, a repartition comes first
            raise NotCompilable(f"node {step.node!r}: {type(step).__name__} after select_key is not compiled")
        if isinstance(step, Aggregate):
            seen_aggregate = True
        elif isinstance(step, STATELESS) and seen_aggregate:
            raise NotCompilable(f"node {step.node!r}: {type(step).__name__} after an aggregation is not compiled")
        elif isinstance(step, Sink) and seen_aggregate and not isinstance(branch.steps[i - 1], ToStream):
            raise NotCompilable(f"sink {step.node!r} of a table without to_stream")


def _need_json(plan: CompiledPlan, node: str) -> None:
    if type(plan.value_serde) is not JsonSerde:
        raise NotCompilable(
            f"node {node!r}: reads fields of values whose serde is {type(plan.value_serde).__name__} (JSON only)"
        )


def _qualname(fn: Any) -> str:
    return str(getattr(fn, "__qualname__", ""))


def _callable_name(fn: Any) -> str:
    name = _qualname(fn) or type(fn).__name__
    return "a lambda" if "<lambda>" in name else name
