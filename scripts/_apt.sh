# Sourced by the scripts that need Debian packages: `apt_install WHY PACKAGE...` installs them with apt-get
# (as root, or through passwordless sudo) and fails loudly, naming them, when that is not possible.

apt_install() {
    local why="$1"
    shift
    echo "==> missing $why: $*; installing them with apt-get"
    local sudo=()
    if [[ "$(id -u)" -ne 0 ]]; then
        if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
            sudo=(sudo -n)
        else
            echo "error: this user can neither run apt-get (not root) nor sudo without a password." >&2
            echo "Install them yourself: sudo apt-get install -y $*" >&2
            exit 1
        fi
    fi
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "error: $* missing and there is no apt-get (not Debian/Ubuntu?); install them." >&2
        exit 1
    fi
    if ! "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q \
        || ! "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@"; then
        echo "error: 'apt-get install -y $*' failed; they are needed $why" >&2
        exit 1
    fi
}
