#!/usr/bin/env bash
# Differential test of kstream_nb against Kafka Streams 4.4 (tests/reference/SPEC.md): generated (or given)
# cases run on both the Java reference runner and kstream_nb's TopologyTestDriver; differences are shrunk and
# written, with both results, to --out (default /tmp/reference-diff).
#     bash scripts/reference_diff.sh [--cases N] [--seed S] [--out DIR] [--cases-file F]
# Builds the Java runner with Maven (tests/reference/java) when its jar is missing or older than its sources.
# Exit status 0 iff no case differs.

source "$(dirname "${BASH_SOURCE[0]}")/_venv.sh"

MISSING=()
command -v java >/dev/null 2>&1 || MISSING+=(openjdk-17-jdk-headless)
command -v mvn >/dev/null 2>&1 || MISSING+=(maven)
if [[ ${#MISSING[@]} -gt 0 ]]; then
    apt_install "to build and run the Java reference runner" "${MISSING[@]}"
fi
if ! "$VENV_PY" -c "import kstream_nb" >/dev/null 2>&1; then
    echo "==> installing kstream_nb[dev] into .venv"
    pip_install -e ".[dev]"
fi

"$VENV_PY" -m tests.reference.build
exec "$VENV_PY" -m tests.reference.diff "$@"
