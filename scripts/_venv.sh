# Shared by scripts/test and scripts/lab (sourced, not run): make sure the repository's
# virtualenv (.venv) exists and has dflab installed editable with the given extra, and (for CI)
# that the system packages the browser tests and the front-end check need are there.
#
# Re-installs only when pyproject.toml or binder/constraints.txt changed since the last install
# for that extra, so repeated runs start in seconds. Set DFLAB_PYTHON to choose the interpreter (3.10+).

dflab_ensure_venv() {
    local extra="$1"
    local root
    root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
    local venv="$root/.venv"
    local py="${DFLAB_PYTHON:-}"

    if [[ -z "$py" ]]; then
        for candidate in python3 python; do
            if command -v "$candidate" >/dev/null 2>&1; then
                py="$candidate"
                break
            fi
        done
    fi
    if [[ -z "$py" ]]; then
        echo "error: no python3 found; install Python 3.10+ or set DFLAB_PYTHON" >&2
        return 1
    fi
    if ! "$py" -c 'import sys; sys.exit(sys.version_info < (3, 10))'; then
        echo "error: dflab needs Python 3.10+, $py is $("$py" -V 2>&1)" >&2
        return 1
    fi

    if [[ ! -x "$venv/bin/python" ]]; then
        echo "==> creating virtualenv $venv"
        "$py" -m venv "$venv"
        "$venv/bin/python" -m pip install --quiet --upgrade pip
    fi

    # The stamp names the extra and the hash of pyproject.toml it was installed from.
    local hash
    # Installed under binder/constraints.txt: the versions the tutorials are tested with.
    hash="$("$venv/bin/python" -c 'import hashlib, sys
h = hashlib.sha256()
for path in sys.argv[1:]:
    h.update(open(path, "rb").read())
print(h.hexdigest()[:16])' "$root/pyproject.toml" "$root/binder/constraints.txt")"
    local stamp="$venv/.dflab-$extra-$hash"
    if [[ ! -e "$stamp" ]]; then
        echo "==> installing dflab[$extra] into $venv"
        # The browser tests drive the system's Chromium: playwright must not fetch its own.
        (cd "$root" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 \
            "$venv/bin/python" -m pip install --quiet -e ".[$extra]" \
            -c binder/constraints.txt)
        rm -f "$venv"/.dflab-"$extra"-*
        touch "$stamp"
    fi
    dflab_install_lab_settings "$venv"
    dflab_link_labextension "$venv"
    DFLAB_ROOT="$root"
    DFLAB_VENV="$venv"
}

# JupyterLab settings for a class: no news or update pop-ups over the widgets. Installed as the
# environment's overrides.json (defaults a user can still change in the settings editor).
dflab_install_lab_settings() {
    local prefix="$1"
    local root
    root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
    mkdir -p "$prefix/share/jupyter/lab/settings"
    cp "$root/binder/overrides.json" "$prefix/share/jupyter/lab/settings/overrides.json"
}

# dflab's prebuilt JupyterLab renderer (dflab/labextension, built from extension/lab). A wheel
# installs it as data files; an editable install does not, so link the checkout's build where
# JupyterLab looks (a rebuild is then what it loads, without reinstalling).
dflab_link_labextension() {
    local prefix="$1"
    local root
    root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
    local dest="$prefix/share/jupyter/labextensions/dflab-graph-renderer"
    if [[ "$(readlink "$dest" 2>/dev/null)" == "$root/dflab/labextension" ]]; then
        return 0
    fi
    mkdir -p "$(dirname "$dest")"
    rm -rf "$dest"
    ln -s "$root/dflab/labextension" "$dest"
}

# --- system packages for the browser tests and the front-end check (CI installs them) -------

DFLAB_APT_UPDATED=""

# Run a command as root: directly when we are root, through sudo otherwise.
_dflab_as_root() {
    if [[ "$(id -u)" == 0 ]]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo "$@"
    else
        echo "error: '$*' needs root and sudo is not installed" >&2
        return 1
    fi
}

# apt-get install the given Debian packages (apt-get update at most once per run).
_dflab_apt_install() {
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "error: no apt-get here; install these packages yourself: $*" >&2
        return 1
    fi
    if [[ -z "$DFLAB_APT_UPDATED" ]]; then
        _dflab_as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
        DFLAB_APT_UPDATED=1
    fi
    _dflab_as_root env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y -qq --no-install-recommends "$@"
}

# Debian's Chromium for the browser tests (tests/browser); Playwright never downloads one.
dflab_ensure_chromium() {
    if [[ -x /usr/bin/chromium ]]; then
        return 0
    fi
    echo "==> installing chromium (browser tests)"
    _dflab_apt_install chromium fonts-dejavu-core fonts-liberation
}

# Node and npm for the front-end check (extension/README.md).
dflab_ensure_node() {
    if command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; then
        return 0
    fi
    echo "==> installing nodejs and npm (front-end check)"
    _dflab_apt_install nodejs npm
}
