"""What an aggregation sends downstream and keeps: its updates (or, emitting on close, its final windows) as
sink rows, and its stores' final entries, as ``KStreamAggregate``/``KStreamWindowAggregate`` and the table
``map_values`` of a named aggregation leave them."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kstream_nb.cluster.serde_specs import serde_from
from kstream_nb.cluster.serdes import JsonSerde, Serde
from kstream_nb.runtime.config import StreamsConfig
from kstream_nb.spark.compiled.aggregate import json_in_spark, result_builder, running_aggregates, state_builder
from kstream_nb.spark.compiled.codec import (
    encode_objects,
    pickle_keys,
    recode_keys,
    recode_windowed_keys,
    with_key_codecs,
)
from kstream_nb.spark.compiled.planner import Aggregate, Branch, CompiledPlan, Finish, Sink, Suppress
from kstream_nb.spark.compiled.rows import out_columns, out_rows, rows_of, store_columns, store_rows
from kstream_nb.spark.compiled.stateless import ValueFields
from kstream_nb.spark.compiled.suppress import buffer_rows, suppressed_windows, with_previous
from kstream_nb.spark.compiled.windows import assign_windows, closed_windows, store_visible, windows_per_record
from kstream_nb.topology.topology import Topology


@dataclass
class StageContext:
    """What every branch of a stage shares: the plan, the topology and app settings, topic names and sizes."""

    plan: CompiledPlan
    topology: Topology
    config: StreamsConfig
    resolve: Callable[[str], str]
    counts: Mapping[str, int]
    sink_serdes: Mapping[str, tuple[Serde, Serde]]
    source_topic: str


def aggregate_rows(
    ctx: StageContext, branch: Branch, index: int, records: Any, fields: ValueFields, stores_too: bool
) -> tuple[list[Any], Any]:
    """The branch's sink rows (and, with ``stores_too``, its stores' rows), and the rows it drops."""
    from pyspark.sql import functions as F

    step = branch.aggregate
    assert step is not None
    plan = ctx.plan
    builder = ctx.topology.store_builders[step.store]
    spec = getattr(builder, "key_serde", None)
    store_keys = serde_from(spec) if spec is not None else ctx.config.default_key_serde
    grouped = recode_keys(plan.key_serde, store_keys, (ctx.source_topic, ctx.source_topic), 1, False)
    codecs: dict[str, tuple[Any, str | None]] = {"gk": (grouped, "bytes")}
    sink = branch.sink
    if sink is not None and step.windows is None:
        topic = ctx.resolve(sink.topic)
        keys = recode_keys(
            plan.key_serde, sink.key_serde, (ctx.source_topic, topic), ctx.counts.get(topic, 1),
            topic in ctx.sink_serdes,
        )  # fmt: skip
        codecs["k"] = (keys, None)
    if stores_too:
        codecs["pk"] = (pickle_keys(plan.key_serde, ctx.source_topic), None)
    if step.windows is None:
        valid = F.col("key").isNotNull() & F.col("value").isNotNull()
        dropped = records.where(~valid).select("partition")
        records = with_key_codecs(records.where(valid), codecs)
        updates = running_aggregates(records, step, fields, ["partition", "gk"])
        seq = F.col("pos") * len(plan.branches) + index
    else:
        null_keys = records.where(F.col("key").isNull()).select("partition")
        records = records.where(F.col("key").isNotNull())
        if step.specs is not None:  # live, the named aggregator fails on a null value
            error = F.raise_error(F.lit(f"agg needs dict values, got None (node {step.node!r})"))
            records = records.where(F.when(F.col("value").isNull(), error).otherwise(F.lit(True)))
        windowed = assign_windows(with_key_codecs(records, codecs), step)
        dropped = null_keys.unionByName(windowed.where(F.col("late")).select("partition"))
        updates = running_aggregates(windowed.where(~F.col("late")), step, fields, ["partition", "gk", "start"])
        per_record = windows_per_record(step)
        seq = (F.col("pos") * len(plan.branches) + index) * per_record + F.col("widx")
    window_columns = ["start", "end"] if step.windows is not None else []
    updates = updates.select(
        "partition", "key", *codecs, "pos", "headers", "agg", "agg_ts", "final", seq.alias("seq"), *window_columns
    )
    suppress = next((s for s in branch.steps if isinstance(s, Suppress)), None)
    finish = next((s for s in branch.steps if isinstance(s, Finish)), None)
    if step.windows is None:
        return _keyed_rows(ctx, step, sink, finish, updates, fields, stores_too), dropped
    if stores_too and (branch.sink is not None or step.emit_final or suppress is not None):
        updates = updates.localCheckpoint(eager=True)  # computed once: read for the sink and for the stores
    sent = updates
    if step.emit_final:
        sent = closed_windows(updates, windowed, step)
    if suppress is not None:  # each window's final update, released by suppress (``suppress``)
        final = suppressed_windows(with_previous(updates), windowed, step, plan.key_serde, ctx.source_topic)
        sent = final.where(F.col("emit_pos").isNotNull())
    result: list[Any] = []
    if sink is not None:
        topic = ctx.resolve(sink.topic)
        text = topic in ctx.sink_serdes
        partitions = ctx.counts.get(topic, 1)
        keys = recode_windowed_keys(
            plan.key_serde, sink.key_serde, (ctx.source_topic, topic), partitions, sink.partitioner, text
        )
        out = sent.withColumn("k", keys(F.col("key"), F.col("start"), F.col("end")))
        out = out.withColumn("val", _sink_values(ctx, step, sink, finish, fields))
        result.append(out_rows(out, topic, partitions, F.col("seq"), "agg_ts", null_keys=False))
    if stores_too:
        result.extend(_store_entries(ctx, step, finish, updates, updates if suppress is not None else sent))
        if suppress is not None:
            result.append(buffer_rows(ctx, step, suppress, final, finish))
    return result, dropped


def _sink_values(
    ctx: StageContext, step: Aggregate, sink: Sink, finish: Finish | None, fields: ValueFields
) -> Any:
    """The (bytes, text) of each result the sink writes: by Spark when its JSON equals the serde's, else by
    the sink's serde in a UDF."""
    from pyspark.sql import functions as F

    topic = ctx.resolve(sink.topic)
    text = topic in ctx.sink_serdes
    fast = json_in_spark(step, fields) if type(sink.value_serde) is JsonSerde else None
    if fast is None:
        values = encode_objects(result_builder(step, finish is not None), sink.value_serde, topic, text)
        return values(F.col("agg"))
    text_column = fast.cast("string") if text else F.lit(None).cast("string")
    return F.struct(fast.alias("bytes"), text_column.alias("text"))


def _keyed_rows(
    ctx: StageContext, step: Aggregate, sink: Sink | None, finish: Finish | None, updates: Any,
    fields: ValueFields, stores_too: bool,
) -> list[Any]:  # fmt: skip
    """Per key (no windows), in one pass over the updates: each update's sink row, and with ``stores_too``
    the store entries of each key's last update (the aggregation's, and the finished table's if any)."""
    from pyspark.sql import functions as F

    kinds: list[tuple[Any, list[Any]]] = []
    frame, last = updates, F.col("final")
    if sink is not None:
        frame = frame.withColumn("val", _sink_values(ctx, step, sink, finish, fields))
        kinds.append((None, out_columns(ctx.resolve(sink.topic), F.col("k.partition"), F.col("seq"), "agg_ts")))
    if stores_too:
        state = encode_objects(state_builder(step), None, step.store, True)
        frame = frame.withColumn("pv", state(F.when(last, F.col("agg"))))
        kinds.append((last, store_columns(step.store, False, "pk", "pv")))
        if finish is not None and finish.store is not None:
            finished = encode_objects(result_builder(step, True), None, finish.store, True)
            frame = frame.withColumn("fv", finished(F.when(last, F.col("agg"))))
            kinds.append((last, store_columns(finish.store, False, "pk", "fv")))
    return [rows_of(frame, kinds)] if kinds else []


def _store_entries(
    ctx: StageContext, step: Aggregate, finish: Finish | None, updates: Any, sent: Any
) -> list[Any]:
    """A windowed aggregation's store at the end of the input, and the finished table's (what it was sent)."""
    from pyspark.sql import functions as F

    plan = ctx.plan
    state = encode_objects(state_builder(step), None, step.store, True)
    kept = store_visible(updates, step)
    result = [store_rows(kept.withColumn("pv", state(F.col("agg"))), step.store, True)]
    if finish is not None and finish.store is not None:
        finished = sent.where(F.col("final")).withColumn(
            "pv", encode_objects(result_builder(step, True), None, finish.store, True)(F.col("agg"))
        )
        windowed = recode_windowed_keys(plan.key_serde, None, (ctx.source_topic, ""), 1, None, True)
        finished = finished.withColumn("pk", windowed(F.col("key"), F.col("start"), F.col("end")))
        result.append(store_rows(finished, finish.store, False))
    return result
