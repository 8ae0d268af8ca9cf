"""A local SparkSession set up the way kstream_nb needs it (loopback-bound, UI off, UTC, our workers).

Spark needs Java 17+ on the PATH: ``spark_session()`` checks for ``java`` first and fails with a clear
message instead of Spark's own launcher error. Spark's Python workers are separate processes: they must
import ``kstream_nb`` and the modules that define the topology's functions, so the driver's ``sys.path``
is handed to them through ``PYTHONPATH`` (set before the JVM starts) and they run this Python.
"""

from __future__ import annotations

import os
import shutil
import sys
from typing import Any

from kstream_nb.errors import StreamsError


class SparkSetupError(StreamsError):
    """Spark cannot start here: pyspark/pyarrow are not installed, or Java is missing."""


def check_spark_requirements() -> None:
    """Raises ``SparkSetupError`` naming what is missing (pyspark, pyarrow, java)."""
    missing = []
    try:
        import pyspark  # noqa: F401
    except ImportError:
        missing.append("pyspark (pip install 'kstream_nb[spark]')")
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        missing.append("pyarrow (pip install 'kstream_nb[spark]')")
    if missing:
        raise SparkSetupError("backtesting on Spark needs " + " and ".join(missing))
    java_home = os.environ.get("JAVA_HOME")
    java_in_home = java_home and shutil.which("java", path=os.path.join(java_home, "bin"))
    if not (shutil.which("java") or java_in_home):
        raise SparkSetupError(
            "Spark needs Java 17 or newer, but no `java` was found on the PATH (nor in $JAVA_HOME/bin): "
            "install a JDK (e.g. `apt-get install openjdk-17-jre-headless`) and retry"
        )


def _worker_pythonpath() -> str:
    entries = [os.getcwd(), *(p for p in sys.path if p and os.path.isdir(p))]
    current = os.environ.get("PYTHONPATH", "")
    entries.extend(p for p in current.split(os.pathsep) if p)
    return os.pathsep.join(dict.fromkeys(entries))


def spark_session(
    master: str = "local[2]",
    app_name: str = "kstream_nb-backtest",
    config: dict[str, Any] | None = None,
    fast_start: bool = False,
) -> Any:
    """A local SparkSession (or the active one, if its master matches): loopback, UI off, UTC.

    ``fast_start`` adds ``-XX:TieredStopAtLevel=1`` to the driver JVM (starts faster; for tests and
    short notebooks, slower on long jobs). ``config`` adds/overrides Spark settings.
    """
    check_spark_requirements()
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ["PYTHONPATH"] = _worker_pythonpath()
    settings: dict[str, Any] = {
        "spark.driver.memory": "1g",
        "spark.sql.shuffle.partitions": "4",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.executorEnv.PYTHONPATH": os.environ["PYTHONPATH"],
        "spark.python.worker.reuse": "true",
    }
    if fast_start:
        # C1 only fills the code cache faster: a long session ran out of it and stopped its SparkContext
        settings["spark.driver.extraJavaOptions"] = "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=256m"
    settings.update(config or {})
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register_data_source(spark)
    return spark


def register_data_source(spark: Any) -> None:
    """Registers the ``kstream`` data source with ``spark`` (idempotent)."""
    from kstream_nb.spark.source import KStreamDataSource

    spark.dataSource.register(KStreamDataSource)
