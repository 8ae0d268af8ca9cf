"""``kstream_nb.cluster.local_kafka``, ``kstream-nb kafka start|stop|status`` and ``%kstream kafka``.

The error paths a user meets on a machine that is not ready (no Java, an old Java, no Maven, Maven unable
to reach Maven Central, a port in use, a broker that does not answer or dies at start) must fail with a
message that says what is wrong, with the tail of the tool's or broker's own output. Fake ``java`` and
``mvn`` scripts on the PATH stand for the machines that lack them; the broker tests run the real Kafka.
The full cycle goes through the command line as a user types it: start, use it with confluent-kafka,
status, stop, start again on the same data (the records are still there, after a clean stop and a kill).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

from kstream_nb.cluster.local_kafka import (
    KAFKA_VERSION,
    BrokerStatus,
    LocalKafka,
    LocalKafkaError,
    free_port,
    java_version,
    kafka_jars,
)

REPO = Path(__file__).resolve().parents[2]
HEAP = "512m"


# ---- helpers ---------------------------------------------------------------------------------------------


def _script(folder: Path, name: str, body: str, interpreter: str = "/bin/sh") -> Path:
    """An executable script ``folder/name`` (``/bin/sh`` by default: only its builtins, the PATH is bare)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(f"#!{interpreter}\n" + body)
    path.chmod(0o755)
    return path


def _real_java() -> Path:
    java = shutil.which("java")
    assert java is not None, "these tests need Java 17+ on the PATH (apt-get install -y openjdk-17-jre-headless)"
    return Path(os.path.realpath(java))


@pytest.fixture
def java_only_path(tmp_path: Path) -> Path:
    """A folder holding nothing but the real ``java``, to build a PATH without ``mvn``."""
    folder = tmp_path / "java-only"
    folder.mkdir()
    (folder / "java").symlink_to(_real_java())
    return folder


@pytest.fixture
def empty_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``$KSTREAM_NB_CACHE`` at an empty folder: the jars are not there, Maven must fetch them."""
    cache = tmp_path / "cache"
    cache.mkdir()
    monkeypatch.setenv("KSTREAM_NB_CACHE", str(cache))
    return cache


def _cli(*args: str, env: dict[str, str] | None = None, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    """``python -m kstream_nb ARGS`` as a user runs it, from the repository root."""
    return subprocess.run(
        [sys.executable, "-m", "kstream_nb", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _running(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie, exited but not yet reaped, is not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] != "Z"
    except (OSError, IndexError):
        return False


def _accepts(port: int) -> bool:
    """Whether something accepts TCP connections on 127.0.0.1:``port``."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def _recorded_pid(data_dir: Path) -> int:
    return int(json.loads((data_dir / "broker.json").read_text())["pid"])


def _read_all(bootstrap: str, topic: str, expected: int, timeout: float = 60) -> list[tuple[Any, Any]]:
    """The first ``expected`` records of partition 0 of ``topic`` (fails if they do not come in time)."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "local-kafka-test", "enable.auto.commit": False}
    )
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        got: list[tuple[Any, Any]] = []
        deadline = time.monotonic() + timeout
        while len(got) < expected:
            assert time.monotonic() < deadline, f"only {got} of {expected} records read back from {topic}"
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            got.append((msg.key(), msg.value()))
        return got
    finally:
        consumer.close()


def _produce(bootstrap: str, topic: str, key: bytes, value: bytes) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    errors: list[object] = []
    producer.produce(topic, value, key, on_delivery=lambda err, msg: errors.append(err) if err else None)
    assert producer.flush(30) == 0, "the record was not delivered within 30 s"
    assert not errors, errors


@pytest.fixture
def shell() -> InteractiveShell:
    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "kstream_nb.jupyter")
    return ip


# ---- Java --------------------------------------------------------------------------------------------------


def test_this_machine_has_java_17_or_later() -> None:
    assert java_version() >= 17


def test_no_java_fails_naming_java_17_in_the_api_the_cli_and_the_magic(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shell: InteractiveShell
) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    data = tmp_path / "kafka"
    port = free_port()

    monkeypatch.setenv("PATH", str(empty))
    with pytest.raises(LocalKafkaError, match=r"needs Java 17\+ and there is no `java` on the PATH"):
        LocalKafka(data, port, heap=HEAP).start()
    with pytest.raises(UsageError, match=r"needs Java 17\+"):
        shell.run_line_magic("kstream", f"kafka start --port {port} --data-dir {data}")
    cli = _cli(
        "kafka", "start", "--port", str(port), "--data-dir", str(data), env={**os.environ, "PATH": str(empty)}
    )
    assert cli.returncode == 1, cli
    assert "error: Apache Kafka needs Java 17+ and there is no `java` on the PATH" in cli.stderr
    assert "openjdk-17" in cli.stderr  # says what to install
    assert not (data / "broker.json").exists()


@pytest.mark.parametrize(("reported", "major"), [('"11.0.2" 2019-01-15', 11), ('"1.8.0_392"', 8)])
def test_java_too_old_fails_naming_its_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reported: str, major: int
) -> None:
    fake = tmp_path / "old-java"
    _script(fake, "java", f"echo 'openjdk version {reported}' >&2\necho 'OpenJDK Runtime Environment' >&2\n")
    monkeypatch.setenv("PATH", str(fake))
    with pytest.raises(
        LocalKafkaError, match=rf"needs Java 17\+, but {re.escape(str(fake / 'java'))} is Java {major}"
    ):
        LocalKafka(tmp_path / "kafka", free_port(), heap=HEAP).start()


def test_a_java_whose_version_cannot_be_read_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "odd-java"
    _script(fake, "java", "echo 'this is not a JVM' >&2\n")
    monkeypatch.setenv("PATH", str(fake))
    with pytest.raises(LocalKafkaError, match=r"cannot tell the version of .*this is not a JVM"):
        java_version()


# ---- Maven -------------------------------------------------------------------------------------------------

#: What ``mvn -q dependency:copy-dependencies`` prints when Maven Central cannot be reached (shortened).
MAVEN_OFFLINE = "\n".join(
    [f"[INFO] line {i} of Maven's chatter that the error may leave out" for i in range(30)]
    + [
        "[ERROR] Failed to execute goal on project local-kafka: Could not resolve dependencies for project "
        f"kstream_nb:local-kafka:pom:{KAFKA_VERSION}: Failed to collect dependencies at "
        f"org.apache.kafka:kafka_2.13:jar:{KAFKA_VERSION}: Failed to read artifact descriptor for "
        f"org.apache.kafka:kafka_2.13:jar:{KAFKA_VERSION}: Could not transfer artifact "
        f"org.apache.kafka:kafka_2.13:pom:{KAFKA_VERSION} from/to central "
        "(https://repo.maven.apache.org/maven2): Connect to repo.maven.apache.org:443 failed: "
        "Connection timed out",
        "[ERROR] -> [Help 1] mvn-said-this-last",
    ]
)


def test_no_maven_fails_naming_maven(
    java_only_path: Path, empty_cache: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(java_only_path))
    with pytest.raises(LocalKafkaError, match=r"needs Maven \(`mvn`\) on the PATH .*apt-get install -y maven"):
        LocalKafka(tmp_path / "kafka", free_port(), heap=HEAP).start()
    assert not (empty_cache / f"kafka-{KAFKA_VERSION}" / "complete").exists()


def test_maven_unable_to_reach_maven_central_fails_with_the_tail_of_its_output(
    java_only_path: Path, empty_cache: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fake = tmp_path / "offline-mvn"
    _script(fake, "mvn", f"import sys\nprint({MAVEN_OFFLINE!r})\nsys.exit(1)\n", sys.executable)
    monkeypatch.setenv("PATH", f"{fake}:{java_only_path}")

    with pytest.raises(LocalKafkaError) as failed:
        LocalKafka(tmp_path / "kafka", free_port(), heap=HEAP).start()
    message = str(failed.value)
    assert f"Maven could not fetch org.apache.kafka:kafka_2.13:{KAFKA_VERSION}" in message
    assert "is Maven Central reachable?" in message
    assert "Could not transfer artifact org.apache.kafka:kafka_2.13:pom" in message  # mvn's own words
    assert message.rstrip().endswith("[ERROR] -> [Help 1] mvn-said-this-last")  # up to its last line
    assert "line 0 of Maven's chatter" not in message  # the tail, not all of it
    assert "dependency:copy-dependencies" in message  # the command, to run it by hand
    # nothing is marked fetched: the next start tries again
    assert not (empty_cache / f"kafka-{KAFKA_VERSION}" / "complete").exists()


def test_jars_are_fetched_once_then_come_from_the_cache(
    java_only_path: Path, empty_cache: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # a Maven that "fetches" by writing the jars where it is told; each run is counted
    fake = tmp_path / "fake-mvn"
    runs = tmp_path / "mvn-runs"
    _script(
        fake,
        "mvn",
        f"""import sys
from pathlib import Path
with open({str(runs)!r}, "a") as f:
    f.write("run\\n")
pom = Path("pom.xml").read_text()  # run in the cache folder, on the pom naming the broker
assert "<artifactId>kafka_2.13</artifactId><version>{KAFKA_VERSION}</version>" in pom, pom
out = Path(next(a.split("=", 1)[1] for a in sys.argv if a.startswith("-DoutputDirectory=")))
out.mkdir(parents=True)
for jar in ("kafka_2.13-{KAFKA_VERSION}.jar", "kafka-clients-{KAFKA_VERSION}.jar"):
    (out / jar).touch()
""",
        sys.executable,
    )
    monkeypatch.setenv("PATH", f"{fake}:{java_only_path}")
    libs = kafka_jars()
    assert libs == empty_cache / f"kafka-{KAFKA_VERSION}" / "libs"
    assert (libs / f"kafka_2.13-{KAFKA_VERSION}.jar").exists()
    assert runs.read_text().count("run") == 1

    monkeypatch.setenv("PATH", str(java_only_path))  # no Maven any more: the cache serves
    assert kafka_jars() == libs
    assert runs.read_text().count("run") == 1


def test_maven_that_fetches_no_broker_jar_is_reported(
    java_only_path: Path, empty_cache: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fake = tmp_path / "empty-mvn"
    _script(fake, "mvn", "exit 0\n")
    monkeypatch.setenv("PATH", f"{fake}:{java_only_path}")
    with pytest.raises(LocalKafkaError, match=rf"Maven finished but .* has no kafka_2.13-{KAFKA_VERSION}.jar"):
        kafka_jars()
    assert not (empty_cache / f"kafka-{KAFKA_VERSION}" / "complete").exists()


# ---- ports, pid files, settings (no broker runs) ----------------------------------------------------------


def test_a_taken_port_fails_naming_it(tmp_path: Path) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(LocalKafkaError, match=rf"port {port} on 127.0.0.1 is taken .*--port N"):
            LocalKafka(tmp_path / "kafka", port, heap=HEAP).start()
        cli = _cli("kafka", "start", "--port", str(port), "--data-dir", str(tmp_path / "cli"), "--heap", HEAP)
    assert cli.returncode == 1, cli
    assert f"error: port {port} on 127.0.0.1 is taken" in cli.stderr
    assert not (tmp_path / "kafka" / "broker.json").exists()


def test_a_malformed_setting_fails_at_format_with_kafkas_words(tmp_path: Path) -> None:
    broker = LocalKafka(tmp_path / "kafka", 0, properties={"num.partitions": "many"}, heap=HEAP)
    with pytest.raises(LocalKafkaError, match="formatting Kafka's storage under") as failed:
        broker.start(timeout=60)
    assert "Invalid value many for configuration num.partitions" in str(failed.value)
    assert not broker.status().running


def test_a_leftover_pid_file_naming_another_process_is_not_a_broker(tmp_path: Path) -> None:
    """After a reboot or a crash the recorded pid may belong to any process: status must not call it the
    broker, stop must not signal it, start must start a broker."""
    data = tmp_path / "kafka"
    data.mkdir()
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        (data / "broker.json").write_text(json.dumps({"pid": other.pid, "port": 1, "controller_port": 2}))
        broker = LocalKafka(data, free_port(), heap=HEAP)
        assert not broker.status().running
        assert broker.stop() is False
        assert other.poll() is None, "stop() signalled a process that is not the broker"
        cli = _cli("kafka", "status", "--data-dir", str(data))
        assert cli.returncode == 3, cli
        assert "Kafka not running" in cli.stdout
    finally:
        other.kill()
        other.wait()


# ---- a real broker that fails to start ----------------------------------------------------------------------


@pytest.mark.kafka
def test_a_broker_not_answering_in_time_fails_with_the_tail_of_its_log(tmp_path: Path) -> None:
    # the broker runs, but listens on another port than the one it was asked to answer on
    elsewhere, controller, port = free_port(), free_port(), free_port()
    broker = LocalKafka(
        tmp_path / "kafka",
        port,
        heap=HEAP,
        properties={
            "listeners": f"CLIENT://127.0.0.1:{elsewhere},CONTROLLER://127.0.0.1:{controller}",
            "advertised.listeners": f"CLIENT://127.0.0.1:{elsewhere}",
            "controller.quorum.bootstrap.servers": f"127.0.0.1:{controller}",
        },
    )
    with pytest.raises(LocalKafkaError) as failed:
        broker.start(timeout=20)
    message = str(failed.value)
    assert f"Kafka did not answer on 127.0.0.1:{port} within 20 s" in message
    assert f"the end of its log ({tmp_path / 'kafka' / 'server.log'})" in message
    tail = message.split("--- server.log\n", 1)[1].split("\n--- console.log", 1)[0].splitlines()
    assert 5 <= len(tail) <= 30
    logged = (tmp_path / "kafka" / "server.log").read_text().splitlines()
    assert all(line in logged for line in tail)  # lines of the broker's own log
    assert any(re.match(r"\[\d{4}-\d\d-\d\d [\d:,]+\] (INFO|WARN|ERROR) ", line) for line in tail)
    # the broker that did not answer was stopped, not left behind
    assert not broker.status().running
    assert not (tmp_path / "kafka" / "broker.json").exists()
    assert not _accepts(elsewhere)


@pytest.mark.kafka
def test_a_broker_exiting_at_start_fails_with_the_tail_of_its_log(tmp_path: Path) -> None:
    broker = LocalKafka(
        tmp_path / "kafka", 0, properties={"authorizer.class.name": "no.such.Authorizer"}, heap=HEAP
    )
    with pytest.raises(
        LocalKafkaError, match="Kafka exited with code 1 while starting; the end of its log"
    ) as failed:
        broker.start(timeout=90)
    assert "ClassNotFoundException: no.such.Authorizer" in str(failed.value)
    assert not broker.status().running


# ---- the real cycle, through the command line --------------------------------------------------------------


@pytest.fixture
def cli_broker(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    """A port and data dir for a broker the test starts through the CLI; stopped in teardown whatever
    happened."""
    port, data = free_port(), tmp_path / "kafka"
    yield port, data
    LocalKafka(data, port).stop()


@pytest.mark.kafka
@pytest.mark.timeout(400)
def test_cli_start_use_status_stop_restart_keeps_the_data(
    cli_broker: tuple[int, Path], shell: InteractiveShell
) -> None:
    port, data = cli_broker
    where = ["--port", str(port), "--data-dir", str(data)]
    bootstrap = f"127.0.0.1:{port}"

    started = _cli("kafka", "start", *where, "--heap", HEAP, "--timeout", "120")
    assert started.returncode == 0, started
    assert f"Kafka {KAFKA_VERSION} started on {bootstrap}" in started.stdout
    pid = _recorded_pid(data)
    assert _running(pid)  # the CLI exited, the broker runs on

    # a user's client can use it
    topic = "local-kafka-cli"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    _produce(bootstrap, topic, b"k", b"first")
    assert _read_all(bootstrap, topic, 1) == [(b"k", b"first")]
    # history stays: a record stamped in 1970 (as the examples write) is not deleted by time retention
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    described = admin.describe_configs([resource])[resource].result(30)
    assert described["retention.ms"].value == "-1"

    status = _cli("kafka", "status", *where)
    assert status.returncode == 0, status
    assert f"Kafka {KAFKA_VERSION} running on {bootstrap} (pid {pid}" in status.stdout
    seen = shell.run_line_magic("kstream", f"kafka status --port {port} --data-dir {data}")
    assert isinstance(seen, BrokerStatus)
    assert (seen.running, seen.pid, seen.bootstrap_servers) == (True, pid, bootstrap)

    again = _cli("kafka", "start", *where, "--heap", HEAP)
    assert again.returncode == 0, again
    assert f"already running on {bootstrap}" in again.stdout
    assert _recorded_pid(data) == pid

    stopped = _cli("kafka", "stop", *where)
    assert stopped.returncode == 0, stopped
    assert "Kafka stopped" in stopped.stdout
    assert not _running(pid)
    assert not _accepts(port)
    status = _cli("kafka", "status", *where)
    assert status.returncode == 3, status
    assert "Kafka not running" in status.stdout
    assert shell.run_line_magic("kstream", f"kafka status --port {port} --data-dir {data}").running is False
    stopped_again = _cli("kafka", "stop", *where)
    assert stopped_again.returncode == 0 and "Kafka was not running" in stopped_again.stdout

    # the same data dir again: the topic and its record are still there
    restarted = _cli("kafka", "start", *where, "--heap", HEAP, "--timeout", "120")
    assert restarted.returncode == 0, restarted
    assert f"started on {bootstrap}" in restarted.stdout
    assert _read_all(bootstrap, topic, 1) == [(b"k", b"first")]

    # and after a crash (SIGKILL): what was acknowledged before it is there after the next start
    _produce(bootstrap, topic, b"k", b"second")
    killed_pid = _recorded_pid(data)
    assert LocalKafka(data, port).kill() is True
    assert not _running(killed_pid)
    restarted = _cli("kafka", "start", *where, "--heap", HEAP, "--timeout", "120")
    assert restarted.returncode == 0, restarted
    assert _read_all(bootstrap, topic, 2) == [(b"k", b"first"), (b"k", b"second")]

    stopped = _cli("kafka", "stop", *where)
    assert stopped.returncode == 0 and "Kafka stopped" in stopped.stdout


@pytest.mark.kafka
def test_a_cluster_id_that_would_read_as_an_option_is_never_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A random cluster id is URL-safe base64: 1 in 64 starts with "-", which Kafka's storage tool reads as
    an option (and fails). The first id drawn here is such one; the broker still formats and starts."""
    import uuid

    import kstream_nb.cluster.local_kafka as local_kafka

    drawn = [uuid.UUID(bytes=b"\xf8" + bytes(15)), uuid.UUID(bytes=bytes(range(1, 17)))]
    monkeypatch.setattr(local_kafka.uuid, "uuid4", lambda: drawn.pop(0))
    broker = LocalKafka(tmp_path / "kafka", 0, heap="512m")
    try:
        broker.start(timeout=90)
        assert broker.status().running and not drawn
    finally:
        broker.stop()
