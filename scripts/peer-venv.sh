#!/usr/bin/env bash
# A Python with the peers of scripts/peer-requirements.txt (ONNX Runtime, numpy, onnx; pinned by
# hash) in .cache/peer-venv (gitignored). Needs network once; idempotent afterwards.
# Prints the interpreter's path on its last line:
#   python=$(scripts/peer-venv.sh)
# Where python3 cannot make a venv (no ensurepip), the packages go to a --target directory
# and .cache/peer-venv/bin/python is a wrapper that puts it on PYTHONPATH.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.cache/peer-venv
REQ=scripts/peer-requirements.txt
STAMP="$VENV/.requirements-sha256"
want=$(sha256sum "$REQ" | cut -d' ' -f1)
if [[ -x "$VENV/bin/python" && -f "$STAMP" && "$(cat "$STAMP")" == "$want" ]]; then
    echo "$VENV/bin/python"
    exit 0
fi
rm -rf "$VENV"
if python3 -m venv "$VENV" 2>/dev/null; then
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
        --no-deps --require-hashes -r "$REQ" >&2
else
    rm -rf "$VENV"
    python3 -m pip install --quiet --disable-pip-version-check \
        --no-deps --require-hashes --target "$VENV/site" -r "$REQ" >&2
    mkdir -p "$VENV/bin"
    printf '#!/bin/sh\nPYTHONPATH="%s/site${PYTHONPATH:+:$PYTHONPATH}" exec python3 "$@"\n' \
        "$(pwd)/$VENV" > "$VENV/bin/python"
    chmod +x "$VENV/bin/python"
fi
"$VENV/bin/python" -c 'import onnxruntime, numpy, onnx; print("peer python: onnxruntime", onnxruntime.__version__, "numpy", numpy.__version__, "onnx", onnx.__version__)' >&2
echo "$want" > "$STAMP"
echo "$VENV/bin/python"
