"""One sub-topology run as a Spark plan: its records in task order, each branch's steps, the runner's rows.

The result has the replay's row shape (``rows``): a compiled stage and a replayed one feed each other and the
results the same way. A record's writes keep the live order: branches in the order of the source's children,
depth first (a branch's sequence numbers are the task's positions times the number of branches, plus its
index).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kstream_nb.cluster.serdes import Serde
from kstream_nb.runtime.config import StreamsConfig
from kstream_nb.spark.compiled.codec import recode_values
from kstream_nb.spark.compiled.emit import StageContext, aggregate_rows
from kstream_nb.spark.compiled.ordering import in_offset_order, processing_order
from kstream_nb.spark.compiled.planner import STATELESS, Branch, CompiledPlan, DropNullKeys, Sink
from kstream_nb.spark.compiled.rekey import apply_steps, sink_keys
from kstream_nb.spark.compiled.rows import out_rows, stat_rows
from kstream_nb.spark.compiled.stateless import ValueFields
from kstream_nb.spark.compiled.stream_join import StreamJoinPlan
from kstream_nb.spark.compiled.stream_join_run import run_stream_join
from kstream_nb.spark.compiled.values import parse_values, value_schema
from kstream_nb.topology.topology import Topology


def run_compiled(
    plan: CompiledPlan,
    frame: Any,
    topology: Topology,
    config: StreamsConfig,
    resolve: Callable[[str], str],
    counts: Mapping[str, int],
    written: set[str],
    sink_serdes: Mapping[str, tuple[Serde, Serde]],
) -> Any:
    """The stage's output rows (``replay.OUT_DDL``) for ``frame``, its input rows (``replay.IN_COLUMNS``).

    Raises ``NotCompilable`` when the data holds what the compiled path cannot read as the runtime does."""
    from pyspark.sql import functions as F

    if isinstance(plan, StreamJoinPlan):
        return run_stream_join(plan, frame, resolve, counts, written, sink_serdes)
    from kstream_nb.spark.compiled.tables import has_tables, run_tables

    if has_tables(plan):
        return run_tables(plan, frame, topology, config, resolve, counts, written, sink_serdes)
    topics = [resolve(t) for t in plan.source_topics]
    ctx = StageContext(plan, topology, config, resolve, counts, sink_serdes, topics[0])
    reads = any(_reads_values(b) for b in plan.branches)
    schema = value_schema(frame, plan.fields()) if reads else {}
    ordered = processing_order(frame, topics, written)
    if not in_offset_order(topics, written):
        ordered = ordered.localCheckpoint(eager=True)  # every branch, store and counter reads this order
    stats = ordered.groupBy("partition").agg(
        F.count(F.lit(1)).alias("processed"), F.max("ts").alias("stream_time")
    )
    records = parse_values(ordered, schema) if reads else ordered
    outputs: list[Any] = []
    drops: list[Any] = []
    aggregated: set[str] = set()
    for i, branch in enumerate(plan.branches):
        fields = ValueFields(schema)
        kept = apply_steps(records, branch.steps, fields)
        sink, step = branch.sink, branch.aggregate
        if step is None:
            if sink is not None:
                seq = F.col("pos") * len(plan.branches) + i
                outputs.append(stateless_out(ctx, kept, sink, fields, seq))
            continue
        first = step.node not in aggregated  # a table several branches read: its stores and drops once
        aggregated.add(step.node)
        rows, dropped = aggregate_rows(ctx, branch, i, kept, fields, first)
        outputs.extend(rows)
        if first:
            drops.append(dropped)
    outputs.append(stat_rows(plan.subtopology, stats, drops))
    result = outputs[0]
    for more in outputs[1:]:
        result = result.unionByName(more)
    return result


def _reads_values(branch: Branch) -> bool:
    """Whether a step reads the values' fields (a filter, assign, projection or named aggregation)."""
    stateless = any(isinstance(s, STATELESS) and not isinstance(s, DropNullKeys) for s in branch.steps)
    return stateless or bool(branch.aggregate and branch.aggregate.specs)


def stateless_out(ctx: StageContext, records: Any, sink: Sink, fields: ValueFields, seq: Any) -> Any:
    """A stateless branch's sink rows: keys and values rewritten by the sink's serdes, assignments applied."""
    from pyspark.sql import functions as F

    plan, topic = ctx.plan, ctx.resolve(sink.topic)
    text = topic in ctx.sink_serdes
    partitions = ctx.counts.get(topic, 1)
    keys = sink_keys(records, plan.key_serde, sink.key_serde, (ctx.source_topic, topic), partitions, text)
    values = recode_values(plan.value_serde, sink.value_serde, (ctx.source_topic, topic), fields.ops, text)
    out = records.withColumn("k", keys)
    out = out.withColumn("val", values(F.col("value"), fields.assigned_struct()))
    return out_rows(out, topic, partitions, seq, "ts")
