"""Builds the Java reference runner (tests/reference/java) with Maven when its jar is missing or older than its
sources or pom: the one build step of scripts/reference_diff.sh and of the reference-diff tests.

    python -m tests.reference.build
"""

from __future__ import annotations

import fcntl
import shutil
import subprocess
import sys
from pathlib import Path

JAVA_DIR = Path(__file__).parent / "java"
POM = JAVA_DIR / "pom.xml"
JAR = JAVA_DIR / "target" / "reference-runner.jar"
LOCK = Path("/tmp/kstream-nb-reference-runner-build.lock")


class BuildError(RuntimeError):
    """Maven could not build the runner (the message holds its output)."""


def sources() -> list[Path]:
    return [POM, *(p for p in (JAVA_DIR / "src").rglob("*") if p.is_file())]


def is_stale(jar: Path = JAR) -> bool:
    """True when the jar is missing or older than the pom or a source file."""
    if not jar.is_file():
        return True
    built = jar.stat().st_mtime
    return any(p.stat().st_mtime > built for p in sources())


def ensure_jar(quiet: bool = False) -> Path:
    """The runner's jar, built first (``mvn -q -DskipTests package``) when stale; raises BuildError with Maven's
    output when the build fails. Concurrent callers wait for each other (a file lock)."""
    if not POM.is_file():
        raise BuildError(f"{POM} is missing: the Java reference runner is not in this checkout")
    mvn = shutil.which("mvn")
    with LOCK.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not is_stale():
            return JAR
        if mvn is None:
            raise BuildError("mvn is not installed (Debian: apt-get install -y maven); it builds the Java runner")
        if not quiet:
            print(f"==> building the Java reference runner: mvn -q -f {POM} -DskipTests package", flush=True)
        cmd = [mvn, "-q", "-B", "-f", str(POM), "-DskipTests", "package"]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0 or not JAR.is_file():
            output = f"{proc.stdout[-8000:]}\n{proc.stderr[-8000:]}"
            raise BuildError(f"mvn package failed (exit {proc.returncode}) in {JAVA_DIR}:\n{output}")
        return JAR


def main() -> int:
    try:
        print(ensure_jar())
    except BuildError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
