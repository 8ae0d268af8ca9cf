#!/usr/bin/env bash
# Makes sure Debian's Chromium is at /usr/bin/chromium for the browser tests (tests/browser/), which drive
# it with Playwright (the Python package, from the dev extra). Never downloads a browser of Playwright's
# own (`playwright install` does not work here): installs the Debian package `chromium` with apt-get when
# /usr/bin/chromium is missing (as root, or through sudo). Fails loudly when that is not possible.
#     bash scripts/install_browser.sh
set -euo pipefail

CHROMIUM=/usr/bin/chromium

if [[ ! -x "$CHROMIUM" ]]; then
    echo "==> $CHROMIUM is missing: installing Debian's chromium with apt-get"
    if [[ "$(id -u)" -eq 0 ]]; then
        SUDO=()
    elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        SUDO=(sudo -n)
    else
        echo "error: $CHROMIUM is missing and this user can neither run apt-get (not root) nor sudo without" >&2
        echo "a password. Install it yourself: sudo apt-get install -y chromium" >&2
        exit 1
    fi
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "error: $CHROMIUM is missing and there is no apt-get (not Debian/Ubuntu?). Install Chromium so" >&2
        echo "that $CHROMIUM exists, then run again." >&2
        exit 1
    fi
    if ! "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q \
        || ! "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium; then
        echo "error: 'apt-get install -y chromium' failed; the browser tests (tests/browser) need $CHROMIUM" >&2
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
