#!/usr/bin/env bash
# A Python environment with the peers Baton is compared with and checked against, at pinned
# versions, in .cache/peer-venv (gitignored). Needs network once; idempotent afterwards.
#   scripts/peer-venv.sh        -> prints the venv's python path on its last line
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.cache/peer-venv
# Exact pins: expected outputs and timings are only comparable at known versions.
PINS=(onnxruntime==1.32.0 numpy==2.4.6)
stamp="$VENV/.pins"
if [[ -x "$VENV/bin/python" && -f "$stamp" && "$(cat "$stamp")" == "${PINS[*]}" ]]; then
    echo "$VENV/bin/python"
    exit 0
fi
rm -rf "$VENV"
python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "${PINS[@]}" >&2
"$VENV/bin/python" -c 'import onnxruntime, numpy; print("peer venv: onnxruntime", onnxruntime.__version__, "numpy", numpy.__version__)' >&2
echo "${PINS[*]}" > "$stamp"
echo "$VENV/bin/python"
