"""A real single-node Apache Kafka (KRaft, broker and controller in one JVM) on loopback, for users and tests.

``kstream-nb kafka start`` and ``%kstream kafka start`` run one on 127.0.0.1:9092 with its data under
``~/.kstream_nb/kafka``; the tests start one on a free port per session. The broker's jars (``kafka_2.13``
and its runtime dependencies, plus a log4j binding) are fetched once from Maven Central by ``mvn
dependency:copy-dependencies`` into a cache (``$KSTREAM_NB_CACHE`` or ``~/.cache/kstream_nb``); the
storage directory is formatted once; the broker runs in its own process group and is stopped by the
process id written beside its data.

Broker settings are those of Kafka's own quick start (``config/server.properties``) for one node:
replication factors and minimum in-sync replicas of the internal topics at 1, and
``group.initial.rebalance.delay.ms=0`` (the default 3 s delays every group's first join), and no
time-based retention (``log.retention.ms=-1``): records stamped days or years back, as examples and
backtests of history write them, would otherwise be deleted at the broker's next retention check.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kstream_nb.errors import StreamsError

#: The Apache Kafka release the project runs and tests against.
KAFKA_VERSION = "4.4.0"
#: The slf4j binding the broker logs through (Kafka 4 logs with log4j 2; its jars bring no binding).
LOG4J_VERSION = "2.25.5"
DEFAULT_PORT = 9092
DEFAULT_DATA_DIR = Path.home() / ".kstream_nb" / "kafka"
MIN_JAVA = 17

_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>kstream_nb</groupId>
  <artifactId>local-kafka</artifactId>
  <version>{kafka}</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId><version>{kafka}</version>
    </dependency>
    <dependency>
      <groupId>org.apache.logging.log4j</groupId><artifactId>log4j-slf4j-impl</artifactId><version>{log4j}</version>
    </dependency>
  </dependencies>
</project>
"""

_LOG4J = """rootLogger.level=INFO
rootLogger.appenderRef.file.ref=file
appender.file.type=File
appender.file.name=file
appender.file.fileName={log}
appender.file.layout.type=PatternLayout
appender.file.layout.pattern=[%d] %p %m (%c)%n
logger.kafka.name=kafka
logger.kafka.level=INFO
logger.state.name=state.change.logger
logger.state.level=WARN
"""


class LocalKafkaError(StreamsError):
    """The local broker could not be installed, started or stopped; the message says why and what to do."""


def cache_dir() -> Path:
    """Where fetched jars are kept: ``$KSTREAM_NB_CACHE``, else ``$XDG_CACHE_HOME/kstream_nb`` or
    ``~/.cache/kstream_nb``."""
    if os.environ.get("KSTREAM_NB_CACHE"):
        return Path(os.environ["KSTREAM_NB_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "kstream_nb"


def java_version(java: str = "java") -> int:
    """The major version of ``java`` on the PATH; fails clearly when there is none or it is older than 17."""
    exe = shutil.which(java)
    if exe is None:
        raise LocalKafkaError(
            f"Apache Kafka needs Java {MIN_JAVA}+ and there is no `java` on the PATH "
            "(on Debian/Ubuntu: apt-get install -y openjdk-17-jre-headless)"
        )
    out = subprocess.run([exe, "-version"], capture_output=True, text=True, check=False).stderr
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out)
    if match is None:
        raise LocalKafkaError(f"cannot tell the version of {exe}: `java -version` said {out.strip()!r}")
    major = int(match.group(1))
    if major == 1 and match.group(2):  # "1.8.0_392" is Java 8
        major = int(match.group(2))
    if major < MIN_JAVA:
        raise LocalKafkaError(
            f"Apache Kafka {KAFKA_VERSION} needs Java {MIN_JAVA}+, but {exe} is Java {major} "
            "(on Debian/Ubuntu: apt-get install -y openjdk-17-jre-headless)"
        )
    return major


def kafka_jars(version: str = KAFKA_VERSION, *, quiet: bool = True) -> Path:
    """The folder of the broker's jars, fetched from Maven Central with ``mvn`` the first time."""
    home = cache_dir() / f"kafka-{version}"
    libs = home / "libs"
    done = home / "complete"
    if done.exists():
        return libs
    mvn = shutil.which("mvn")
    if mvn is None:
        raise LocalKafkaError(
            "fetching Apache Kafka's jars needs Maven (`mvn`) on the PATH "
            "(on Debian/Ubuntu: apt-get install -y maven)"
        )
    home.mkdir(parents=True, exist_ok=True)
    with _exclusive(home / ".lock"):  # another process (a test session, the CLI) may be fetching them
        if done.exists():
            return libs
        (home / "pom.xml").write_text(_POM.format(kafka=version, log4j=LOG4J_VERSION))
        shutil.rmtree(libs, ignore_errors=True)
        if not quiet:
            print(f"fetching Apache Kafka {version} from Maven Central into {libs} (once)", flush=True)
        cmd = [mvn, "-B", "-q", "dependency:copy-dependencies", "-DincludeScope=runtime",
               f"-DoutputDirectory={libs}"]  # fmt: skip
        proc = subprocess.run(cmd, cwd=home, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
            raise LocalKafkaError(
                f"Maven could not fetch org.apache.kafka:kafka_2.13:{version} (is Maven Central reachable?); "
                f"`{' '.join(cmd)}` in {home} said:\n{tail}"
            )
        if not (libs / f"kafka_2.13-{version}.jar").exists():
            raise LocalKafkaError(f"Maven finished but {libs} has no kafka_2.13-{version}.jar")
        done.write_text("\n".join(sorted(p.name for p in libs.glob("*.jar"))) + "\n")
    return libs


@contextmanager
def _exclusive(path: Path) -> Iterator[None]:
    """Holds an exclusive lock on ``path`` (a no-op where ``fcntl`` is missing)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    with path.open("a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _port_taken(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie (exited, not yet reaped by its parent) is not running
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] != "Z"
    except (OSError, IndexError):
        return True


def _runs_broker(pid: int, config: Path) -> bool:
    """Whether process ``pid`` is the broker started with ``config``: after a reboot or a crash the pid in
    a leftover pid file may belong to any other process, which ``status`` must not report and ``stop``
    must not signal. Without ``/proc`` (macOS) the pid file is trusted."""
    if not Path("/proc/self/cmdline").exists():
        return True
    try:
        args = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return False
    return "kafka.Kafka" in args and any(os.path.realpath(a) == os.path.realpath(config) for a in args if a)


def wait_until_answers(
    process: subprocess.Popen[bytes],
    answers: Callable[[], bool],
    timeout: float,
    what: str,
    where: str,
    log_path: Path,
    log_tail: Callable[[], str],
    error: type[Exception],
) -> None:
    """Polls ``answers()`` until a started server (``what``, asked at ``where``) answers; raises ``error`` with
    the end of its log when the process exits first or ``timeout`` seconds pass."""
    deadline = time.monotonic() + timeout
    while not answers():
        if process.poll() is not None:
            raise error(
                f"{what} exited with code {process.returncode} while starting; the end of its log:\n{log_tail()}"
            )
        if time.monotonic() > deadline:
            raise error(
                f"{what} did not answer {where} within {timeout:.0f} s; the end of its log ({log_path}):\n"
                f"{log_tail()}"
            )
        time.sleep(0.2)


@dataclass
class BrokerStatus:
    """What ``status()`` reports: whether the broker runs, where, and under which process id."""

    running: bool
    bootstrap_servers: str
    pid: int | None
    data_dir: Path
    log: Path

    def __str__(self) -> str:
        if self.running:
            where = f"{self.bootstrap_servers} (pid {self.pid}, data {self.data_dir})"
            return f"Kafka {KAFKA_VERSION} running on {where}"
        return f"Kafka not running (data {self.data_dir})"


class LocalKafka:
    """One single-node Apache Kafka whose data, settings, log and process id live under ``data_dir``.

    ``port=0`` picks a free port at each start. ``sasl_users`` (user -> password) makes the client
    listener SASL_PLAINTEXT with the PLAIN mechanism; ``client_config`` then holds the first user's settings.
    ``tls=True`` makes it SSL (SASL_SSL with users) with a self-signed certificate for 127.0.0.1 made by the
    JDK's ``keytool`` at the first start (``ca_file``, PEM, goes in a client's ``ssl.ca.location``).
    ``properties`` adds or overrides broker settings. The broker outlives this object (``kstream-nb kafka
    start`` exits and leaves it running); ``stop()`` ends it from any process through its pid file.
    """

    def __init__(
        self,
        data_dir: str | Path = DEFAULT_DATA_DIR,
        port: int = DEFAULT_PORT,
        *,
        sasl_users: Mapping[str, str] | None = None,
        properties: Mapping[str, Any] | None = None,
        heap: str = "1g",
        tls: bool = False,
    ) -> None:
        self.data_dir = Path(data_dir).expanduser().absolute()
        self.port = port
        self.sasl_users = dict(sasl_users or {})
        self.tls = tls
        self.properties = dict(properties or {})
        self.heap = heap

    # -- where things are -------------------------------------------------------------------------------

    @property
    def log_path(self) -> Path:
        return self.data_dir / "server.log"

    @property
    def _pid_file(self) -> Path:
        return self.data_dir / "broker.json"

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def ca_file(self) -> Path:
        """With ``tls``: the broker's self-signed certificate (PEM), the CA its clients trust."""
        return self.data_dir / "tls" / "ca.pem"

    @property
    def _protocol(self) -> str:
        if self.sasl_users:
            return "SASL_SSL" if self.tls else "SASL_PLAINTEXT"
        return "SSL" if self.tls else "PLAINTEXT"

    @property
    def client_config(self) -> dict[str, str]:
        """The settings a client needs besides ``bootstrap.servers`` (SASL credentials, the TLS CA)."""
        config: dict[str, str] = {}
        if self.sasl_users or self.tls:
            config["security.protocol"] = self._protocol
        if self.sasl_users:
            user, password = next(iter(self.sasl_users.items()))
            config.update({"sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": password})
        if self.tls:
            config["ssl.ca.location"] = str(self.ca_file)
        return config

    def _server_properties(self, controller_port: int) -> dict[str, Any]:
        protocol = self._protocol
        props: dict[str, Any] = {
            "process.roles": "broker,controller",
            "node.id": 1,
            "controller.quorum.bootstrap.servers": f"127.0.0.1:{controller_port}",
            "listeners": f"CLIENT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{controller_port}",
            "advertised.listeners": f"CLIENT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "CLIENT",
            "listener.security.protocol.map": f"CONTROLLER:PLAINTEXT,CLIENT:{protocol}",
            "log.dirs": str(self.data_dir / "logs"),
            "num.partitions": 1,
            "offsets.topic.replication.factor": 1,
            "transaction.state.log.replication.factor": 1,
            "transaction.state.log.min.isr": 1,
            "share.coordinator.state.topic.replication.factor": 1,
            "share.coordinator.state.topic.min.isr": 1,
            "group.initial.rebalance.delay.ms": 0,
            "log.retention.ms": -1,
        }
        if self.sasl_users:
            users = " ".join(f'user_{u}="{p}"' for u, p in self.sasl_users.items())
            user, password = next(iter(self.sasl_users.items()))
            props["sasl.enabled.mechanisms"] = "PLAIN"
            props["sasl.mechanism.inter.broker.protocol"] = "PLAIN"
            props["listener.name.client.plain.sasl.jaas.config"] = (
                "org.apache.kafka.common.security.plain.PlainLoginModule required "
                f'username="{user}" password="{password}" {users};'
            )
        if self.tls:
            props["ssl.keystore.type"] = "PKCS12"
            props["ssl.keystore.location"] = str(self.ca_file.parent / "broker.p12")
            props["ssl.keystore.password"] = props["ssl.key.password"] = self._keystore_password()
            props["ssl.truststore.type"] = "PKCS12"
            props["ssl.truststore.location"] = str(self.ca_file.parent / "trust.p12")
            props["ssl.truststore.password"] = props["ssl.keystore.password"]
        props.update(self.properties)
        return props

    def _keystore_password(self) -> str:
        return (self.ca_file.parent / "password").read_text().strip()

    def _make_certificate(self) -> None:
        """A self-signed certificate for 127.0.0.1/localhost in a PKCS12 keystore, and its PEM (once)."""
        folder = self.ca_file.parent
        keystore = folder / "broker.p12"
        if keystore.exists() and self.ca_file.exists():
            return
        java = shutil.which("java")
        keytool = shutil.which("keytool") or (java and str(Path(os.path.realpath(java)).parent / "keytool"))
        if not keytool or not Path(keytool).exists():
            raise LocalKafkaError(
                "a TLS broker needs the JDK's `keytool` (apt-get install -y openjdk-17-jdk-headless)"
            )
        folder.mkdir(parents=True, exist_ok=True)
        keystore.unlink(missing_ok=True)
        (folder / "trust.p12").unlink(missing_ok=True)
        password = uuid.uuid4().hex
        (folder / "password").write_text(password + "\n")
        (folder / "password").chmod(0o600)
        for cmd in (
            [keytool, "-genkeypair", "-keystore", str(keystore), "-storetype", "PKCS12", "-storepass", password,
             "-alias", "kafka", "-keyalg", "RSA", "-keysize", "2048", "-validity", "3650",
             "-dname", "CN=localhost", "-ext", "SAN=IP:127.0.0.1,DNS:localhost"],
            [keytool, "-exportcert", "-rfc", "-keystore", str(keystore), "-storetype", "PKCS12",
             "-storepass", password, "-alias", "kafka", "-file", str(self.ca_file)],
            # the broker is its own client (inter-broker listener): it trusts its certificate
            [keytool, "-importcert", "-noprompt", "-keystore", str(folder / "trust.p12"), "-storetype", "PKCS12",
             "-storepass", password, "-alias", "ca", "-file", str(self.ca_file)],
        ):  # fmt: skip
            proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
            if proc.returncode != 0:
                raise LocalKafkaError(
                    f"keytool failed ({' '.join(cmd[:2])}):\n{(proc.stdout + proc.stderr).strip()}"
                )

    # -- lifecycle ---------------------------------------------------------------------------------------

    def _recorded(self) -> dict[str, Any] | None:
        try:
            return dict(json.loads(self._pid_file.read_text()))
        except (OSError, ValueError):
            return None

    def _alive(self, pid: object) -> bool:
        """Whether ``pid`` (from the pid file) is this data dir's broker, still running."""
        return isinstance(pid, int) and _pid_alive(pid) and _runs_broker(pid, self.data_dir / "server.properties")

    def status(self) -> BrokerStatus:
        """Whether the broker of ``data_dir`` runs (by its recorded process id), and on which port."""
        rec = self._recorded()
        pid = rec.get("pid") if rec else None
        running = self._alive(pid)
        port = rec.get("port", self.port) if rec and running else self.port
        return BrokerStatus(running, f"127.0.0.1:{port}", pid if running else None, self.data_dir, self.log_path)

    def start(self, timeout: float = 60.0, *, quiet: bool = True) -> LocalKafka:
        """Fetches the jars if needed, formats the storage once, starts the broker and waits until it
        answers a metadata request. Already running: returns at once (with its port)."""
        current = self.status()
        if current.running:
            rec = self._recorded() or {}
            self.port = int(rec.get("port", self.port))
            return self
        java_version()
        libs = kafka_jars(quiet=quiet)
        if self.port == 0:
            self.port = free_port()
        elif _port_taken(self.port):
            raise LocalKafkaError(
                f"port {self.port} on 127.0.0.1 is taken by another process; stop it or choose another "
                "port (kstream-nb kafka start --port N)"
            )
        rec = self._recorded() or {}
        controller_port = int(rec.get("controller_port", 0)) or free_port()
        if _port_taken(controller_port):
            controller_port = free_port()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if self.tls:
            self._make_certificate()
        props = self._server_properties(controller_port)
        config = self.data_dir / "server.properties"
        config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        log4j = self.data_dir / "log4j2.properties"
        log4j.write_text(_LOG4J.format(log=self.log_path))
        classpath = f"{libs}/*"
        logs = self.data_dir / "logs"
        if not (logs / "meta.properties").exists():
            self._format(classpath, config)
        console = self.data_dir / "console.log"
        with console.open("wb") as out:
            process = subprocess.Popen(
                ["java", f"-Xmx{self.heap}", "-XX:+UseG1GC", "-Djava.awt.headless=true",
                 f"-Dlog4j2.configurationFile={log4j}", "-cp", classpath, "kafka.Kafka", str(config)],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
            )  # fmt: skip
        self._process = process
        self._pid_file.write_text(
            json.dumps({"pid": process.pid, "port": self.port, "controller_port": controller_port})
        )
        try:
            self._wait_until_ready(process, timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _format(self, classpath: str, config: Path) -> None:
        cluster_id = "-"
        while cluster_id.startswith("-"):  # as Kafka's Uuid.randomUuid: "-..." would read as an option
            cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        cmd = ["java", "-cp", classpath, "kafka.tools.StorageTool", "format", "--standalone",
               "-t", cluster_id, "-c", str(config)]  # fmt: skip
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise LocalKafkaError(
                f"formatting Kafka's storage under {self.data_dir} failed (exit code {proc.returncode}):\n"
                f"{(proc.stdout + proc.stderr).strip()}"
            )

    def _wait_until_ready(self, process: subprocess.Popen[bytes], timeout: float) -> None:
        from confluent_kafka.admin import AdminClient

        admin = AdminClient(
            {"bootstrap.servers": self.bootstrap_servers, "socket.connection.setup.timeout.ms": 1000,
             "log_level": 0, **self.client_config}
        )  # fmt: skip

        def answers() -> bool:
            try:
                return bool(admin.list_topics(timeout=1).brokers)
            except Exception:
                return False

        wait_until_answers(process, answers, timeout, "Kafka", f"on {self.bootstrap_servers}", self.log_path,
                           self.log_tail, LocalKafkaError)  # fmt: skip

    def log_tail(self, lines: int = 30) -> str:
        """The last lines of the broker's log and console output, for error messages."""
        parts = []
        for path in (self.log_path, self.data_dir / "console.log"):
            try:
                text = path.read_text(errors="replace").splitlines()[-lines:]
            except OSError:
                continue
            if text:
                parts.append(f"--- {path.name}\n" + "\n".join(text))
        return "\n".join(parts) or "(no log written)"

    def stop(self, timeout: float = 30.0) -> bool:
        """Stops the broker by its recorded process id: SIGTERM (a clean shutdown), SIGKILL after
        ``timeout``. Returns False when it was not running."""
        return self._signal(signal.SIGTERM, timeout)

    def kill(self) -> bool:
        """Ends the broker at once (SIGKILL), as a crash would; its data stays for the next start."""
        return self._signal(signal.SIGKILL, 10.0)

    def _signal(self, sig: signal.Signals, timeout: float) -> bool:
        rec = self._recorded()
        pid = rec.get("pid") if rec else None
        if not isinstance(pid, int) or not self._alive(pid):
            self._pid_file.unlink(missing_ok=True)
            return False
        os.kill(pid, sig)
        if not self._wait_gone(pid, timeout) and sig != signal.SIGKILL:
            os.kill(pid, signal.SIGKILL)
            self._wait_gone(pid, 10.0)
        if _pid_alive(pid):
            raise LocalKafkaError(f"Kafka (pid {pid}) did not stop")
        self._pid_file.unlink(missing_ok=True)
        return True

    def _wait_gone(self, pid: int, timeout: float) -> bool:
        process = getattr(self, "_process", None)
        if process is not None and process.pid == pid:
            try:
                process.wait(timeout)
                return True
            except subprocess.TimeoutExpired:
                return False
        deadline = time.monotonic() + timeout
        while _pid_alive(pid):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.1)
        return True

    def __enter__(self) -> LocalKafka:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
