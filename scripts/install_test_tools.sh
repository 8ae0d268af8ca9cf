#!/usr/bin/env bash
# Makes sure the system tools the tests use are there, installing missing ones with apt-get (as root, or
# through sudo): Debian's Chromium at /usr/bin/chromium for the browser tests (driven by Playwright, the
# Python package from the dev extra; never a browser download of Playwright's own), npm for rebuilding the
# JupyterLab extension, Java 17 for Spark and Apache Kafka, and Maven to fetch Kafka's jars from Maven
# Central. Fails loudly when that is not possible.
#     bash scripts/install_test_tools.sh
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/_apt.sh"

CHROMIUM=/usr/bin/chromium

# the other system tools the test suite uses: npm (the extension is rebuilt from scratch), Java 17 (Spark and
# the Kafka broker) and Maven (Kafka's jars)
PACKAGES=()
[[ -x "$CHROMIUM" ]] || PACKAGES+=(chromium)
command -v npm >/dev/null 2>&1 || PACKAGES+=(nodejs npm)
java_major() { java -version 2>&1 | sed -n 's/.* version "\(1\.\)\{0,1\}\([0-9]*\).*/\2/p' | head -1; }
if ! command -v java >/dev/null 2>&1 || [[ "$(java_major)" -lt 17 ]]; then
    PACKAGES+=(openjdk-17-jdk-headless) # Spark 4 and Kafka 4 need Java 17 or newer
fi
command -v mvn >/dev/null 2>&1 || PACKAGES+=(maven)

if [[ ${#PACKAGES[@]} -gt 0 ]]; then
    apt_install "for the tests" "${PACKAGES[@]}"
fi

# (Debian's /usr/bin/chromium is a wrapper script that may print harmless shell warnings on stderr)
if ! version="$("$CHROMIUM" --version 2>/dev/null)" || [[ -z "$version" ]]; then
    echo "error: $CHROMIUM does not run:" >&2
    "$CHROMIUM" --version >&2 || true
    exit 1
fi
echo "==> browser for tests/browser: $version"
