# Sourced by scripts/demo.sh and scripts/test.sh: cd to the repository root and make sure .venv exists,
# runs Python >= 3.10 and is usable. Afterwards $VENV_PY is the venv's python and `pip_install ARGS...`
# installs quietly (errors still show). Override the interpreter used to create the venv with PYTHON=...

set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/_apt.sh"

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
VENV="$ROOT/.venv"
VENV_PY="$VENV/bin/python"
MIN_PY="3.10"

die() {
    echo "error: $*" >&2
    exit 1
}

# version_ok PYTHON: true if that interpreter is >= 3.10
version_ok() {
    "$1" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else 1)' 2>/dev/null
}

find_python() {
    if [[ -n "${PYTHON:-}" ]]; then
        command -v "$PYTHON" >/dev/null 2>&1 || die "PYTHON=$PYTHON is not an executable"
        echo "$PYTHON"
        return
    fi
    local candidate
    for candidate in python3 python3.13 python3.12 python3.11 python3.10; do
        if command -v "$candidate" >/dev/null 2>&1 && version_ok "$candidate"; then
            echo "$candidate"
            return
        fi
    done
    command -v python3 >/dev/null 2>&1 && echo python3 && return
    die "python3 not found. kstream_nb needs Python >= $MIN_PY (on Debian/Ubuntu: sudo apt-get install -y python3 python3-venv)"
}

create_venv() {
    local py
    py="$(find_python)"
    if ! version_ok "$py"; then
        die "kstream_nb needs Python >= $MIN_PY, but $py is $("$py" -c 'import sys; print(sys.version.split()[0])'). Install a newer Python and run again with PYTHON=/path/to/python3.X"
    fi
    echo "==> creating .venv with $py ($("$py" -c 'import sys; print(sys.version.split()[0])'))"
    if ! try_venv "$py"; then
        # Debian's Python ships without ensurepip: its venv module is the python3.X-venv package
        local ver
        ver="$("$py" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')"
        apt_install "to create .venv ('$py -m venv' failed)" "python${ver}-venv"
        try_venv "$py" || die "'$py -m venv' still fails after installing python${ver}-venv"
    fi
}

# try_venv PYTHON: creates .venv with it; on failure shows why, removes the remains and returns 1
try_venv() {
    local log
    log="$(mktemp)"
    if "$1" -m venv "$VENV" >"$log" 2>&1; then
        rm -f "$log"
        return 0
    fi
    cat "$log" >&2
    rm -f "$log"
    rm -rf "$VENV"
    return 1
}

if [[ -x "$VENV_PY" ]] && "$VENV_PY" -m pip --version >/dev/null 2>&1; then
    if ! version_ok "$VENV_PY"; then
        die ".venv uses Python $("$VENV_PY" -c 'import sys; print(sys.version.split()[0])'), but kstream_nb needs >= $MIN_PY; delete .venv and run again"
    fi
else
    if [[ -e "$VENV" ]]; then
        echo "==> .venv is incomplete (no working python/pip): recreating it"
        rm -rf "$VENV"
    fi
    create_venv
fi

pip_install() {
    "$VENV_PY" -m pip install --quiet --disable-pip-version-check "$@"
}
