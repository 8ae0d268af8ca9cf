"""A windowed stream-stream join on the key (planned by ``stream_join``) as one Spark join of the task's
records with themselves, as ``KStreamKStreamJoinSide`` computes it live.

Live, each record (in the task's processing order over both topics) with a key and a value is put in its
side's window store, then joins the other side's records of its key with timestamps in ``[ts - before,
ts + after]`` (``[ts - after, ts + before]`` on the right side) that the other store still returns: those
after the other store's observed stream time minus ``before + after + grace``. The store's own expiry and
its dropping of too-old puts keep more than that (its retention is longer), so they never decide a match;
only the final stores show them. Results come in the store's fetch order (by timestamp, then arrival), with
the later timestamp of the two and the arriving record's key and headers; a null key or value is dropped
and counted. The stateless steps before a side make the values the store keeps and the joiner joins. An
outer side (eager null results) joins a record that finds nothing, or has no key, with None at once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pyarrow as pa

from kstream_nb.cluster.serdes import Serde
from kstream_nb.processor.value_joiners import MergeJoiner
from kstream_nb.spark.compiled.codec import (
    VALUE_TYPE,
    ValueOp,
    pickle_keys,
    recode_keys,
    replay_ops,
    scalar_udf,
    store_entry,
    value_struct,
)
from kstream_nb.spark.compiled.ordering import processing_order
from kstream_nb.spark.compiled.planner import Branch, NotCompilable
from kstream_nb.spark.compiled.rows import out_rows, stat_rows, store_rows
from kstream_nb.spark.compiled.stateless import ValueFields, apply_stateless
from kstream_nb.spark.compiled.stream_join import JoinSide, StreamJoinPlan
from kstream_nb.spark.compiled.values import parse_values, value_schema, with_parsed

__all__ = ["run_stream_join"]

#: a JSON value that orjson reads as None (whitespace around ``null``): live, a null value
_JSON_NULL = r"^[ \t\n\r]*null[ \t\n\r]*$"


def run_stream_join(
    plan: StreamJoinPlan,
    frame: Any,
    resolve: Callable[[str], str],
    counts: Mapping[str, int],
    written: set[str],
    sink_serdes: Mapping[str, tuple[Serde, Serde]],
) -> Any:
    """The stage's output rows (``replay.OUT_DDL``): the join's results, both window stores, the counters."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    left, right, joiner = plan.left, plan.right, plan.joiner
    assert left is not None and right is not None and joiner is not None
    topics = {True: [resolve(t) for t in left.topics], False: [resolve(t) for t in right.topics]}
    ordered = processing_order(frame, topics[True] + topics[False], written).localCheckpoint(eager=True)
    invalid = ordered.where(F.col("value").isNotNull() & F.try_parse_json(F.col("value").cast("string")).isNull())
    if invalid.limit(1).count():
        raise NotCompilable("values that are not valid JSON (the deserialization handler decides)")
    stats = ordered.groupBy("partition").agg(
        F.count(F.lit(1)).alias("processed"), F.max("ts").alias("stream_time")
    )
    per_side, ops = [], {}
    for is_left, side in ((True, left), (False, right)):
        canonical = _store_keys(side.key_serde, topics[is_left][0])
        rows = ordered.where(F.col("topic").isin(topics[is_left])).withColumn("left", F.lit(is_left))
        rows = rows.withColumn("outer", F.lit(side.outer))
        rows, assigned, ops[is_left] = _stateless(rows, side)
        rows = rows.withColumn("a_left" if is_left else "a_right", assigned)
        per_side.append(rows.withColumn("gk", canonical(F.col("key"))))
    columns = ["partition", "pos", "ts", "key", "value", "headers", "left", "outer", "gk", "a_left", "a_right"]
    for i, other in ((0, "a_right"), (1, "a_left")):  # each side's assigned fields: null on the other side's
        per_side[i] = per_side[i].withColumn(other, F.lit(None).cast(per_side[1 - i].schema[other].dataType))
    records = per_side[0].select(*columns).unionByName(per_side[1].select(*columns))
    null_value = F.col("value").isNull() | F.col("value").cast("string").rlike(_JSON_NULL)
    valid = F.col("gk").isNotNull() & ~null_value
    # KIP-962: an outer side forwards a record without a key (with a value) joined with None, at once
    padded = F.col("outer") & F.col("gk").isNull() & ~null_value
    dropped = records.where(~valid & ~padded).select("partition")
    earlier = Window.partitionBy("partition").orderBy("pos").rowsBetween(Window.unboundedPreceding, -1)
    kept = records.where(valid)
    for is_left, column in ((True, "obs_left"), (False, "obs_right")):
        kept = kept.withColumn(column, F.max(F.when(F.col("left") == is_left, F.col("ts"))).over(earlier))
    kept = kept.localCheckpoint(eager=True)

    outputs = [stat_rows(plan.subtopology, stats, [dropped])]
    for is_left, side in ((True, left), (False, right)):
        outputs.append(
            _store(kept.where(F.col("left") == is_left), side, topics[is_left][0], ops[is_left], is_left)
        )
    if plan.sink is not None:
        outputs.append(_results(plan, kept, records.where(padded), topics, ops, resolve, counts, sink_serdes))
    result = outputs[0]
    for more in outputs[1:]:
        result = result.unionByName(more)
    return result


def _results(
    plan: StreamJoinPlan,
    kept: Any,
    keyless: Any,
    topics: dict[bool, list[str]],
    ops: dict[bool, list[ValueOp]],
    resolve: Callable[[str], str],
    counts: Mapping[str, int],
    sink_serdes: Mapping[str, tuple[Serde, Serde]],
) -> Any:
    """Each arriving record joined with the other side's earlier records its lookup still finds, in the task's
    order, then the store's fetch order (timestamp, arrival): the sink's rows. An outer side's record that finds
    none, and its ``keyless`` records, are joined with None at once (``JoinWindows(eager_null_results=True)``)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    left, right, joiner, sink = plan.left, plan.right, plan.joiner, plan.sink
    assert left is not None and right is not None and joiner is not None and sink is not None
    t = kept.alias("t")
    o = kept.select("partition", "gk", "left", "pos", "ts", "value", "a_left", "a_right").alias("o")
    this_left = F.col("t.left")
    low = F.greatest(F.lit(0), F.col("t.ts") - F.when(this_left, left.before_ms).otherwise(right.before_ms))
    high = F.greatest(F.lit(0), F.col("t.ts") + F.when(this_left, left.after_ms).otherwise(right.after_ms))
    other_time = F.coalesce(F.when(this_left, F.col("t.obs_right")).otherwise(F.col("t.obs_left")), F.lit(-1))
    condition = (
        (F.col("t.partition") == F.col("o.partition"))
        & (F.col("t.gk") == F.col("o.gk"))
        & (F.col("t.left") != F.col("o.left"))
        & (F.col("o.pos") < F.col("t.pos"))
        & F.col("o.ts").between(low, high)
        & (F.col("o.ts") > other_time - plan.lookup_ms)
    )
    joined = t.join(o, condition).select(
        F.col("t.partition").alias("partition"), F.col("t.pos").alias("pos"), F.col("o.ts").alias("other_ts"),
        F.col("o.pos").alias("other_pos"), F.greatest(F.col("t.ts"), F.col("o.ts")).alias("ts"),
        F.col("t.key").alias("key"), F.col("t.headers").alias("headers"), this_left.alias("left"),
        F.when(this_left, F.col("t.value")).otherwise(F.col("o.value")).alias("left_value"),
        F.when(this_left, F.col("t.a_left")).otherwise(F.col("o.a_left")).alias("left_assigned"),
        F.when(this_left, F.col("o.value")).otherwise(F.col("t.value")).alias("right_value"),
        F.when(this_left, F.col("o.a_right")).otherwise(F.col("t.a_right")).alias("right_assigned"),
    )  # fmt: skip
    unmatched = kept.where("outer").join(
        joined.select("partition", "pos").distinct(), ["partition", "pos"], "left_anti"
    )
    alone = unmatched.select(*keyless.columns).unionByName(keyless).select(
        "partition", "pos", F.lit(-1).alias("other_ts"), F.lit(-1).alias("other_pos"), "ts", "key", "headers",
        "left",
        F.when(F.col("left"), F.col("value")).alias("left_value"), F.col("a_left").alias("left_assigned"),
        F.when(~F.col("left"), F.col("value")).alias("right_value"), F.col("a_right").alias("right_assigned"),
    )  # fmt: skip
    joined = joined.unionByName(alone)
    fetch_order = Window.partitionBy("partition").orderBy("pos", "other_ts", "other_pos")
    joined = joined.withColumn("jseq", F.row_number().over(fetch_order) - 1)
    topic = resolve(sink.topic)
    text = topic in sink_serdes
    partitions = counts.get(topic, 1)
    values = _join_values(
        (left.value_serde, right.value_serde), (topics[True][0], topics[False][0], topic), (ops[True], ops[False]),
        joiner, sink.value_serde, text,
    )  # fmt: skip
    sides = []
    for is_left, side in ((True, left), (False, right)):
        keys = recode_keys(side.key_serde, sink.key_serde, (topics[is_left][0], topic), partitions, text)
        sides.append(joined.where(F.col("left") == is_left).withColumn("k", keys(F.col("key"))))
    out = sides[0].unionByName(sides[1])
    sides_values = ("left_value", "left_assigned", "right_value", "right_assigned")
    out = out.withColumn("val", values(*(F.col(c) for c in sides_values)))
    return out_rows(out, topic, partitions, F.col("jseq"), "ts")


def _store(records: Any, side: JoinSide, topic: str, ops: list[ValueOp], is_left: bool) -> Any:
    """The side's window store at the end: its records after its stream time minus the store's retention."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    task = Window.partitionBy("partition")
    entries = records.withColumn("_time", F.max("ts").over(task))
    entries = entries.where(F.col("ts") > F.col("_time") - side.store_retention_ms)
    entries = entries.withColumn("pk", pickle_keys(side.key_serde, topic)(F.col("key")))
    assigned = F.col("a_left" if is_left else "a_right")
    entries = entries.withColumn("pv", _pickle_values(side.value_serde, topic, ops)(F.col("value"), assigned))
    entries = entries.withColumn("start", F.col("ts")).withColumn("end", F.col("ts"))
    return store_rows(entries, side.store, True)


def _join_values(
    decode: tuple[Serde, Serde], topics: tuple[str, str, str], ops: tuple[list[ValueOp], list[ValueOp]],
    joiner: MergeJoiner, encode: Serde, text: bool,
) -> Any:  # fmt: skip
    """A UDF of (left value bytes, its assigned fields, right value bytes, its assigned fields) -> the joiner's
    value as ``encode`` writes it, its text; each side's value decoded and its stateless ``ops`` replayed."""
    left_topic, right_topic, target = topics

    def run(lefts: pa.Array, left_fields: pa.Array, rights: pa.Array, right_fields: pa.Array) -> pa.Array:
        from kstream_nb.spark.replay import to_text

        out_bytes: list[bytes | None] = []
        out_text: list[str | None] = []
        pairs = zip(lefts.to_pylist(), left_fields.to_pylist(), rights.to_pylist(), right_fields.to_pylist())
        for left, left_assigned, right, right_assigned in pairs:
            value = joiner(
                replay_ops(decode[0].deserialize(left_topic, left), ops[0], left_assigned),
                replay_ops(decode[1].deserialize(right_topic, right), ops[1], right_assigned),
            )
            out_bytes.append(encode.serialize(target, value))
            out_text.append(to_text(value) if text else None)
        return value_struct(out_bytes, out_text)

    return scalar_udf(run, VALUE_TYPE)


def _pickle_values(decode: Serde, topic: str, ops: list[ValueOp]) -> Any:
    """A UDF of (value bytes, assigned fields) -> (the value as the store holds it, pickled; its JSON text)."""

    def run(raw: pa.Array, assigned: pa.Array) -> pa.Array:
        from pyspark import cloudpickle

        from kstream_nb.spark.replay import to_text

        pairs = zip(raw.to_pylist(), assigned.to_pylist())
        values = [replay_ops(decode.deserialize(topic, v), ops, fields) for v, fields in pairs]
        return value_struct([cloudpickle.dumps(v) for v in values], [to_text(v) for v in values])

    return scalar_udf(run, VALUE_TYPE)


def _stateless(rows: Any, side: JoinSide) -> tuple[Any, Any, list[ValueOp]]:
    """The side's records through its stateless steps: the records kept, their assigned fields (a struct
    column) and the operations that rebuild their values (``codec.replay_ops``)."""
    from pyspark.sql import functions as F

    if not side.steps:
        return rows, F.struct(F.lit(None).alias("_none")), []
    rows = with_parsed(rows)
    schema = value_schema(rows, Branch(list(side.steps)).fields())
    fields = ValueFields(schema)
    rows = apply_stateless(parse_values(rows, schema), list(side.steps), fields)
    return rows, fields.assigned_struct(), fields.ops


def _store_keys(decode: Serde, topic: str) -> Any:
    """A UDF of raw key bytes -> ``codec.store_entry`` of the decoded key: equal exactly when the store's dict
    finds one entry for both keys; null for a null key."""

    def run(raw: pa.Array) -> pa.Array:
        import pyarrow.compute as pc

        distinct = pc.unique(raw)
        keys = [None if k is None else store_entry(decode.deserialize(topic, k)) for k in distinct.to_pylist()]
        return pc.take(pa.array(keys, pa.binary()), pc.index_in(raw, value_set=distinct))

    return scalar_udf(run, "binary")
