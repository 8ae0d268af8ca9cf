#!/usr/bin/env bash
# Makes sure the system tools the tests use are there, installing missing ones with apt-get (as root, or
# through sudo): Debian's Chromium at /usr/bin/chromium for the browser tests (driven by Playwright, the
# Python package from the dev extra; never a browser download of Playwright's own), npm for rebuilding the
# JupyterLab extension, and Java 17 for Spark. Fails loudly when that is not possible.
#     bash scripts/install_browser.sh
set -euo pipefail

CHROMIUM=/usr/bin/chromium

# the other system tools the test suite uses: npm (the extension is rebuilt from scratch) and Java 17 (Spark)
PACKAGES=()
[[ -x "$CHROMIUM" ]] || PACKAGES+=(chromium)
command -v npm >/dev/null 2>&1 || PACKAGES+=(nodejs npm)
command -v java >/dev/null 2>&1 || PACKAGES+=(openjdk-17-jre-headless)

if [[ ${#PACKAGES[@]} -gt 0 ]]; then
    echo "==> missing for the tests: ${PACKAGES[*]}; installing them with apt-get"
    if [[ "$(id -u)" -eq 0 ]]; then
        SUDO=()
    elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        SUDO=(sudo -n)
    else
        echo "error: this user can neither run apt-get (not root) nor sudo without a password." >&2
        echo "Install them yourself: sudo apt-get install -y ${PACKAGES[*]}" >&2
        exit 1
    fi
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "error: ${PACKAGES[*]} missing and there is no apt-get (not Debian/Ubuntu?); install them." >&2
        exit 1
    fi
    if ! "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q \
        || ! "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
            "${PACKAGES[@]}"; then
        echo "error: 'apt-get install -y ${PACKAGES[*]}' failed; the tests need them" >&2
        exit 1
    fi
fi

# (Debian's /usr/bin/chromium is a wrapper script that may print harmless shell warnings on stderr)
if ! version="$("$CHROMIUM" --version 2>/dev/null)" || [[ -z "$version" ]]; then
    echo "error: $CHROMIUM does not run:" >&2
    "$CHROMIUM" --version >&2 || true
    exit 1
fi
echo "==> browser for tests/browser: $version"
