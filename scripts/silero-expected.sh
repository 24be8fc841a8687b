#!/usr/bin/env bash
# Makes the expected outputs of silero VAD for the streaming tests: a venv in
# .cache/silero-venv with the pinned ONNX Runtime and numpy (scripts/silero-requirements.txt,
# by hash), then scripts/silero_expected.py, which streams a synthetic 4 s signal through
# ONNX Runtime chunk by chunk and writes .npy files to CACHE_DIR/expected.
#
#   scripts/silero-expected.sh [CACHE_DIR]     (default .cache/silero; run fetch-silero.sh first)
#
# Idempotent: does nothing when the expected data of this script version is there.
set -euo pipefail

cd "$(dirname "$0")/.."
CACHE_DIR=${1:-.cache/silero}
VENV=.cache/silero-venv
STAMP="$CACHE_DIR/expected/.complete-v1"

if [ -f "$STAMP" ]; then
    echo "silero expected data already in $CACHE_DIR/expected"
    exit 0
fi
if [ ! -f "$CACHE_DIR/silero_vad.onnx" ]; then
    echo "silero-expected: $CACHE_DIR/silero_vad.onnx is missing; run scripts/fetch-silero.sh" >&2
    exit 1
fi
# A venv where python3 can make one; else (no ensurepip) a --target directory on PYTHONPATH.
PY=("$VENV/bin/python")
if [ -d "$VENV/site" ]; then
    PY=(env PYTHONPATH="$VENV/site" python3)
fi
if ! "${PY[@]}" -c 'import onnxruntime, numpy' 2>/dev/null; then
    rm -rf "$VENV"
    if python3 -m venv "$VENV" 2>/dev/null; then
        PY=("$VENV/bin/python")
        "${PY[@]}" -m pip install --quiet --no-deps --require-hashes \
            -r scripts/silero-requirements.txt
    else
        rm -rf "$VENV"
        python3 -m pip install --quiet --no-deps --require-hashes \
            --target "$VENV/site" -r scripts/silero-requirements.txt
        PY=(env PYTHONPATH="$VENV/site" python3)
    fi
fi
rm -rf "$CACHE_DIR/expected"
"${PY[@]}" scripts/silero_expected.py "$CACHE_DIR/silero_vad.onnx" "$CACHE_DIR/expected"
touch "$STAMP"
