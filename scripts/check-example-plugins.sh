#!/usr/bin/env bash
# The example plugins of examples/plugins/, built as a vendor builds them and proved by the
# conformance kit as a vendor's CI runs it (examples/ci/): the whole selection with the ABI
# checks (exit 0: no mismatch, no failure), then in two shards that must add up to it.
# Also holds each example to its size budget (code lines: no blank or comment lines).
# Needs a release build (`cargo build --workspace --release`, which builds rust-addmul).
#   scripts/check-example-plugins.sh [REPORT_DIR]   (default baton-reports/examples)
# BATON_TARGET=DIR takes the kit and rust-addmul from DIR instead of target/release.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-baton-reports/examples}
bin=${BATON_TARGET:-target/release}
kit=$bin/baton-conformance
[[ -x $kit ]] || { echo "$kit missing: cargo build --workspace --release" >&2; exit 1; }
mkdir -p "$out"

# Code lines: comments and blank lines removed (gcc's preprocessor strips C comments;
# Rust comment lines start with //).
c_lines=$(gcc -fpreprocessed -dD -E -P examples/plugins/c-addmul/addmul.c | grep -cv '^\s*$')
rs_lines=$(grep -v '^\s*//' examples/plugins/rust-addmul/src/lib.rs | grep -cv '^\s*$')
echo "example sizes: c-addmul $c_lines code lines (budget 150), rust-addmul $rs_lines (budget 60)"
(( c_lines <= 150 && rs_lines <= 60 )) || { echo "FAIL: an example plugin is over its budget"; exit 1; }

gcc -std=c11 -O2 -Wall -Wextra -Werror -shared -fPIC -Idelegate-api/include \
    examples/plugins/c-addmul/addmul.c -o "$bin/libc_addmul.so"

cases() { python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["cases"]))' "$1"; }
for lib in "$bin/libc_addmul.so" "$bin/librust_addmul.so"; do
    name=$(basename "$lib" .so)
    "$kit" --plugin "$lib" --ops Add,Sub,Mul,Model --abi-checks --report-dir "$out/$name"
    total=$(cases "$out/$name/report.json")
    sum=0
    for i in 1 2; do
        "$kit" --plugin "$lib" --ops Add,Sub,Mul,Model --abi-checks --shard "$i/2" \
            --isolate case --report-dir "$out/$name-shard$i" 2>/dev/null
        sum=$((sum + $(cases "$out/$name-shard$i/report.json")))
    done
    [[ $sum == "$total" ]] || { echo "FAIL: $name: shards ran $sum cases, the whole run $total"; exit 1; }
    echo "ok: $name: $total cases, 0 failed; shards 1/2 and 2/2 (one process per case) add up"
done
