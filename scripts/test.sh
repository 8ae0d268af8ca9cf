#!/usr/bin/env bash
# The full check, as CI runs it: lint, format, types, every test. Stops at the first failing step.
#     bash scripts/test.sh [extra pytest arguments]
# Creates/updates .venv (Python >= 3.10) and installs kstream_nb with the dev extra.

source "$(dirname "${BASH_SOURCE[0]}")/_venv.sh"

echo "==> installing kstream_nb[dev] into .venv"
pip_install -e ".[dev]"

BIN="$VENV/bin"
echo "==> ruff check"
"$BIN/ruff" check .
echo "==> ruff format --check"
"$BIN/ruff" format --check .
echo "==> mypy"
"$BIN/mypy"
bash "$ROOT/scripts/install_test_tools.sh"
echo "==> Apache Kafka's jars (fetched from Maven Central once, into ~/.cache/kstream_nb)"
"$BIN/python" -c "from kstream_nb.cluster.local_kafka import kafka_jars; print(kafka_jars(quiet=False))"
echo "==> the test schema registry (Apicurio, built from Maven Central once, into ~/.cache/kstream_nb)"
"$BIN/python" -c "from tests.registry_server import registry_jar; print(registry_jar(quiet=False))"
echo "==> pytest"
"$BIN/python" -m pytest tests --nbval-lax --nbval-current-env notebooks "$@"
echo "==> all checks passed"
