#!/usr/bin/env bash
# Makes the expected outputs of silero VAD for the streaming tests: the pinned ONNX Runtime and numpy
# (scripts/peer-venv.sh: scripts/peer-requirements.txt, by hash), then scripts/silero_expected.py, which streams a synthetic 4 s signal through
# ONNX Runtime chunk by chunk and writes .npy files to CACHE_DIR/expected.
#
#   scripts/silero-expected.sh [CACHE_DIR]     (default .cache/silero; run fetch-silero.sh first)
#
# Idempotent: does nothing when the expected data of this script version is there.
set -euo pipefail

cd "$(dirname "$0")/.."
CACHE_DIR=${1:-.cache/silero}
STAMP="$CACHE_DIR/expected/.complete-v2"  # v2: onnxruntime 1.32.0

if [ -f "$STAMP" ]; then
    echo "silero expected data already in $CACHE_DIR/expected"
    exit 0
fi
if [ ! -f "$CACHE_DIR/silero_vad.onnx" ]; then
    echo "silero-expected: $CACHE_DIR/silero_vad.onnx is missing; run scripts/fetch-silero.sh" >&2
    exit 1
fi
PY=$(scripts/peer-venv.sh)
rm -rf "$CACHE_DIR/expected"
"$PY" scripts/silero_expected.py "$CACHE_DIR/silero_vad.onnx" "$CACHE_DIR/expected"
touch "$STAMP"
