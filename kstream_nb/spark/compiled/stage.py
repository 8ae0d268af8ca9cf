"""One sub-topology run as a Spark plan: its records in task order, the steps, the rows the runner expects.

The result has the replay's row shape (``replay.OUT_DDL``): kind "out" (a record for a sink topic, with its
partition, the task that wrote it and its position in that task's writes), "store" (final store entries,
pickled as the replay writes them) and "stat" (per task: records processed, dropped, stream time), so a
compiled stage and a replayed one feed each other and the results the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kstream_nb.cluster.serde_specs import serde_from
from kstream_nb.cluster.serdes import Serde
from kstream_nb.runtime.config import StreamsConfig
from kstream_nb.spark.compiled.aggregate import result_builder, running_aggregates, state_builder
from kstream_nb.spark.compiled.codec import encode_objects, pickle_keys, recode_keys, recode_values
from kstream_nb.spark.compiled.ordering import processing_order
from kstream_nb.spark.compiled.planner import (
    STATELESS,
    Aggregate,
    Branch,
    CompiledPlan,
    DropNullKeys,
    Finish,
    Sink,
)
from kstream_nb.spark.compiled.stateless import ValueFields, apply_stateless
from kstream_nb.spark.compiled.values import parse_values, value_schema
from kstream_nb.topology.topology import Topology

OUT_ORDER = [
    "kind", "topic", "partition", "task", "seq", "ts", "key", "value", "headers",
    "key_text", "value_text", "start", "end",
]  # fmt: skip


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

    topics = [resolve(t) for t in plan.source_topics]
    source_topic = topics[0]
    reads = any(_reads_values(b) for b in plan.branches)
    schema = value_schema(frame, plan.fields()) if reads else {}
    ordered = processing_order(frame, topics, written)
    stats = ordered.groupBy("partition").agg(
        F.count(F.lit(1)).alias("processed"), F.max("ts").alias("stream_time")
    )
    records = parse_values(ordered, schema) if reads else ordered
    outputs: list[Any] = []
    drops: list[Any] = []
    aggregated: set[str] = set()
    for i, branch in enumerate(plan.branches):
        seq = F.col("pos") * len(plan.branches) + i  # a record's writes in branch order, as live
        value_fields = ValueFields(schema)
        kept = apply_stateless(records, [s for s in branch.steps if isinstance(s, STATELESS)], value_fields)
        sink, step = branch.sink, branch.aggregate
        if step is None:
            if sink is not None:
                outputs.append(
                    _stateless_out(plan, kept, sink, value_fields, seq, resolve, counts, sink_serdes, source_topic)
                )
            continue
        first = step.node not in aggregated  # a table read by several branches is computed once per branch
        aggregated.add(step.node)
        valid = F.col("key").isNotNull() & F.col("value").isNotNull()
        if first:
            drops.append(kept.where(~valid).select("partition"))
        outputs.extend(
            _aggregate_out(
                plan, branch, step, kept.where(valid), value_fields, seq, first, topology, config, resolve, counts,
                sink_serdes, source_topic,
            )
        )  # fmt: skip
    outputs.append(_stat_rows(plan, stats, drops))
    result = outputs[0]
    for more in outputs[1:]:
        result = result.unionByName(more)
    return result


def _reads_values(branch: Branch) -> bool:
    """Whether a step reads the values' fields (a filter, assign, projection or named aggregation)."""
    stateless = any(isinstance(s, STATELESS) and not isinstance(s, DropNullKeys) for s in branch.steps)
    return stateless or bool(branch.aggregate and branch.aggregate.specs)


def _stateless_out(
    plan: CompiledPlan, records: Any, sink: Sink, fields: ValueFields, seq: Any, resolve: Callable[[str], str],
    counts: Mapping[str, int], sink_serdes: Mapping[str, tuple[Serde, Serde]], source_topic: str,
) -> Any:  # fmt: skip
    from pyspark.sql import functions as F

    topic = resolve(sink.topic)
    text = topic in sink_serdes
    keys = recode_keys(plan.key_serde, sink.key_serde, (source_topic, topic), counts.get(topic, 1), text)
    values = recode_values(plan.value_serde, sink.value_serde, (source_topic, topic), fields.ops, text)
    out = records.withColumn("k", keys(F.col("key"))).withColumn(
        "val", values(F.col("value"), fields.assigned_struct())
    )
    return _out_rows(out, topic, counts.get(topic, 1), seq, "ts")


def _aggregate_out(
    plan: CompiledPlan, branch: Branch, step: Aggregate, records: Any, fields: ValueFields, seq: Any,
    stores_too: bool, topology: Topology, config: StreamsConfig, resolve: Callable[[str], str],
    counts: Mapping[str, int], sink_serdes: Mapping[str, tuple[Serde, Serde]], source_topic: str,
) -> list[Any]:  # fmt: skip
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    builder = topology.store_builders[step.store]
    spec = getattr(builder, "key_serde", None)
    store_keys = serde_from(spec) if spec is not None else config.default_key_serde
    grouped = recode_keys(plan.key_serde, store_keys, (source_topic, source_topic), 1, False)
    updates = running_aggregates(records.withColumn("gk", grouped(F.col("key"))["bytes"]), step, fields)
    finish = next((s for s in branch.steps if isinstance(s, Finish)), None)
    result: list[Any] = []
    sink = branch.sink
    if sink is not None:
        topic = resolve(sink.topic)
        text = topic in sink_serdes
        keys = recode_keys(plan.key_serde, sink.key_serde, (source_topic, topic), counts.get(topic, 1), text)
        values = encode_objects(result_builder(step, finish is not None), sink.value_serde, topic, text)
        out = updates.withColumn("k", keys(F.col("key"))).withColumn("val", values(F.col("agg")))
        result.append(_out_rows(out, topic, counts.get(topic, 1), seq, "agg_ts"))
    if not stores_too:
        return result
    last = Window.partitionBy("partition", "gk").orderBy(F.col("pos").desc())
    final = updates.withColumn("_last", F.row_number().over(last)).where(F.col("_last") == 1)
    final = final.withColumn("pk", pickle_keys(plan.key_serde, source_topic)(F.col("key")))
    stores = [(step.store, encode_objects(state_builder(step), None, step.store, True))]
    if finish is not None and finish.store is not None:
        stores.append((finish.store, encode_objects(result_builder(step, True), None, finish.store, True)))
    for name, encode in stores:
        entry = final.withColumn("pv", encode(F.col("agg")))
        result.append(
            entry.select(
                F.lit("store").alias("kind"), F.lit(name).alias("topic"), F.col("partition").cast("int"),
                F.col("partition").cast("int").alias("task"), F.lit(None).cast("long").alias("seq"),
                F.lit(None).cast("long").alias("ts"), F.col("pk.bytes").alias("key"),
                F.col("pv.bytes").alias("value"),
                F.lit(None).cast("array<struct<key:string,value:binary>>").alias("headers"),
                F.col("pk.text").alias("key_text"), F.col("pv.text").alias("value_text"),
                F.lit(None).cast("long").alias("start"), F.lit(None).cast("long").alias("end"),
            )
        )  # fmt: skip
    return result


def _out_rows(out: Any, topic: str, partitions: int, seq: Any, ts: str) -> Any:
    """Sink rows: a null key's partition goes round robin per task and topic, in the task's order."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    null_keys = Window.partitionBy("partition", F.col("k.bytes").isNull()).orderBy("pos")
    partition = F.coalesce(F.col("k.partition"), ((F.row_number().over(null_keys) - 1) % partitions).cast("int"))
    return out.select(
        F.lit("out").alias("kind"), F.lit(topic).alias("topic"), partition.alias("partition"),
        F.col("partition").cast("int").alias("task"), seq.cast("long").alias("seq"),
        F.col(ts).cast("long").alias("ts"), F.col("k.bytes").alias("key"), F.col("val.bytes").alias("value"),
        F.coalesce(F.col("headers"), F.array().cast("array<struct<key:string,value:binary>>")).alias("headers"),
        F.col("k.text").alias("key_text"), F.col("val.text").alias("value_text"),
        F.lit(None).cast("long").alias("start"), F.lit(None).cast("long").alias("end"),
    )  # fmt: skip


def _stat_rows(plan: CompiledPlan, stats: Any, drops: list[Any]) -> Any:
    """Per task: records processed, dropped (null key or value at an aggregation), the final stream time."""
    from pyspark.sql import functions as F

    if drops:
        dropped = drops[0]
        for more in drops[1:]:
            dropped = dropped.unionByName(more)
        stats = stats.join(
            dropped.groupBy("partition").agg(F.count(F.lit(1)).alias("dropped")), "partition", "left"
        )
    else:
        stats = stats.withColumn("dropped", F.lit(0))
    counters = F.struct(
        F.concat(F.lit(f"{plan.subtopology}_"), F.col("partition").cast("string")).alias("task"),
        F.col("processed"), F.coalesce(F.col("dropped"), F.lit(0)).alias("dropped"), F.col("stream_time"),
        F.lit(0).alias("skipped_deserialization"),
    )  # fmt: skip
    return stats.select(
        F.lit("stat").alias("kind"), F.lit(None).cast("string").alias("topic"), F.col("partition").cast("int"),
        F.col("partition").cast("int").alias("task"), F.lit(None).cast("long").alias("seq"),
        F.lit(None).cast("long").alias("ts"), F.lit(None).cast("binary").alias("key"),
        F.lit(None).cast("binary").alias("value"),
        F.lit(None).cast("array<struct<key:string,value:binary>>").alias("headers"),
        F.lit(None).cast("string").alias("key_text"), F.to_json(counters).alias("value_text"),
        F.lit(None).cast("long").alias("start"), F.lit(None).cast("long").alias("end"),
    )  # fmt: skip
