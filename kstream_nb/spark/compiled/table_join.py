"""A table's records and a stream-table join as Spark columns, as ``KTableSource`` and ``KStreamKTableJoin``
compute them live without a record cache.

A table source drops (and counts) a null key; every other record goes on (``to_stream`` emits it, a delete
as a null value) and its store keeps each key's last value in the task's order, a value that deserializes to
None deleting the key. A stream record joins the table's row as of its own place in that order: the last
table record of its key (by the bytes the store's key serde writes) before it. A stream record with a null
value, or (inner join) a null key, is dropped and counted; a left join joins a null key with no row. The
joined value is ``MergeJoiner``'s dict of both decoded values, written by the stream's JSON serde and parsed
again for the steps after the join; the record keeps the stream record's key, timestamp and headers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from kstream_nb.cluster.serde_specs import serde_from
from kstream_nb.cluster.serdes import Serde
from kstream_nb.processor.value_joiners import MergeJoiner
from kstream_nb.spark.compiled.codec import VALUE_TYPE, encode_objects, recode_values, scalar_udf, store_entry
from kstream_nb.spark.compiled.emit import StageContext
from kstream_nb.spark.compiled.planner import NotCompilable, Table, TableJoin
from kstream_nb.spark.compiled.rekey import NEW_KEY
from kstream_nb.spark.compiled.rows import store_rows
from kstream_nb.spark.compiled.stateless import ValueFields
from kstream_nb.spark.compiled.values import parse_values, value_schema, with_parsed

#: ``_kind`` of a value: a dict, None (a tombstone or dropped stream value), another object, undecodable
DICT, NONE, OTHER, BAD = 0, 1, 2, 3


@dataclass(frozen=True)
class TableRecords:
    """A table's records as its store takes them (``_tk``: its key as the store finds it, ``lookup_keys``), and how
    its values and keys are read."""

    frame: Any
    value_serde: Serde
    store_keys: Serde
    topic: str


def value_kinds(records: Any, serde: Serde, topic: str, dicts: bool) -> Any:
    """``records`` with ``_kind`` (what ``serde`` reads each value as); ``NotCompilable`` when a value does not
    deserialize (the deserialization handler decides live) or, with ``dicts`` (merge_joiner's sides), when a
    value is neither a dict nor None (live, the joiner fails)."""
    from pyspark.sql import functions as F

    def kinds(raw: pa.Array) -> pa.Array:
        out = []
        for data in raw.to_pylist():
            if data is None:
                out.append(NONE)
                continue
            try:
                value = serde.deserialize(topic, data)
            except Exception:
                out.append(BAD)
                continue
            out.append(NONE if value is None else DICT if isinstance(value, dict) else OTHER)
        return pa.array(out, pa.int32())

    records = records.withColumn("_kind", scalar_udf(kinds, "int")(F.col("value"))).localCheckpoint(eager=True)
    refused = [BAD, OTHER] if dicts else [BAD]
    found = {r["_kind"]: r["n"] for r in records.where(F.col("_kind").isin(refused)).groupBy("_kind").count()
             .withColumnRenamed("count", "n").collect()}  # fmt: skip
    if found.get(BAD):
        raise NotCompilable(f"{found[BAD]} value(s) of {topic!r} do not deserialize (the handler decides live)")
    if found.get(OTHER):
        raise NotCompilable(f"{found[OTHER]} value(s) of {topic!r} are not dicts (merge_joiner fails on them)")
    return records


def store_key_serde(ctx: StageContext, store: str) -> Serde:
    spec = getattr(ctx.topology.store_builders[store], "key_serde", None)
    return serde_from(spec) if spec is not None else ctx.config.default_key_serde


def table_rows(
    ctx: StageContext, step: Table, frame: Any, fields: ValueFields
) -> tuple[Any, list[Any], list[Any]]:
    """The records the table forwards, the rows it drops (null keys at a source), its store's final rows; the
    forwarded records carry ``_tk`` when the table has a store."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    if NEW_KEY in frame.columns or fields.ops:
        raise NotCompilable(f"node {step.node!r}: a table of re-keyed or assigned records is not compiled")
    plan, topic = ctx.plan, ctx.source_topic
    keys = plan.key_serde if step.store is None else store_key_serde(ctx, step.store)
    frame = frame.withColumn("_sk", lookup_keys(plan.key_serde, keys, topic)(F.col("key")))
    frame = frame.withColumn("_tk", F.col("_sk.tk"))  # null when the key (or what its serde reads) is None
    drops = []
    if step.source:
        drops.append(frame.where(F.col("_tk").isNull()).select("partition"))
        frame = frame.where(F.col("_tk").isNotNull())
    if step.store is None:
        return frame, drops, []
    mixed = frame.groupBy("partition", "_tk").agg(F.count_distinct("_sk.bytes").alias("n")).where("n > 1")
    if mixed.limit(1).count():  # the store's dict keeps the key object it took first: not followed here
        raise NotCompilable(f"node {step.node!r}: keys of one entry read as different values (1, 1.0, true)")
    last = Window.partitionBy("partition", "_tk").orderBy(F.col("pos").desc())
    kept = frame.withColumn("_last", F.row_number().over(last)).where(
        (F.col("_last") == 1) & (F.col("_kind") != NONE)
    )
    serde = plan.value_serde
    values = encode_objects(lambda row: serde.deserialize(topic, row["raw"]), None, step.store, True)
    kept = kept.withColumn("pk", F.struct(F.col("_sk.bytes").alias("bytes"), F.col("_sk.text").alias("text")))
    kept = kept.withColumn("pv", values(F.struct(F.col("value").alias("raw"))))
    return frame, drops, [store_rows(kept, step.store, False)]


def join_rows(
    ctx: StageContext, step: TableJoin, frame: Any, fields: ValueFields, table: TableRecords, after: set[str]
) -> tuple[Any, dict[str, str], Any]:
    """The joined records (values parsed for the fields ``after`` reads), those fields' types, the rows
    dropped."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    if NEW_KEY in frame.columns:
        raise NotCompilable(f"node {step.node!r}: a join of re-keyed records is not compiled")
    plan, topic = ctx.plan, ctx.source_topic
    keys = lookup_keys(plan.key_serde, table.store_keys, topic)
    frame = frame.withColumn("_tk", keys(F.col("key"))["tk"])  # null: no key to look up
    valid = F.col("_kind") != NONE
    if not step.left:
        valid = valid & F.col("_tk").isNotNull()
    dropped = frame.where(~valid).select("partition")
    stream = frame.where(valid)
    if fields.ops:  # the value as the steps before the join left it
        recode = recode_values(plan.value_serde, plan.value_serde, (topic, topic), fields.ops, False)
        stream = stream.withColumn("value", recode(F.col("value"), fields.assigned_struct())["bytes"])
    columns = ["partition", "pos", "ts", "key", "value", "headers", "offset", "topic"]
    stream = stream.select(*columns, "_tk", F.lit(False).alias("_table"))
    rows = table.frame.select(
        "partition", "pos", "_tk", F.struct(F.col("value"), (F.col("_kind") == NONE).alias("gone")).alias("_row"),
        F.lit(True).alias("_table"),
    )  # fmt: skip
    before = Window.partitionBy("partition", "_tk").orderBy("pos").rowsBetween(Window.unboundedPreceding, 0)
    both = stream.unionByName(rows, allowMissingColumns=True)
    both = both.withColumn("_row", F.last(F.col("_row"), ignorenulls=True).over(before)).where(~F.col("_table"))
    found = F.col("_row").isNotNull() & ~F.col("_row.gone")
    if not step.left:
        both = both.where(found)
    merge = _merge(step.joiner, plan.value_serde, table.value_serde, (topic, table.topic))
    joined = both.withColumn("value", merge(F.col("value"), F.when(found, F.col("_row.value"))))
    joined = with_parsed(joined.select(*columns).withColumn("_kind", F.lit(DICT)))
    joined = joined.localCheckpoint(eager=True)
    schema = value_schema(joined, after) if after else {}
    return parse_values(joined, schema), schema, dropped


def _merge(joiner: MergeJoiner, left: Serde, right: Serde, topics: tuple[str, str]) -> Any:
    """A UDF of (stream value bytes, table value bytes or null) -> the joiner's dict written by ``left``."""
    stream_topic, table_topic = topics

    def run(values: pa.Array, rows: pa.Array) -> pa.Array:
        out = []
        for data, row in zip(values.to_pylist(), rows.to_pylist()):
            found = None if row is None else right.deserialize(table_topic, row)
            out.append(left.serialize(stream_topic, joiner(left.deserialize(stream_topic, data), found)))
        return pa.array(out, pa.binary())

    return scalar_udf(run, "binary")


def lookup_keys(decode: Serde, store: Serde, topic: str) -> Any:
    """A UDF of raw key bytes -> the key as a store with key serde ``store`` holds it (``canonical_key``):
    pickled (``bytes``) with its JSON ``text``, and ``tk``: its ``codec.store_entry`` (equal exactly when two
    keys are one entry of the store's dict); all null for a null key."""
    canonical = store.canonical_key()

    def run(raw: pa.Array) -> pa.Array:
        import pyarrow.compute as pc
        from pyspark import cloudpickle

        from kstream_nb.spark.replay import to_text

        distinct = pc.unique(raw)
        pickled, texts, entries = [], [], []
        for data in distinct.to_pylist():
            key = None if data is None else decode.deserialize(topic, data)
            if key is not None and canonical is not None:
                key = canonical(key)
            pickled.append(None if key is None else cloudpickle.dumps(key))
            texts.append(to_text(key))
            entries.append(store_entry(key))
        out = pa.StructArray.from_arrays(
            [pa.array(pickled, pa.binary()), pa.array(texts, pa.string()), pa.array(entries, pa.binary())],
            names=["bytes", "text", "tk"],
        )
        return pc.take(out, pc.index_in(raw, value_set=distinct))

    return scalar_udf(run, VALUE_TYPE + ", tk binary")
