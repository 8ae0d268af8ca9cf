#!/usr/bin/env bash
# Builds the JupyterLab extension (extension/) from scratch with npm into kstream_nb/labextension/, the
# prebuilt output that is committed and that the wheel ships under share/jupyter/labextensions/kstream-nb/
# (so `pip install kstream_nb` needs no node).
#
#     bash scripts/build_extension.sh            # npm install, JS unit tests (vitest), tsc, labextension build
#     bash scripts/build_extension.sh --check    # the same in a fresh copy; fails if the result differs
#                                                # from the committed kstream_nb/labextension/
#     bash scripts/build_extension.sh --no-test  # skip vitest
#
# Needs node >= 18 and npm (the npm registry); uses npm, not jlpm (jlpm's rspack platform package is
# missing from the registry here). Times on 2 cores: npm install ~35 s cold / ~8 s warm cache, vitest ~4 s,
# tsc ~3 s, labextension build ~4 s (`npm install` with the committed lock file: `npm ci` refuses it).

set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CHECK=0
TEST=1
for arg in "$@"; do
    case "$arg" in
        --check) CHECK=1 ;;
        --no-test) TEST=0 ;;
        -h | --help)
            sed -n '2,13p' "$0"
            exit 0
            ;;
        *)
            echo "error: unknown argument $arg (use --check, --no-test)" >&2
            exit 2
            ;;
    esac
done

command -v npm >/dev/null 2>&1 || {
    echo "error: npm not found; install node >= 18 with npm (Debian: apt-get install -y nodejs npm)" >&2
    exit 1
}

step() {
    local name="$1"
    shift
    local t0=$SECONDS
    echo "==> $name"
    "$@"
    echo "    ($name: $((SECONDS - t0)) s)"
}

build_in() {  # build_in DIR: DIR holds extension/ (and receives kstream_nb/labextension/)
    local dir="$1"
    cd "$dir/extension"
    rm -rf lib tsconfig.tsbuildinfo "$dir/kstream_nb/labextension"
    # npm ci refuses this lock file: rspack's optional platform bindings it names are not all on the registry
    step "npm install" npm install --no-audit --no-fund --loglevel=error
    if [[ "$TEST" == 1 ]]; then
        step "vitest" npx --no-install vitest run
    fi
    step "tsc" npm run --silent build:lib
    step "labextension build" npm run --silent build:labextension
    cd "$ROOT"
}

if [[ "$CHECK" == 1 ]]; then
    WORK="$(mktemp -d)"
    trap 'rm -rf "$WORK"' EXIT
    mkdir -p "$WORK/extension" "$WORK/kstream_nb"
    (cd "$ROOT/extension" && tar cf - --exclude=node_modules --exclude=lib --exclude=tsconfig.tsbuildinfo .) |
        (cd "$WORK/extension" && tar xf -)
    build_in "$WORK"
    if diff -r "$ROOT/kstream_nb/labextension" "$WORK/kstream_nb/labextension" >"$WORK/diff.txt"; then
        echo "==> fresh build matches the committed kstream_nb/labextension/"
    else
        head -40 "$WORK/diff.txt" >&2
        echo "error: kstream_nb/labextension/ is stale: run bash scripts/build_extension.sh and commit it" >&2
        exit 1
    fi
else
    build_in "$ROOT"
    echo "==> built $(find "$ROOT/kstream_nb/labextension" -type f | wc -l) files into kstream_nb/labextension/"
fi
