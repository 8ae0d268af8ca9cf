"""Generated topologies of column expressions and built-in aggregations (``generated_cases``): the live run,
``engine="compiled"`` (every sub-topology compiled) and ``engine="replay"`` give the same records per output
partition (key and value bytes, timestamps, order), the same final stores and the same dropped-record count.

Several cases share one ``StreamsBuilder`` (one live run and one backtest per engine for all of them). The
inputs keep their out-of-order timestamps (late records need them), fed in slices in offset order, each
processed before the next: no timestamp-ordered phases are needed, since each output or repartition partition
has one writer task (see ``generated_cases``), whose order is the same live and in the backtest. A failing
comparison prints the case: its topology as code and its input records.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pandas as pd
import pytest

import kstream_nb as ks
from kstream_nb.spark import backtest
from kstream_nb.spark.result import BacktestResult
from tests.spark.clusters import Cluster
from tests.spark.generated_cases import Case, generate

#: the sub-topologies one run compiles (each a Spark job of a few seconds: the file's time is their number)
SUBTOPOLOGIES_PER_RUN = 6
PHASES = 3


def _live(
    url: str, topology: ks.Topology, cases: list[Case], t: Any
) -> tuple[dict[str, Any], dict[str, Any], int]:
    """The live run: each case's records in ``PHASES`` slices (offset order kept), idle after each."""
    app = ks.KafkaStreams(topology, application_id="live", bootstrap_servers=url, statestore_cache_max_bytes=0)
    try:
        app.start().wait_until_running(60)
        for phase in range(PHASES):
            for case in cases:
                size = -(-len(case.records) // PHASES)
                part = case.records[phase * size : (phase + 1) * size]
                ks.produce(t(case.source), part, bootstrap_servers=url, partitions=case.partitions)
            app.wait_until_idle(timeout=60)
        stores = {name: app.store(name).to_pandas() for name in _stores(cases)}
        dropped = int(app.metrics()["dropped-records-total"])
    finally:
        app.stop()
    outputs = {
        topic: ks.read_topic(t(topic), bootstrap_servers=url, key_serde="bytes", value_serde="bytes")
        for case in cases
        for topic in case.outputs()
    }
    return {k: _rows(v) for k, v in outputs.items()}, stores, dropped


def _within_budget(generated: Iterable[Case]) -> list[Case]:
    """The generated cases in order, each that still fits ``SUBTOPOLOGIES_PER_RUN``."""
    cases: list[Case] = []
    for case in generated:
        if sum(c.subtopologies for c in cases) + case.subtopologies <= SUBTOPOLOGIES_PER_RUN:
            cases.append(case)
    return cases


def _stores(cases: list[Case]) -> list[str]:
    """The aggregations' stores (a named aggregation's running state and its finished table)."""
    names = []
    for case in cases:
        for b in case.branches:
            if b.group is not None:
                names += [b.store] + ([f"{b.store}-agg-state"] if b.specs is not None else [])
    return names


def _rows(frame: pd.DataFrame) -> dict[int, list[tuple[Any, ...]]]:
    """Per partition, in offset order: (key bytes, value bytes, timestamp ms)."""
    out: dict[int, list[tuple[Any, ...]]] = {}
    for r in frame.sort_values(["partition", "offset"]).itertuples():
        out.setdefault(int(r.partition), []).append((_bytes(r.key), _bytes(r.value), int(r.timestamp)))
    return out


def _bytes(x: Any) -> bytes | None:
    return None if x is None else bytes(x)


def _backtested(result: BacktestResult, topic: str) -> dict[int, list[tuple[Any, ...]]]:
    from pyspark.sql import functions as F

    df = result.outputs[topic].df.select(
        "partition", "offset", F.unix_millis("timestamp").alias("timestamp"), "key_bytes", "value_bytes"
    )
    frame = df.toPandas().rename(columns={"key_bytes": "key", "value_bytes": "value"})
    return _rows(frame)


def _same_store(got: pd.DataFrame, expected: pd.DataFrame) -> None:
    key = [c for c in ("key", "start") if c in expected.columns]
    a = got.sort_values(key, key=lambda s: s.astype(str)).reset_index(drop=True)
    b = expected.sort_values(key, key=lambda s: s.astype(str)).reset_index(drop=True)
    pd.testing.assert_frame_equal(a, b, check_dtype=False)


def _explain(cases: list[Case], topic: str | None = None) -> str:
    chosen = [c for c in cases if topic is None or topic.startswith(f"{c.name}-")]
    return "\n\n".join(c.describe() for c in chosen)


@pytest.mark.parametrize("seed", [1, 2])
def test_generated_cases_compile_as_the_live_run(spark: Any, url: str, seed: int) -> None:
    cluster = Cluster("memory", url, {})
    cases = _within_budget(generate(seed, 12))

    def t(base: str) -> str:
        return cluster.name(base)

    for case in cases:
        ks.produce(t(case.source), [], bootstrap_servers=url, partitions=case.partitions)
        for topic, partitions in case.outputs().items():
            ks.produce(t(topic), [], bootstrap_servers=url, partitions=partitions)
    b = ks.StreamsBuilder()
    for case in cases:
        case.build(b, t)
    topology = b.build()
    live, live_stores, live_dropped = _live(url, topology, cases, t)

    compiled = backtest(topology, spark, bootstrap_servers=url, engine="compiled")
    replay = backtest(topology, spark, bootstrap_servers=url, engine="replay")
    assert {p.engine for p in compiled.paths} == {"compiled"}, compiled.explain()
    for engine, result in (("compiled", compiled), ("replay", replay)):
        for topic, expected in live.items():
            got = _backtested(result, t(topic))
            assert got == expected, f"{engine}: output {topic} differs from the live run\n{_explain(cases, topic)}"
        for name, expected_store in live_stores.items():
            try:
                _same_store(result.stores[name].to_pandas(), expected_store)
            except AssertionError as e:
                raise AssertionError(f"{engine}: store {name}: {e}\n{_explain(cases, name)}") from None
        assert result.dropped == live_dropped, f"{engine}: dropped records\n{_explain(cases)}"
    assert set(compiled.stores) == set(replay.stores)
    for name in set(compiled.stores):
        try:
            _same_store(compiled.stores[name].to_pandas(), replay.stores[name].to_pandas())
        except AssertionError as e:
            raise AssertionError(f"store {name}: compiled vs replay: {e}\n{_explain(cases, name)}") from None
