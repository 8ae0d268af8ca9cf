"""One local SparkSession for the whole spark suite (local[2], loopback, UI off, UTC, fast JIT start), and
the clusters the parity tests run on: the embedded ``memory://`` one and the session's Apache Kafka broker.

pyspark, Java and the Kafka broker are requirements of this suite, not options: when one is missing the
fixture that needs it FAILS with a message that says what to install (it never skips).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from kstream_nb.cluster.memory import reset_cluster
from tests.kafka_broker import FAST_CLIENT_CONFIG
from tests.spark.clusters import Cluster


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


@pytest.fixture(params=["memory", "kafka"])
def cluster(request: pytest.FixtureRequest) -> Iterator[Cluster]:
    """Each parity test runs twice: on a fresh ``memory://`` cluster and on the session's Kafka broker."""
    if request.param == "memory":
        where = Cluster("memory", f"memory://spark-{uuid.uuid4().hex[:10]}", {})
        yield where
        reset_cluster(where.bootstrap)
    else:
        yield Cluster("kafka", request.getfixturevalue("kafka_bootstrap"), dict(FAST_CLIENT_CONFIG))
