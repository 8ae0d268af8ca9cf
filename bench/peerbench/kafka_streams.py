"""The Kafka Streams (Java) peer: builds ``bench/peers/kafka-streams`` with Maven and gives its command line.

The Maven project has one main class, ``bench.KafkaStreamsPeer``, that takes the Python runners' arguments
(``--workload --bootstrap --input --output --group --config --state-dir ...``, see ``peers/_common.py``).
``mvn -B -q package`` compiles it into ``target/kafka-streams-peer.jar`` and copies its runtime
dependencies (kafka-streams 4.4.0, Jackson, slf4j-simple) into ``target/libs``; it runs again whenever the
jar is missing or older than the pom or a source file.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from .common import PEERS

PROJECT = PEERS / "kafka-streams"
TARGET = PROJECT / "target"
JAR = TARGET / "kafka-streams-peer.jar"
LIBS = TARGET / "libs"
MAIN_CLASS = "bench.KafkaStreamsPeer"
#: logs "Skipping record for expired window" for every late record
LATE_RECORD_LOGGER = "org.apache.kafka.streams.kstream.internals.KStreamWindowAggregate"
#: librdkafka's names of the shared consumer settings that Java's consumer spells differently
JAVA_NAMES = {"fetch.wait.max.ms": "fetch.max.wait.ms"}


class BuildError(RuntimeError):
    """Maven could not build the Kafka Streams peer; the message ends with the tail of its output."""


def _sources() -> list[Path]:
    return [PROJECT / "pom.xml", *sorted((PROJECT / "src").rglob("*.java"))]


def is_stale() -> bool:
    """True when the jar or its dependencies are missing, or the jar is older than a source."""
    if not JAR.exists() or not LIBS.is_dir() or not any(LIBS.glob("kafka-streams-*.jar")):
        return True
    built = JAR.stat().st_mtime
    return any(p.stat().st_mtime > built for p in _sources())


def build(log_dir: Path) -> str:
    """Builds the peer if needed; returns a note for the report. Raises ``BuildError`` when Maven fails."""
    from kstream_nb.cluster.local_kafka import java_version

    java = java_version()  # fails clearly without Java 17+
    note = "jar up to date"
    if is_stale():
        mvn = shutil.which("mvn")
        if mvn is None:
            raise BuildError("the Kafka Streams peer is built with Maven, and there is no `mvn` on the PATH")
        cmd = [mvn, "-B", "-q", "-Dstyle.color=never", "package"]
        log = log_dir / "mvn-kafka-streams.log"
        t0 = time.monotonic()
        with log.open("w") as out:
            rc = subprocess.run(cmd, cwd=PROJECT, stdout=out, stderr=subprocess.STDOUT, check=False).returncode
        if rc != 0 or not JAR.exists():
            text = re.sub(r"\x1b\[[0-9;]*m", "", log.read_text(errors="replace"))  # Maven's colours
            tail = "\n".join(text.strip().splitlines()[-25:])
            raise BuildError(f"`mvn {' '.join(cmd[1:])}` in {PROJECT} failed (exit {rc}; log {log}):\n{tail}")
        JAR.touch()  # newer than every source, even when Maven found nothing to recompile
        note = f"built by Maven in {time.monotonic() - t0:.0f} s"
    return f"Kafka Streams {streams_version()} on Java {java} ({note})"


def streams_version() -> str:
    """The kafka-streams version among the copied dependencies."""
    for jar in LIBS.glob("kafka-streams-*.jar"):
        if m := re.fullmatch(r"kafka-streams-(\d[\w.-]*)\.jar", jar.name):
            return m.group(1)
    return "?"


def launcher(java_opts: list[str]) -> list[str]:
    """The command line that starts the peer, before the workload's arguments."""
    return [
        "java",
        *java_opts,
        "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
        # one WARN line per late record would dominate the window workload (Quix's are off too); Kafka
        # Streams still counts them in its dropped-records metric
        f"-Dorg.slf4j.simpleLogger.log.{LATE_RECORD_LOGGER}=error",
        "-cp",
        f"{JAR}:{LIBS}/*",
        MAIN_CLASS,
    ]


def java_config(config: dict[str, Any]) -> dict[str, str]:
    """The shared consumer settings under Java's names (the peer gives each to its consumers)."""
    return {JAVA_NAMES.get(k, k): str(v) for k, v in config.items()}
