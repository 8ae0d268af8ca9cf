"""A real schema registry for the tests: Apicurio Registry 2.4 (Quarkus, in-memory H2 storage), which speaks
Confluent's Schema Registry API at ``/apis/ccompat/v7``, on a free loopback port per test session.

Confluent's own registry is not on Maven Central; Apicurio's server is, as the plain jar of its Quarkus app,
which ``tests/registry/pom.xml`` turns into a runnable jar with Quarkus' build goal. That build runs once, into
the same cache as the Kafka broker's jars (``$KSTREAM_NB_CACHE`` or ``~/.cache/kstream_nb``), keyed by the
pom's content. The server is started with Confluent's default where Apicurio's differs: BACKWARD global
compatibility. Not canonical hashing (``registry.ccompat.use-canonical-hash``): with it Apicurio 2.4 answers
an Avro schema with its fields sorted by name, and records read with the schema fetched by id decode wrongly.
Imported as ``tests.registry_server`` (``tests/conftest.py`` puts the repository root on ``sys.path``).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from kstream_nb.cluster.local_kafka import (
    LocalKafkaError,
    _exclusive,
    cache_dir,
    free_port,
    java_version,
    wait_until_answers,
)

#: The Maven project that builds the server, and the Maven settings that send every repository to Central.
PROJECT = Path(__file__).parent / "registry"
#: Where the built server is, relative to the build folder: a Quarkus legacy jar and its ``lib/`` folder.
RUNNER = Path("target") / "test-schema-registry-1-runner.jar"
#: Settings that make the server behave like Confluent's where Apicurio's defaults differ.
CONFLUENT_DEFAULTS = {
    "registry.rules.global.compatibility": "BACKWARD",
}


class RegistryServerError(Exception):
    """The test registry could not be built, started or stopped; the message says why."""


def registry_jar(*, quiet: bool = True) -> Path:
    """The server's runnable jar, built from ``tests/registry/pom.xml`` with ``mvn`` the first time."""
    sources = [PROJECT / "pom.xml", PROJECT / "settings.xml"]
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in sources)).hexdigest()[:12]
    home = cache_dir() / f"schema-registry-{digest}"
    done = home / "complete"
    if done.exists():
        return home / RUNNER
    mvn = shutil.which("mvn")
    if mvn is None:
        raise RegistryServerError(
            "building the test schema registry needs Maven (`mvn`) on the PATH "
            "(on Debian/Ubuntu: apt-get install -y maven)"
        )
    home.mkdir(parents=True, exist_ok=True)
    with _exclusive(home / ".lock"):  # another test session may be building it
        if done.exists():
            return home / RUNNER
        for path in sources:
            shutil.copy(path, home / path.name)
        shutil.rmtree(home / "target", ignore_errors=True)
        if not quiet:
            print(f"building Apicurio Registry from Maven Central into {home} (once)", flush=True)
        cmd = [mvn, "-B", "-q", "-s", "settings.xml", "package"]
        proc = subprocess.run(cmd, cwd=home, capture_output=True, text=True, check=False)
        if proc.returncode != 0 or not (home / RUNNER).exists():
            tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-20:])
            raise RegistryServerError(
                f"Maven could not build the test schema registry (is Maven Central reachable?); "
                f"`{' '.join(cmd)}` in {home} exited with {proc.returncode}:\n{tail}"
            )
        done.write_text(digest + "\n")
    return home / RUNNER


class RegistryServer:
    """One Apicurio Registry process whose log is under ``data_dir``; its data lives in memory only."""

    def __init__(self, data_dir: Path, *, heap: str = "512m") -> None:
        self.data_dir = Path(data_dir)
        self.heap = heap
        self.port = 0
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """The base URL of Confluent's API, what a ``SchemaRegistryClient``'s ``url`` takes."""
        return f"http://127.0.0.1:{self.port}/apis/ccompat/v7"

    @property
    def log_path(self) -> Path:
        return self.data_dir / "registry.log"

    def start(self, timeout: float = 120.0) -> RegistryServer:
        """Builds the server if needed, starts it in its own process group and waits until it lists
        subjects; a server that exits or stays silent is stopped and reported with the end of its log."""
        java_version()
        jar = registry_jar()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        settings = {"quarkus.http.host": "127.0.0.1", "quarkus.http.port": self.port, **CONFLUENT_DEFAULTS}
        cmd = ["java", f"-Xmx{self.heap}", "-XX:+UseSerialGC", "-Djava.awt.headless=true"]
        cmd += [f"-D{k}={v}" for k, v in settings.items()] + ["-jar", str(jar)]
        with self.log_path.open("wb") as out:
            self._process = subprocess.Popen(
                cmd, cwd=self.data_dir, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True,
            )  # fmt: skip
        try:
            self._wait_until_ready(self._process, timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_until_ready(self, process: subprocess.Popen[bytes], timeout: float) -> None:
        def answers() -> bool:
            try:
                with urllib.request.urlopen(f"{self.url}/subjects", timeout=2) as answer:
                    return bool(answer.status == 200)
            except (urllib.error.URLError, OSError):
                return False

        wait_until_answers(process, answers, timeout, "the schema registry", f"GET {self.url}/subjects",
                           self.log_path, self.log_tail, RegistryServerError)  # fmt: skip

    def log_tail(self, lines: int = 30) -> str:
        """The last lines of the server's output, for error messages."""
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:]) or "(empty)"
        except OSError:
            return "(no log written)"

    def stop(self, timeout: float = 30.0) -> None:
        """Ends the server's process group: SIGTERM (Quarkus shuts down cleanly), SIGKILL after ``timeout``."""
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)


@contextmanager
def running_registry(data_dir: Path) -> Iterator[RegistryServer]:
    """A started test registry for the ``with`` block, always stopped afterwards; one that cannot be built
    or started fails the test with the reason."""
    server = RegistryServer(data_dir)
    try:
        server.start()
    except (RegistryServerError, LocalKafkaError) as e:  # LocalKafkaError: no Java 17
        pytest.fail(f"the schema registry tests need a running Apicurio Registry: {e}", pytrace=False)
    try:
        yield server
    finally:
        server.stop()
