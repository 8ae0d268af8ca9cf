"""Backtesting on Spark: the ``kstream`` topic data source and ``backtest(topology)``.

Needs the ``spark`` extra (``pip install 'kstream_nb[spark]'``: pyspark 4, pyarrow) and Java 17+.
Importing this package does not import pyspark: ``backtest`` checks the requirements when called and
fails with a message naming what is missing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from kstream_nb.spark.session import SparkSetupError, check_spark_requirements, register_data_source, spark_session

if TYPE_CHECKING:
    from kstream_nb.spark.result import BacktestResult
    from kstream_nb.topology.topology import Topology


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
    """Replays ``topology`` over its input topics' history on Spark (see ``kstream_nb.spark.runner``).

    Returns a ``BacktestResult``: ``.outputs[topic]`` and ``.stores[name]`` (Spark DataFrames with
    ``to_pandas()``), ``.tasks`` (records processed/dropped per task). ``start``/``end`` bound the input
    records by timestamp (``start <= ts < end``; epoch ms, ISO date-time or datetime). ``spark``: a
    session (default: ``spark_session()``, a local one). ``archives``: topic -> Parquet archive
    (``ks.export_topic``) to read instead of the cluster. ``engine``: "auto" (sub-topologies of column
    expressions and built-in aggregations as Spark plans, the rest replayed), "compiled" or "replay";
    ``result.explain()`` says which path each sub-topology took and why.
    """
    check_spark_requirements()
    from kstream_nb.spark.runner import backtest as run

    return run(
        topology, spark=spark, bootstrap_servers=bootstrap_servers, start=start, end=end,
        application_id=application_id, archives=archives, output_partitions=output_partitions,
        progress=progress, client_config=client_config, engine=engine, **config,
    )  # fmt: skip


def read_topic(spark: Any, topic: str, bootstrap_servers: str = "memory://", **options: Any) -> Any:
    """A Spark DataFrame of a topic's records (see ``kstream_nb.spark.source.read_topic``)."""
    check_spark_requirements()
    from kstream_nb.spark.source import read_topic as read

    return read(spark, topic, bootstrap_servers=bootstrap_servers, **options)


__all__ = [
    "SparkSetupError",
    "backtest",
    "check_spark_requirements",
    "read_topic",
    "register_data_source",
    "spark_session",
]
