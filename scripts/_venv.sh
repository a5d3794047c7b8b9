# Shared by scripts/test and scripts/lab (sourced, not run): make sure the repository's
# virtualenv (.venv) exists and has dflab installed editable with the given extra.
#
# Re-installs only when pyproject.toml changed since the last install for that extra, so
# repeated runs start in seconds. Set DFLAB_PYTHON to choose the interpreter (3.10+).

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
    hash="$("$venv/bin/python" -c 'import hashlib, sys
print(hashlib.sha256(open(sys.argv[1], "rb").read()).hexdigest()[:16])' "$root/pyproject.toml")"
    local stamp="$venv/.dflab-$extra-$hash"
    if [[ ! -e "$stamp" ]]; then
        echo "==> installing dflab[$extra] into $venv"
        (cd "$root" && "$venv/bin/python" -m pip install --quiet -e ".[$extra]")
        rm -f "$venv"/.dflab-"$extra"-*
        touch "$stamp"
    fi
    DFLAB_ROOT="$root"
    DFLAB_VENV="$venv"
}
