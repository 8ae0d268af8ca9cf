#!/usr/bin/env bash
# Runs the terminal demo (word count + revenue per user on the embedded cluster):
#     bash scripts/demo.sh [--seconds N] [--seed S] ...     (arguments go to `python -m kstream_nb demo`)
# or opens the teaching notebooks in JupyterLab:
#     bash scripts/demo.sh --lab [jupyter lab options]
# Creates .venv (Python >= 3.10) on first use and installs kstream_nb into it in editable mode.

source "$(dirname "${BASH_SOURCE[0]}")/_venv.sh"

if [[ "${1:-}" == "--lab" ]]; then
    shift
    echo "==> installing kstream_nb with the jupyter extra into .venv"
    pip_install -e ".[jupyter]"
    # an editable install skips the wheel's data files: link the prebuilt "Streams" panel extension in
    mkdir -p "$VENV/share/jupyter/labextensions"
    ln -sfn "$ROOT/kstream_nb/labextension" "$VENV/share/jupyter/labextensions/kstream-nb"
    # and the settings the wheel ships (jupyter-settings/: no Jupyter-news toast), where JupyterLab reads them
    mkdir -p "$VENV/share/jupyter/lab/settings/overrides.d"
    ln -sfn "$ROOT/jupyter-settings/kstream-nb.json" "$VENV/share/jupyter/lab/settings/overrides.d/kstream-nb.json"
    echo "==> starting JupyterLab on notebooks/ (Ctrl-C to stop)"
    exec "$VENV_PY" -m jupyterlab --notebook-dir="$ROOT/notebooks" "$@"
fi

echo "==> installing kstream_nb into .venv"
pip_install -e .
exec "$VENV_PY" -m kstream_nb demo "$@"
