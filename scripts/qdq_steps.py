"""Compares two runs of a QDQ model's outputs in quantization steps.

Usage: qdq_steps.py MODEL.qdq.onnx A_DIR B_DIR

Each directory holds one .npy per output (as `baton run --output-dir` writes them). An
output produced by a DequantizeLinear is compared in units of that node's scale (per
tensor); prints the largest difference in steps per output and exits 1 above one step.
"""

import os
import sys

import numpy as np
import onnx
from onnx import numpy_helper


def main():
    model, a_dir, b_dir = sys.argv[1:4]
    g = onnx.load(model).graph
    inits = {i.name: numpy_helper.to_array(i) for i in g.initializer}
    producer = {o: n for n in g.node for o in n.output}
    worst_all = 0.0
    for out in g.output:
        name = out.name
        a = np.load(os.path.join(a_dir, f"{name}.npy")).astype(np.float64)
        b = np.load(os.path.join(b_dir, f"{name}.npy")).astype(np.float64)
        node = producer.get(name)
        if node is None or node.op_type != "DequantizeLinear":
            print(f"{name}: not a DequantizeLinear output; max abs diff {np.abs(a - b).max():.3g}")
            continue
        scale = float(np.asarray(inits[node.input[1]]).reshape(-1)[0])
        steps = np.abs(a - b).max() / scale
        worst_all = max(worst_all, steps)
        print(f"{name}: max diff {steps:.3f} steps (scale {scale:.6g}), "
              f"{int((np.abs(a - b) > scale / 2).sum())} of {a.size} elements differ")
    # Outputs are f32 products, so one step reads as 1.0000001: allow for that.
    sys.exit(1 if worst_all > 1.0 + 1e-3 else 0)


if __name__ == "__main__":
    main()
