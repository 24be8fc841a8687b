#!/usr/bin/env python3
"""What one dispatch costs a GPU delegate per call, apart from the work it does.

Builds chains of N element-wise nodes on a tiny tensor (y = x + 1, N times, as ONNX
models: the GPU work is nil, so the time per run is a fixed cost plus N times the cost
of one dispatch), times each chain with `baton bench` through each plugin given, and
fits the per-dispatch slope by least squares. Run it with a Python that has onnx and
numpy (scripts/peer-venv.sh makes one); on a machine without a GPU it measures the
software driver (lavapipe), which is what CI has:

    XDG_RUNTIME_DIR=$(mktemp -d) .cache/peer-venv/bin/python scripts/gpu-dispatch-cost.py \
        --plugin target/release/libbaton_backend_vulkan.so [--plugin OTHER.so ...]

Give two builds of one plugin (before and after a change) to compare them in one run.
"""

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

ROOT = Path(__file__).resolve().parent.parent


def chain(n: int, path: Path):
    """`x + 1` applied `n` times to a [1, 64] tensor."""
    one = helper.make_tensor("one", TensorProto.FLOAT, [1], [1.0])
    nodes, prev = [], "x"
    for i in range(n):
        out = "y" if i == n - 1 else f"t{i}"
        nodes.append(helper.make_node("Add", [prev, "one"], [out], name=f"add{i}"))
        prev = out
    g = helper.make_graph(
        nodes,
        f"chain{n}",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64])],
        [one],
    )
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)


def bench(baton: str, model: Path, cfg: Path, runs: int) -> dict:
    r = subprocess.run(
        [baton, "bench", str(model), "--config", str(cfg), "--runs", str(runs),
         "--warmup", "20", "--json"],
        capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        sys.exit(f"baton bench failed on {model}: {r.stderr.strip()}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--plugin", action="append", required=True,
                    help="a GPU delegate plugin (.so); repeat to compare builds")
    ap.add_argument("--lengths", default="1,25,50,100", help="chain lengths")
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--baton", default=str(ROOT / "target" / "release" / "baton"))
    a = ap.parse_args()
    lengths = [int(n) for n in a.lengths.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for n in lengths:
            chain(n, tmp / f"chain{n}.onnx")
        print("| plugin | " + " | ".join(f"{n} nodes ms" for n in lengths)
              + " | per dispatch us | fixed us |")
        print("|---|" + "---:|" * (len(lengths) + 2))
        for k, plugin in enumerate(a.plugin):
            cfg = tmp / f"cfg{k}.toml"
            cfg.write_text(f'[[plugin]]\npath = "{Path(plugin).resolve()}"\npriority = 1\n')
            ms = []
            for n in lengths:
                j = bench(a.baton, tmp / f"chain{n}.onnx", cfg, a.runs)
                per = j["nodes_per_backend"]
                if per.get("host"):
                    sys.exit(f"{plugin} left {per['host']} nodes of chain{n} to the host")
                ms.append(j["median_ms"])
            slope, fixed = np.polyfit(lengths, ms, 1)
            print(f"| {plugin} | " + " | ".join(f"{m:.3f}" for m in ms)
                  + f" | {slope * 1e3:.1f} | {fixed * 1e3:.1f} |", flush=True)


if __name__ == "__main__":
    main()
