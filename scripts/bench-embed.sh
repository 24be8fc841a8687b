#!/usr/bin/env bash
# The embedding APIs' per-run overhead (a bench, not a test): one tiny ONNX model (x + b,
# then Relu, over f32[1, 16]: its compute is a few nanoseconds, so a run's time is the
# API's own cost) run 10 000 times each through the Rust API, the C API, the Python
# package and ONNX Runtime's Python API, on one thread, and printed as a table with each
# API's overhead over the Rust API (`Session::run_views`, the path the other two share).
#
# Usage: scripts/bench-embed.sh [RUNS]
# Needs the Python package installed by scripts/python-wheel.sh (.cache/baton-venv) and
# builds the overhead example in release.
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${1:-10000}"
python=.cache/baton-venv/bin/python
[[ -x $python ]] || { echo "run scripts/python-wheel.sh first (it makes $python)" >&2; exit 1; }
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
"$(scripts/peer-venv.sh)" - "$dir/tiny.onnx" <<'PY'
import sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
b = numpy_helper.from_array(np.linspace(-1, 1, 16, dtype=np.float32).reshape(1, 16), "b")
graph = helper.make_graph(
    [helper.make_node("Add", ["x", "b"], ["s"]), helper.make_node("Relu", ["s"], ["y"])],
    "tiny",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16])],
    [b],
)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
model.ir_version = 8
onnx.save(model, sys.argv[1])
PY
cargo build --release -q -p baton-capi --example overhead
target="${CARGO_TARGET_DIR:-target}"
{
    "$target/release/examples/overhead" "$dir/tiny.onnx" "$runs"
    "$python" scripts/bench_embed.py "$dir/tiny.onnx" "$runs"
} > "$dir/times.tsv"
awk -F'\t' -v runs="$runs" '
    { us[$1] = $2; order[NR] = $1 }
    END {
        base = us["rust_run_views"]
        printf "%-16s %12s %18s   (%d runs each, tiny model, one thread)\n", "api", "us/run", "over rust_run_views", runs
        for (i = 1; i <= NR; i++) {
            k = order[i]
            printf "%-16s %12.3f %18.3f\n", k, us[k], us[k] - base
        }
    }' "$dir/times.tsv"
