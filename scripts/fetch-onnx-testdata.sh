#!/usr/bin/env bash
# Fetches the ONNX backend test data (onnx/backend/test/data/: node, pytorch-operator,
# pytorch-converted, simple, light and real, whose data.json files give the light models'
# tolerances) from the pinned onnx wheel into CACHE_DIR
# (default .cache/onnx-testdata), for `baton-conformance --suite`.
#
#   scripts/fetch-onnx-testdata.sh [CACHE_DIR]
#
# Pinned: onnx 1.22.0, the cp311 manylinux_2_28 x86_64 wheel, checked by sha256 (the data
# files are the same in every wheel of a version; one wheel is pinned so the hash is too).
# Idempotent: when CACHE_DIR already holds the extracted data of this version, it does
# nothing and needs no network.
set -euo pipefail

ONNX_VERSION=1.22.0
WHEEL=onnx-1.22.0-cp311-cp311-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl
WHEEL_SHA256=1d0a2bdb15eb2b3cb65c438f3423d9620d14fdce32f92380e6bb1b2e09568ef5

cd "$(dirname "$0")/.."
CACHE_DIR=${1:-.cache/onnx-testdata}
STAMP="$CACHE_DIR/.complete-onnx-$ONNX_VERSION"

if [ -f "$STAMP" ]; then
    echo "onnx test data $ONNX_VERSION already in $CACHE_DIR"
    exit 0
fi

mkdir -p "$CACHE_DIR"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

if [ -f "$CACHE_DIR/$WHEEL" ]; then
    cp "$CACHE_DIR/$WHEEL" "$TMP/"
else
    PIP=(python3 -m pip)
    "${PIP[@]}" --version >/dev/null 2>&1 || PIP=(pip)
    "${PIP[@]}" download --no-deps --only-binary=:all: \
        --platform manylinux_2_28_x86_64 --python-version 3.11 \
        --implementation cp --abi cp311 \
        "onnx==$ONNX_VERSION" -d "$TMP" >&2
fi

if [ ! -f "$TMP/$WHEEL" ]; then
    echo "fetch-onnx-testdata: expected $WHEEL, got: $(ls "$TMP")" >&2
    exit 1
fi
got=$(sha256sum "$TMP/$WHEEL" | cut -d' ' -f1)
if [ "$got" != "$WHEEL_SHA256" ]; then
    echo "fetch-onnx-testdata: $WHEEL: sha256 $got, expected $WHEEL_SHA256" >&2
    exit 1
fi

# Extract only onnx/backend/test/data/, then move its contents to CACHE_DIR.
rm -rf "$CACHE_DIR/data.partial"
python3 - "$TMP/$WHEEL" "$CACHE_DIR/data.partial" <<'PY'
import os, sys, zipfile
wheel, dest = sys.argv[1], sys.argv[2]
prefix = "onnx/backend/test/data/"
with zipfile.ZipFile(wheel) as z:
    for info in z.infolist():
        if not info.filename.startswith(prefix) or info.is_dir():
            continue
        rel = info.filename[len(prefix):]
        if rel.startswith("/") or ".." in rel.split("/"):
            sys.exit(f"unsafe path in wheel: {info.filename}")
        out = os.path.join(dest, rel)
        os.makedirs(os.path.dirname(out), exist_ok=True)
        with z.open(info) as src, open(out, "wb") as dst:
            dst.write(src.read())
PY
for d in "$CACHE_DIR"/data.partial/*; do
    name=$(basename "$d")
    rm -rf "${CACHE_DIR:?}/$name"
    mv "$d" "$CACHE_DIR/$name"
done
rmdir "$CACHE_DIR/data.partial"
touch "$STAMP"
echo "onnx test data $ONNX_VERSION extracted to $CACHE_DIR: $(ls "$CACHE_DIR" | tr '\n' ' ')"
