#!/usr/bin/env bash
# Writes a QDQ (int8) model from an f32 ONNX model with ONNX Runtime's quantize_static
# (scripts/make_qdq.py: QDQ format, per-channel symmetric i8 weights, per-tensor i8
# activations, min/max calibration on the given input and seeded variations of it).
# Uses the pinned peer environment (scripts/peer-venv.sh), which includes `onnx`.
#
# Usage: scripts/make-qdq.sh MODEL.onnx INPUT.npy [OUT.onnx]
#   default OUT: .cache/qdq/<model>.qdq.onnx (gitignored; regenerate, do not commit)
set -euo pipefail
cd "$(dirname "$0")/.."
model=$1
input=$2
out=${3:-.cache/qdq/$(basename "${model%.onnx}").qdq.onnx}
mkdir -p "$(dirname "$out")"
python=$(scripts/peer-venv.sh | tail -n1)
"$python" scripts/make_qdq.py "$model" "$out" "$input"
