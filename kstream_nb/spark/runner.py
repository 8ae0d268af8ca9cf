"""The backtest driver: a topology replayed over the history of its input topics on Spark, as the live run.

How it runs (one Spark job per sub-topology, in dependency order):

1. The user topics the topology reads: Kafka topics with the ``kstream`` data source; Parquet archives and
   ``memory://`` topics (snapshotted to Parquet in the driver first: Spark's workers cannot see the
   embedded cluster) with Spark's own Parquet reader (``source.read_history``).
2. A sub-topology's input records are grouped by partition number across its source topics
   (``groupBy("partition").applyInArrow``): one group = one task, exactly as the live assignor makes them.
3. In the worker the (cloudpickled) topology builds a fresh ``StreamTask`` for that partition, which
   processes the records in the live runtime's order: lowest timestamp first across the task's
   partitions, offset order within one. Every record the task writes is kept with the partition its
   sink chose (murmur2 of the key bytes, or the sink's partitioner); the stores are read at the end.
4. Records written to a repartition topic are the input of the sub-topologies that read it: grouping
   them by their target partition is the Spark shuffle. Several upstream tasks write one partition;
   their records are merged lowest timestamp first, each task's own order kept.
5. Sub-topologies that feed each other in a cycle (a foreign-key join: subscriptions one way, responses
   back) run to a fixpoint: each member is re-run from fresh state over its user inputs plus everything
   the other members' latest runs wrote to it, until no member's writes to the cycle's topics change
   (compared by a digest). A re-run, not an increment, so that each task again sees all its records
   lowest timestamp first: a response is processed after the left-table update that caused it and
   before later ones, as live. A foreign-key join settles in three runs (left, right, left again).

Differences from a live run, by design:

- Order across partitions: live, a task picks the lowest timestamp among the records it has *fetched*;
  the backtest has all of them, so its order is the one a live run gets when every partition's data is
  available (a topic produced long after another one is processed later live, earlier here if its
  timestamps are older).
- Interleaving of several writers of one partition: live, thread scheduling decides it; here the merge
  by timestamp. Each writer's own order is the same, so per-key results are the same.
- Time: stream-time punctuators fire (checked after every record, as the ``TopologyTestDriver``);
  wall-clock punctuators never fire (there is no wall clock in a replay).
- Records with a null key and no partitioner go round-robin per task (live: per producer).
- Equal timestamps in one task: records of user topics come before records this backtest wrote
  (repartition, subscription, response topics), since live those exist only after their cause ran.
- An output topic that does not exist on the cluster gets 1 partition (``output_partitions`` overrides).
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Mapping
from typing import Any

import pandas as pd

from kstream_nb.cluster.connection import connect
from kstream_nb.cluster.export import archive_info, read_archive
from kstream_nb.cluster.records import TopicPartition
from kstream_nb.errors import StreamsError
from kstream_nb.runtime.assignor import StreamsPartitionAssignor
from kstream_nb.runtime.config import StreamsConfig
from kstream_nb.spark.compiled import EngineChoice
from kstream_nb.spark.replay import OUT_DDL, StagePlan, arrow_schema, stage_function
from kstream_nb.spark.result import BacktestOutput, BacktestResult, BacktestStore
from kstream_nb.spark.session import spark_session
from kstream_nb.spark.source import read_history, to_epoch_ms
from kstream_nb.state.builders import WindowStoreBuilder
from kstream_nb.topology.naming import changelog_topic
from kstream_nb.topology.topology import SinkSpec, SubTopology, Topology

OUTPUT_DDL = (
    "partition int, offset long, timestamp timestamp, key string, value string, "
    "headers array<struct<key:string,value:binary>>, task int, key_bytes binary, value_bytes binary"
)


#: how many passes over a cycle's sub-topologies a backtest makes before it gives up (see ``_run_cycle``)
MAX_CYCLE_PASSES = 32


def stage_order(topology: Topology, resolve: Callable[[str], str]) -> list[list[SubTopology]]:
    """Groups of sub-topologies in dependency order: a group is one sub-topology, or the members of a
    cycle (sub-topologies that feed each other, e.g. a foreign-key join's two sides), run to a fixpoint."""
    subs = topology.subtopologies()
    writers: dict[str, set[int]] = {}
    for sub in subs:
        for topic in sub.sink_topics:
            writers.setdefault(resolve(topic), set()).add(sub.id)
    feeds = {s.id: {w for t in s.source_topics for w in writers.get(resolve(t), ())} for s in subs}
    reach: dict[int, set[int]] = {}
    for sub in subs:  # every sub-topology whose writes reach ``sub``, directly or through others
        seen: set[int] = set()
        todo = list(feeds[sub.id])
        while todo:
            upstream = todo.pop()
            if upstream not in seen:
                seen.add(upstream)
                todo.extend(feeds[upstream])
        reach[sub.id] = seen
    by_id = {s.id: s for s in subs}
    groups: list[list[SubTopology]] = []
    grouped: set[int] = set()
    for sub in subs:
        if sub.id in grouped:
            continue
        members = sorted({sub.id} | {o for o in reach[sub.id] if sub.id in reach[o]})
        groups.append([by_id[m] for m in members])
        grouped.update(members)
    upstream_of = {i: set().union(*(reach[m.id] for m in group)) for i, group in enumerate(groups)}
    deps = {
        i: {j for j, other in enumerate(groups) if j != i and any(m.id in upstream_of[i] for m in other)}
        for i in range(len(groups))
    }
    done: list[list[SubTopology]] = []
    placed: set[int] = set()
    while len(done) < len(groups):
        ready = [i for i in range(len(groups)) if i not in placed and deps[i] <= placed]
        done.extend(groups[i] for i in ready)
        placed.update(ready)
    return done


def is_cycle(group: list[SubTopology], resolve: Callable[[str], str]) -> bool:
    """Whether a group from ``stage_order`` must run to a fixpoint (several members, or one reading itself)."""
    if len(group) > 1:
        return True
    sub = group[0]
    return bool({resolve(t) for t in sub.sink_topics} & {resolve(t) for t in sub.source_topics})


def backtest(
    topology: Topology,
    spark: Any = None,
    bootstrap_servers: str = "memory://",
    start: Any = None,
    end: Any = None,
    application_id: str = "backtest",
    archives: Mapping[str, str] | None = None,
    output_partitions: Mapping[str, int] | None = None,
    progress: Callable[[str], None] | None = None,
    client_config: Mapping[str, Any] | None = None,
    engine: str = "auto",
    **config: Any,
) -> BacktestResult:
    """Replays ``topology`` on Spark over its input topics' history; see the module doc.

    ``start``/``end``: keep input records with ``start <= timestamp < end`` (epoch ms, ISO date-time or
    datetime; None = all). ``archives``: topic -> Parquet archive (``export_topic``) to read instead of
    the cluster. ``progress(message)`` is called as the stages run. Other keyword arguments are app
    settings (``default_key_serde``, ``default_timestamp_extractor``, ...), as for ``KafkaStreams``.
    ``engine``: "auto" (a Spark plan for each sub-topology that compiles, the replay for the rest),
    "compiled" (fails naming what does not compile) or "replay"; ``result.explain()`` says which ran.
    """
    started = time.perf_counter()
    say = progress or (lambda message: None)
    if not isinstance(topology, Topology):
        raise TypeError(f"backtest needs a Topology (builder.build()), got {type(topology).__name__}")
    topology.validate()
    spark = spark if spark is not None else spark_session()
    archives = dict(archives or {})
    settings = {"application_id": application_id, "bootstrap_servers": bootstrap_servers, **config}
    if client_config:
        settings["client_config"] = dict(client_config)
    streams_config = StreamsConfig.of(**settings)
    resolve = lambda t: f"{application_id}-{t}" if topology.is_internal(t) else t  # noqa: E731
    groups = stage_order(topology, resolve)
    order = [sub for group in groups for sub in group]
    written = {resolve(t) for s in order for t in s.sink_topics}
    user_inputs = sorted({resolve(t) for s in order for t in s.source_topics} - written)
    global_topics = sorted({spec.topic for spec in topology.global_stores.values()})
    needs_cluster = any(t not in archives for t in [*user_inputs, *global_topics]) or any(
        t not in (output_partitions or {}) and not topology.is_internal(t) for s in order for t in s.sink_topics
    )
    admin = connect(bootstrap_servers, client_config).admin() if needs_cluster else None

    # ---- partition counts, as the live assignor computes them ----------------------------------------
    known: dict[str, int] = {}
    for topic in user_inputs:
        if topic in archives:
            known[topic] = int(archive_info(archives[topic])["partitions"])
            continue
        assert admin is not None
        count = admin.partition_count(topic)
        if count is None:
            raise StreamsError(f"cannot backtest: input topic {topic!r} does not exist on {bootstrap_servers}")
        known[topic] = count
    counts = StreamsPartitionAssignor(topology, application_id, admin).partition_counts(known)  # type: ignore[arg-type]
    sink_serdes = {}
    for spec in topology.node_specs.values():
        if isinstance(spec, SinkSpec) and not topology.is_internal(spec.topic):
            sink_serdes[spec.topic] = (
                spec.key_serde or streams_config.default_key_serde,
                spec.value_serde or streams_config.default_value_serde,
            )
            if spec.topic not in counts:
                override = (output_partitions or {}).get(spec.topic)
                existing = admin.partition_count(spec.topic) if override is None and admin is not None else None
                counts[spec.topic] = override or existing or 1
    changelogs = frozenset(changelog_topic(application_id, store) for store in topology.store_builders)
    global_records = _global_records(topology, bootstrap_servers, archives, client_config)

    # ---- input records -------------------------------------------------------------------------------
    from pyspark.sql import functions as F

    snapshot_dir = tempfile.mkdtemp(prefix="kstream-nb-backtest-")
    inputs: dict[str, Any] = {}
    for topic in user_inputs:
        say(f"reading {topic!r} ({known[topic]} partitions)")
        df = read_history(
            spark, topic, bootstrap_servers=bootstrap_servers, start=to_epoch_ms(start, "start"),
            end=to_epoch_ms(end, "end"), path=archives.get(topic), client_config=client_config,
            snapshot_dir=snapshot_dir,
        )  # fmt: skip
        inputs[topic] = df.select(
            "topic", "partition", "offset", F.expr("unix_micros(timestamp) div 1000").alias("ts"),
            "key", "value", "headers", F.lit(-1).alias("writer"), F.col("offset").alias("seq"),
        )  # fmt: skip

    # ---- the stages ----------------------------------------------------------------------------------
    cyclic = [group for group in groups if is_cycle(group, resolve)]
    choice = EngineChoice(engine, topology, order, {s.id for g in cyclic for s in g}, streams_config, resolve)
    for topic in {resolve(t) for group in cyclic for sub in group for t in sub.source_topics} & set(inputs):
        # a cycle's members read their inputs once per run: pin them (a broker's topic may grow meanwhile)
        inputs[topic] = inputs[topic].localCheckpoint(eager=True)
    writers: dict[str, list[int]] = {}
    for sub in order:
        for topic in sub.sink_topics:
            writers.setdefault(resolve(topic), []).append(sub.id)
    latest: dict[int, Any] = {}  # sub-topology id -> what its last run wrote (and its stores, counters)
    stage_times: dict[int, float] = {}

    def run_stage(sub: SubTopology) -> None:
        """Runs every task of ``sub`` over its user inputs and what the latest runs of its writers wrote."""
        sources = [resolve(t) for t in sub.source_topics]
        parts = [inputs[t] for t in sources if t in inputs]
        for topic in sources:
            for writer in writers.get(topic, ()):
                if writer not in latest:
                    continue
                parts.append(
                    latest[writer].where((F.col("kind") == "out") & (F.col("topic") == topic)).select(
                        "topic", "partition", F.lit(-1).cast("long").alias("offset"), "ts", "key", "value",
                        "headers", F.col("task").alias("writer"), "seq",
                    )
                )  # fmt: skip
        if not parts:
            return
        frame = parts[0]
        for more in parts[1:]:
            frame = frame.unionByName(more)
        t0 = time.perf_counter()
        compiled = choice.run(sub, frame, counts, set(writers), sink_serdes)
        if compiled is not None:  # a Spark plan (kstream_nb.spark.compiled)
            latest[sub.id] = compiled.localCheckpoint(eager=True)
            stage_times[sub.id] = stage_times.get(sub.id, 0.0) + time.perf_counter() - t0
            say(f"sub-topology {sub.id} compiled, done in {stage_times[sub.id]:.1f}s")
            return
        plan = StagePlan(topology, streams_config, sub.id, counts, changelogs, sink_serdes, global_records)
        say(f"sub-topology {sub.id}: {max(counts.get(t, 1) for t in sources)} task(s) reading {sources}")
        t0 = time.perf_counter()
        run = stage_function(plan, arrow_schema(OUT_DDL, _large_types(spark)))
        out = frame.groupBy("partition").applyInArrow(run, OUT_DDL).localCheckpoint(eager=True)
        seconds = time.perf_counter() - t0
        stage_times[sub.id] = stage_times.get(sub.id, 0.0) + seconds
        say(f"sub-topology {sub.id} done in {seconds:.1f}s")
        latest[sub.id] = out

    for group in groups:
        if is_cycle(group, resolve):
            _run_cycle(group, resolve, run_stage, latest, say)
        else:
            run_stage(group[0])
    stage_outputs = [latest[sub.id] for sub in order if sub.id in latest]

    # ---- results -------------------------------------------------------------------------------------
    everything = stage_outputs[0] if stage_outputs else None
    for more in stage_outputs[1:]:
        everything = everything.unionByName(more)  # type: ignore[union-attr]
    outputs: dict[str, BacktestOutput] = {}
    for topic, serdes in sink_serdes.items():
        source = (
            None if everything is None else everything.where((F.col("kind") == "out") & (F.col("topic") == topic))
        )
        outputs[topic] = BacktestOutput(topic, _ordered_output(spark, source), serdes, counts[topic])
    stores: dict[str, BacktestStore] = {}
    for name, builder in topology.store_builders.items():
        df = (
            None if everything is None else everything.where((F.col("kind") == "store") & (F.col("topic") == name))
        )
        stores[name] = BacktestStore(name, spark, df, isinstance(builder, WindowStoreBuilder))
    stats = (
        [] if everything is None else [r.value_text for r in everything.where(F.col("kind") == "stat").collect()]
    )
    result = BacktestResult(outputs, stores, stats, counts, time.perf_counter() - started, stage_times)
    result._snapshot_dir = snapshot_dir
    result.paths = choice.explain()
    say(f"backtest done in {result.seconds:.1f}s: {result.processed} records processed")
    return result


def _run_cycle(
    group: list[SubTopology],
    resolve: Callable[[str], str],
    run_stage: Callable[[SubTopology], None],
    latest: Mapping[int, Any],
    say: Callable[[str], None],
) -> None:
    """Runs a cycle's sub-topologies until what they write to each other stops changing (module doc, 5).

    Each pass re-runs, in order, the members whose inputs changed since their last run (all of them at
    first); a member's writes are compared by ``_digests``. Members fed from outside the cycle go first.
    """
    ids = {sub.id for sub in group}
    reads = {sub.id: {resolve(t) for t in sub.source_topics} for sub in group}
    read_in_cycle = set().union(*reads.values())
    feedback = {sub.id: sorted({resolve(t) for t in sub.sink_topics} & read_in_cycle) for sub in group}
    readers = {t: {i for i in ids if t in reads[i]} for topics in feedback.values() for t in topics}
    inside = set(readers)
    group = sorted(group, key=lambda sub: (not (reads[sub.id] - inside), sub.id))
    digests: dict[str, tuple[int, int]] = {}
    dirty = set(ids)
    passes = 0
    while dirty:
        passes += 1
        if passes > MAX_CYCLE_PASSES:
            raise StreamsError(
                f"cannot backtest: sub-topologies {sorted(ids)} feed each other and their records did not "
                f"settle after {MAX_CYCLE_PASSES} passes (a loop that keeps writing records to itself?)"
            )
        say(f"cycle of sub-topologies {sorted(ids)}: pass {passes}, running {sorted(dirty)}")
        for sub in group:
            if sub.id not in dirty:
                continue
            dirty.discard(sub.id)
            run_stage(sub)
            if sub.id not in latest or not feedback[sub.id]:
                continue
            for topic, digest in _digests(latest[sub.id], feedback[sub.id]).items():
                if digests.get(topic, (0, 0)) != digest:
                    digests[topic] = digest
                    dirty.update(readers[topic])


def _digests(out: Any, topics: list[str]) -> dict[str, tuple[int, int]]:
    """Per topic: (record count, XOR of a 64-bit hash of each record with its writer and position).

    Records are unique by (writer task, sequence number), so equal digests mean equal contents.
    """
    from pyspark.sql import functions as F

    columns = ["partition", "task", "seq", "ts", "key", "value", "headers"]
    rows = (
        out.where((F.col("kind") == "out") & F.col("topic").isin(topics))
        .groupBy("topic")
        .agg(F.count(F.lit(1)).alias("n"), F.bit_xor(F.xxhash64(*columns)).alias("h"))
        .collect()
    )
    found = {str(r["topic"]): (int(r["n"]), int(r["h"])) for r in rows}
    return {topic: found.get(topic, (0, 0)) for topic in topics}


def _large_types(spark: Any) -> bool:
    """Whether the session hands Python Arrow's large string/binary types (``applyInArrow`` results must match)."""
    return str(spark.conf.get("spark.sql.execution.arrow.useLargeVarTypes", "false")).lower() == "true"


def _ordered_output(spark: Any, records: Any) -> Any:
    """One output topic's records per partition in offset order (from 0): the writer tasks' streams merged
    lowest timestamp first, each task's own order kept; ``replay.merge_order``'s sort key, in Spark."""
    if records is None:
        return spark.createDataFrame([], OUTPUT_DDL)
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    writer = Window.partitionBy("partition", "task").orderBy("seq").rowsBetween(Window.unboundedPreceding, 0)
    merged = Window.partitionBy("partition").orderBy("running_ts", "task", "seq")
    return records.withColumn("running_ts", F.max("ts").over(writer)).select(
        F.col("partition").cast("int"), (F.row_number().over(merged) - 1).cast("long").alias("offset"),
        F.timestamp_millis("ts").alias("timestamp"), F.col("key_text").alias("key"),
        F.col("value_text").alias("value"), "headers", F.col("task").cast("int"),
        F.col("key").alias("key_bytes"), F.col("value").alias("value_bytes"),
    )  # fmt: skip


def _global_records(
    topology: Topology,
    bootstrap_servers: str,
    archives: Mapping[str, str],
    client_config: Mapping[str, Any] | None,
) -> dict[str, list[Any]]:
    """The raw records of every global-store topic, read in the driver (global tables are small)."""
    from kstream_nb.cluster.export import read_partition_raw

    result: dict[str, list[Any]] = {}
    for spec in topology.global_stores.values():
        topic = spec.topic
        rows: list[Any] = []
        headers: Any
        if topic in archives:
            frame = read_archive(archives[topic])
            for r in frame.itertuples(index=False):
                ts = int(pd.Timestamp(r.timestamp).value // 1_000_000)
                headers = tuple((h["key"], h["value"]) for h in (r.headers if r.headers is not None else ()))
                rows.append((int(r.partition), int(r.offset), ts, r.key, r.value, headers))
        else:
            cluster = connect(bootstrap_servers, client_config)
            admin = cluster.admin()
            count = admin.partition_count(topic)
            if count is None:
                raise StreamsError(
                    f"cannot backtest: global table topic {topic!r} does not exist on {bootstrap_servers}"
                )
            tps = [TopicPartition(topic, p) for p in range(count)]
            begins, ends = admin.beginning_offsets(tps), admin.end_offsets(tps)
            for tp in tps:
                for offsets, timestamps, keys, values, headers in read_partition_raw(
                    cluster, tp, begins[tp], ends[tp]
                ):
                    rows.extend(zip([tp.partition] * len(offsets), offsets, timestamps, keys, values, headers))
        result[topic] = rows
    return result
