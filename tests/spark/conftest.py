"""One local SparkSession for the whole spark suite (local[2], loopback, UI off, UTC, fast JIT start).

pyspark and Java are requirements of this suite, not options: when either is missing the session
fixture FAILS with a message that says what to install (it never skips).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from kstream_nb.cluster.memory import reset_cluster


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from kstream_nb.spark.session import SparkSetupError, spark_session

    try:
        session = spark_session("local[2]", app_name="kstream_nb-tests", fast_start=True)
    except SparkSetupError as e:
        pytest.fail(f"the spark test suite needs pyspark, pyarrow and Java 17+: {e}", pytrace=False)
    yield session
    session.stop()


@pytest.fixture
def url() -> Iterator[str]:
    address = f"memory://spark-{uuid.uuid4().hex[:10]}"
    yield address
    reset_cluster(address)
