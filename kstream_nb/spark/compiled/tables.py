"""Tables and stream-table joins in the compiled path: which compile (the planner's part) and the stage that
runs them.

A table (``KTableSource``, ``KTableMaterialize`` after it) without a record cache keeps each key's latest value
(a null value deletes it) and forwards every update, with its record's timestamp: ``to_stream`` emits them
all, a table source drops (and counts) null keys. A stream-table join on the key with ``ks.merge_joiner``
(``table_join``) reads the table as of the stream record's place in the task's processing order. A sub-topology
of a stream and the tables it joins is planned per source: the tables' plans run first, the stream's reads
what they keep. Versioned tables, grace periods, global tables and other joiners take the replay path.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from kstream_nb.cluster.serdes import JsonSerde, Serde
from kstream_nb.processor.table_joins import KStreamKTableJoin
from kstream_nb.processor.table_ops import KTableSource
from kstream_nb.processor.value_joiners import MergeJoiner
from kstream_nb.runtime.config import StreamsConfig
from kstream_nb.spark.compiled.emit import StageContext, aggregate_rows
from kstream_nb.spark.compiled.ordering import processing_order
from kstream_nb.spark.compiled.planner import (
    STATELESS,
    Aggregate,
    Branch,
    CompiledPlan,
    NotCompilable,
    Sink,
    Step,
    Suppress,
    Table,
    TableJoin,
    ToStream,
    _callable_name,
    plan_source,
)
from kstream_nb.spark.compiled.rekey import apply_steps
from kstream_nb.spark.compiled.rows import stat_rows
from kstream_nb.spark.compiled.stage import stateless_out
from kstream_nb.spark.compiled.stateless import ValueFields
from kstream_nb.spark.compiled.table_join import TableRecords, join_rows, store_key_serde, table_rows, value_kinds
from kstream_nb.spark.compiled.values import parse_values, value_schema, with_parsed
from kstream_nb.state.timestamped import TimestampedKeyValueStoreBuilder
from kstream_nb.topology.topology import ProcessorSpec, SourceSpec, Topology

_S = TypeVar("_S", Table, TableJoin)

__all__ = ["TableJoinPlan", "has_tables", "plan_table_join", "run_tables", "table_step"]


@dataclass
class TableJoinPlan(CompiledPlan):
    """A stream (this plan) and the plans of the tables it joins, each read from its own source."""

    tables: list[CompiledPlan] = field(default_factory=list)

    def describe(self) -> str:
        return "; ".join([super().describe(), *(t.describe() for t in self.tables)])


def table_step(processor: Any, spec: ProcessorSpec, plan: CompiledPlan, steps: list[Step], topology: Topology,
               config: StreamsConfig) -> Step:  # fmt: skip
    """The step of a table source, a table's materialization or a stream-table join; ``NotCompilable`` names
    what is not translated."""
    name = spec.name
    if any(isinstance(s, Aggregate) for s in steps):
        raise NotCompilable(f"node {name!r}: a table or a join after an aggregation is not compiled")
    if isinstance(processor, KStreamKTableJoin):
        return _join_step(processor, name, plan, topology, config)
    if isinstance(processor, KTableSource):
        store = processor.store_name if processor.flags.materialized else None
        step = Table(name, store, True)
    else:  # KTableMaterialize: the store of the table just before it
        if not (steps and isinstance(steps[-1], Table)):
            raise NotCompilable(f"node {name!r}: materialize of a table that is not compiled")
        step = Table(name, processor.store_name, False)
    if step.store is not None:
        _check_store(name, step.store, topology, config)
    return step


def _join_step(
    processor: KStreamKTableJoin, name: str, plan: CompiledPlan, topology: Topology, config: StreamsConfig
) -> TableJoin:
    if processor.key_selector is not None:
        raise NotCompilable(f"node {name!r}: a join with a global table (not compiled)")
    if processor.buffer_store is not None:
        raise NotCompilable(f"node {name!r}: a stream-table join with a grace period (a versioned table)")
    joiner = processor.joiner
    if not isinstance(joiner, MergeJoiner):
        raise NotCompilable(
            f"node {name!r}: a stream-table join with {_callable_name(joiner)}: opaque to Spark "
            "(ks.merge_joiner() compiles)"
        )
    if not isinstance(processor.table_store, str):
        raise NotCompilable(f"node {name!r}: a join with a table computed from others (no store of its own)")
    _need_json(plan.value_serde, name)
    _check_store(name, processor.table_store, topology, config)
    if _sources_above(topology, name) & _writers_sources(topology, processor.table_store):
        raise NotCompilable(f"node {name!r}: a join with a table made from its own input (not compiled)")
    return TableJoin(name, processor.table_store, processor.left, joiner)


def _sources_above(topology: Topology, name: str) -> set[str]:
    spec = topology.node_specs[name]
    if isinstance(spec, SourceSpec):
        return {name}
    return set().union(*(_sources_above(topology, p) for p in getattr(spec, "parents", ())))


def _writers_sources(topology: Topology, store: str) -> set[str]:
    """The sources above the nodes that write ``store`` (every node connected to it but the joins reading it)."""
    found: set[str] = set()
    for name, spec in topology.node_specs.items():
        if not isinstance(spec, ProcessorSpec) or store not in spec.stores:
            continue
        reader = str(getattr(spec.supplier, "__module__", "")).startswith("kstream_nb.") and isinstance(
            spec.supplier(), KStreamKTableJoin
        )
        if not reader:
            found |= _sources_above(topology, name)
    return found


def _check_store(node: str, store: str, topology: Topology, config: StreamsConfig) -> None:
    builder = topology.store_builders.get(store)
    if not isinstance(builder, TimestampedKeyValueStoreBuilder):
        kind = type(builder).__name__
        raise NotCompilable(f"node {node!r}: a table in a {kind} (a versioned table, KIP-914, is not compiled)")
    if builder.caching_enabled and config.statestore_cache_max_bytes > 0:
        raise NotCompilable(
            f"node {node!r}: statestore_cache_max_bytes > 0 (the record cache decides which updates are emitted)"
        )


def _need_json(serde: Serde, node: str) -> None:
    if type(serde) is not JsonSerde:
        raise NotCompilable(
            f"node {node!r}: merge_joiner of values whose serde is {type(serde).__name__} (JSON only)"
        )


def plan_table_join(
    topology: Topology, config: StreamsConfig, sub: int, sources: list[SourceSpec]
) -> TableJoinPlan:
    """A sub-topology of several sources compiles when one is a stream joining tables the others read."""
    plans = [plan_source(topology, config, sub, s) for s in sources]
    joining = [p for p in plans if _steps(p, TableJoin)]
    if len(joining) != 1:
        raise NotCompilable(f"{len(sources)} source nodes (a merge or a join of several inputs)")
    stream = joining[0]
    tables = [p for p in plans if p is not stream]
    kept = {s.store: p for p in tables for s in _steps(p, Table)}
    for join in _steps(stream, TableJoin):
        table = kept.get(join.store)
        if table is None:
            raise NotCompilable(
                f"node {join.node!r}: its table is not read from another source of the sub-topology"
            )
        _need_json(table.value_serde, join.node)
    for suppress in (s for p in plans for b in p.branches for s in b.steps if isinstance(s, Suppress)):
        raise NotCompilable(f"node {suppress.node!r}: suppress in a sub-topology with tables is not compiled")
    sinks = [b.sink.topic for p in plans for b in p.branches if b.sink is not None]
    if len(set(sinks)) < len(sinks):
        raise NotCompilable("several sinks write one topic (their null keys share a round robin live)")
    return TableJoinPlan(stream.subtopology, stream.source, stream.source_topics, stream.key_serde,
                         stream.value_serde, stream.branches, tables)  # fmt: skip


def _steps(plan: CompiledPlan, kind: type[_S]) -> list[_S]:
    return [s for b in plan.branches for s in b.steps if isinstance(s, kind)]


def has_tables(plan: CompiledPlan) -> bool:
    """Whether ``plan`` takes this module's stage (it keeps a table or joins one)."""
    return isinstance(plan, TableJoinPlan) or bool(_steps(plan, Table))


def run_tables(
    plan: CompiledPlan,
    frame: Any,
    topology: Topology,
    config: StreamsConfig,
    resolve: Callable[[str], str],
    counts: Mapping[str, int],
    written: set[str],
    sink_serdes: Mapping[str, tuple[Serde, Serde]],
) -> Any:
    """``stage.run_compiled`` for a plan with tables: every source's branches over the task's order, the
    tables' first (a join reads what they keep), sequence numbers over all branches."""
    from pyspark.sql import functions as F

    sides = [*plan.tables, plan] if isinstance(plan, TableJoinPlan) else [plan]
    branches = [b for side in sides for b in side.branches]
    topics = {id(side): [resolve(t) for t in side.source_topics] for side in sides}
    every = [t for side in sides for t in topics[id(side)]]
    ordered = processing_order(with_parsed(frame), every, written).localCheckpoint(eager=True)
    stats = ordered.groupBy("partition").agg(
        F.count(F.lit(1)).alias("processed"), F.max("ts").alias("stream_time")
    )
    after: dict[str, set[str]] = {}
    for branch in branches:
        for i, step in enumerate(branch.steps):
            if isinstance(step, TableJoin):
                after.setdefault(step.node, set()).update(Branch(_before_join(branch.steps[i + 1 :])).fields())
    run = _Run(tables={}, done=set(), outputs=[], drops=[], count=len(branches), after=after)
    index = 0
    for side in sides:
        own = topics[id(side)]
        records = ordered if len(sides) == 1 else ordered.where(F.col("topic").isin(own))
        ctx = StageContext(
            replace(side, branches=branches), topology, config, resolve, counts, sink_serdes, own[0]
        )
        read = set().union(*(Branch(_before_join(b.steps)).fields() for b in side.branches))
        schema = value_schema(records, read) if read else {}
        records = parse_values(records, schema)
        if bool(_steps(side, Table)) or bool(_steps(side, TableJoin)):
            records = value_kinds(records, side.value_serde, own[0], isinstance(plan, TableJoinPlan))
        for branch in side.branches:
            run.branch(ctx, branch, index, records, schema)
            index += 1
    run.outputs.append(stat_rows(plan.subtopology, stats, run.drops))
    result = run.outputs[0]
    for more in run.outputs[1:]:
        result = result.unionByName(more)
    return result


def _before_join(steps: list[Step]) -> list[Step]:
    joins = [i for i, s in enumerate(steps) if isinstance(s, TableJoin)]
    return steps[: joins[0]] if joins else steps


@dataclass
class _Run:
    """What the branches of one stage share: the tables' records by store, the nodes already counted (a node
    several branches pass keeps its stores and drops once), the output rows and drops so far."""

    tables: dict[str, Any]
    done: set[str]
    outputs: list[Any]
    drops: list[Any]
    count: int
    #: per join: the fields the steps after it read; its joined records and their parsed fields
    after: dict[str, set[str]]
    joined: dict[str, tuple[Any, dict[str, str]]] = field(default_factory=dict)

    def branch(self, ctx: StageContext, branch: Branch, index: int, records: Any, schema: dict[str, str]) -> None:
        """Runs one branch's steps in order over ``records`` (its source's, parsed by ``schema``)."""
        from pyspark.sql import functions as F

        fields = ValueFields(schema)
        frame, pending = records, list[Step]()
        for step in branch.steps:
            if isinstance(step, STATELESS):
                pending.append(step)
                continue
            frame = apply_steps(frame, pending, fields)
            pending = []
            first = step.node not in self.done
            self.done.add(step.node)
            if isinstance(step, Table):
                frame, dropped, entries = table_rows(ctx, step, frame, fields)
                if first:
                    self.outputs.extend(entries)
                    self.drops.extend(dropped)
                    if step.store is not None:
                        plan = ctx.plan
                        keys = store_key_serde(ctx, step.store)
                        self.tables[step.store] = TableRecords(frame, plan.value_serde, keys, ctx.source_topic)
            elif isinstance(step, TableJoin):
                if first:  # joined once, for every branch after it
                    table = self.tables[step.store]
                    joined, parsed, dropped = join_rows(ctx, step, frame, fields, table, self.after[step.node])
                    self.joined[step.node] = joined, parsed
                    self.drops.append(dropped)
                frame, parsed = self.joined[step.node]
                fields = ValueFields(parsed)
            elif isinstance(step, Aggregate):
                rows, dropped = aggregate_rows(ctx, branch, index, frame, fields, first)
                self.outputs.extend(rows)
                if first:
                    self.drops.append(dropped)
                return
            elif isinstance(step, Sink):
                seq = F.col("pos") * self.count + index
                self.outputs.append(stateless_out(ctx, frame, step, fields, seq))
            elif not isinstance(step, ToStream):
                raise NotCompilable(f"node {step.node!r}: {type(step).__name__} is not compiled with a table")
