#!/usr/bin/env bash
# Fetches the silero VAD v6 ONNX model (silero_vad/data/silero_vad.onnx of the pinned
# silero-vad wheel) into CACHE_DIR (default .cache/silero), for the streaming tests.
#
#   scripts/fetch-silero.sh [CACHE_DIR]
#
# Pinned: silero-vad 6.2.3 (a pure-Python wheel), checked by sha256. Idempotent: when
# CACHE_DIR already holds the model of this version, it does nothing and needs no network.
set -euo pipefail

SILERO_VERSION=6.2.3
WHEEL=silero_vad-6.2.3-py3-none-any.whl
WHEEL_SHA256=7b7f5436cfcb02fae583a05b512ea96467fd449fe54cb49a5e4f06c51a1e43b8

cd "$(dirname "$0")/.."
CACHE_DIR=${1:-.cache/silero}
STAMP="$CACHE_DIR/.complete-silero-$SILERO_VERSION"

if [ -f "$STAMP" ]; then
    echo "silero VAD $SILERO_VERSION already in $CACHE_DIR"
    exit 0
fi

mkdir -p "$CACHE_DIR"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

PIP=(python3 -m pip)
"${PIP[@]}" --version >/dev/null 2>&1 || PIP=(pip)
"${PIP[@]}" download --no-deps --only-binary=:all: "silero-vad==$SILERO_VERSION" -d "$TMP" >&2

if [ ! -f "$TMP/$WHEEL" ]; then
    echo "fetch-silero: expected $WHEEL, got: $(ls "$TMP")" >&2
    exit 1
fi
got=$(sha256sum "$TMP/$WHEEL" | cut -d' ' -f1)
if [ "$got" != "$WHEEL_SHA256" ]; then
    echo "fetch-silero: $WHEEL: sha256 $got, expected $WHEEL_SHA256" >&2
    exit 1
fi

python3 - "$TMP/$WHEEL" "$CACHE_DIR/silero_vad.onnx" <<'PY'
import sys, zipfile
wheel, dest = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z, z.open("silero_vad/data/silero_vad.onnx") as src:
    data = src.read()
with open(dest + ".partial", "wb") as out:
    out.write(data)
PY
mv "$CACHE_DIR/silero_vad.onnx.partial" "$CACHE_DIR/silero_vad.onnx"
touch "$STAMP"
echo "silero VAD $SILERO_VERSION: $CACHE_DIR/silero_vad.onnx"
