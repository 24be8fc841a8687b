#!/usr/bin/env bash
# Plugins built once against ABI 1.1 (../shared/abi-compat, see its README) must keep running
# on this host with the same results, and the forged ones must be refused before any call
# with a message naming the fault. Needs a release build (`cargo build --workspace --release`).
#   scripts/check-abi-compat.sh [DIR]   (default ../shared/abi-compat)
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-../shared/abi-compat}
kit=./target/release/baton-conformance
[[ -x $kit ]] || { echo "$kit missing: cargo build --workspace --release" >&2; exit 1; }
(cd "$dir" && sha256sum --quiet -c SHA256SUMS)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
fail=0

for name in libvendor_c_addmul libvendor_rs_addmul libvendor_rs_addmul_wire; do
    log="$out/$name.log"
    if "$kit" --plugin "$dir/$name.so" --ops Add,Sub,Mul --report-dir "$out/$name" >"$log" 2>&1 \
        && grep -q "passed — 66 pass, 60 unsupported$" "$log"; then
        echo "ok: $name runs (66 pass, 60 unsupported, 0 mismatch)"
    else
        echo "FAIL: $name no longer runs as it did on ABI 1.1:"; tail -5 "$log"; fail=1
    fi
done

# name, then a fragment the refusal must contain
for pair in "libvendor_c_addmul_abi2:ABI 2.1 is not compatible with this host's ABI 1." \
            "libvendor_c_addmul_short:struct_size 160"; do
    name=${pair%%:*}; want=${pair#*:}
    log="$out/$name.log"
    if "$kit" --plugin "$dir/$name.so" --ops Add --report-dir "$out/$name" >"$log" 2>&1; then
        echo "FAIL: forged $name was accepted"; fail=1
    elif grep -qF "$want" "$log" && ! grep -qiE "panick|segmentation|core dumped" "$log"; then
        echo "ok: forged $name refused ($want)"
    else
        echo "FAIL: forged $name not refused cleanly:"; tail -5 "$log"; fail=1
    fi
done
exit $fail
