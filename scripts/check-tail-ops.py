#!/usr/bin/env python3
"""Small ONNX models spelled as tf2onnx, Paddle2ONNX and torch export the "tail" of real
models (BatchNormalization after Conv, LeakyRelu as Max(x, alpha*x), HardSigmoid*x,
Pow, Resize, Pad, ConvTranspose, ReduceMax, comparisons and Where, Cast), run by
`baton run` on the CPU plugin and by ONNX Runtime; prints each model's worst error and
how many nodes `baton plan` leaves on the host.

    scripts/peer-venv.sh                     # once: numpy, onnx, onnxruntime
    .cache/peer-venv/bin/python scripts/check-tail-ops.py [--baton target/release/baton]

Exits non-zero when an output differs by more than 1e-4 (relative to the output's
largest magnitude) or a node falls to the host.
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

RNG = np.random.default_rng(7)


def const(name, array):
    return numpy_helper.from_array(np.asarray(array), name)


def model(name, nodes, inputs, outputs, inits):
    graph = helper.make_graph(nodes, name, inputs, outputs, inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def f32(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def conv_bn_leaky():
    """tf2onnx: Conv, BatchNormalization, LeakyRelu written as Max(x, 0.1 x)."""
    c, m = 8, 16
    inits = [
        const("w", RNG.standard_normal((m, c, 3, 3)).astype(np.float32) * 0.2),
        const("b", RNG.standard_normal(m).astype(np.float32) * 0.1),
        const("scale", RNG.uniform(0.5, 1.5, m).astype(np.float32)),
        const("bias", RNG.standard_normal(m).astype(np.float32) * 0.1),
        const("mean", RNG.standard_normal(m).astype(np.float32) * 0.1),
        const("var", RNG.uniform(0.5, 1.5, m).astype(np.float32)),
        const("alpha", np.array(0.1, np.float32)),
        const("w2", RNG.standard_normal((m, m, 1, 1)).astype(np.float32) * 0.2),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c", "scale", "bias", "mean", "var"], ["n"]),
        helper.make_node("Mul", ["n", "alpha"], ["an"]),
        helper.make_node("Max", ["n", "an"], ["l"]),
        helper.make_node("Conv", ["l", "w2"], ["c2"]),
        helper.make_node("BatchNormalization", ["c2", "scale", "bias", "mean", "var"], ["n2"]),
        helper.make_node("Relu", ["n2"], ["y"]),
    ]
    return model("conv_bn_leaky", nodes, [f32("x", [1, c, 12, 12])], [f32("y", [1, m, 12, 12])], inits)


def hardswish_pow():
    """torch/Paddle: x * HardSigmoid(x), Pow(x, 2), Pow(x, 0.5) of |x|, ReduceMax."""
    inits = [const("two", np.array(2.0, np.float32)), const("half", np.array(0.5, np.float32))]
    nodes = [
        helper.make_node("HardSigmoid", ["x"], ["h"], alpha=1.0 / 6, beta=0.5),
        helper.make_node("Mul", ["x", "h"], ["hs"]),
        helper.make_node("Pow", ["hs", "two"], ["sq"]),
        helper.make_node("Abs", ["x"], ["ax"]),
        helper.make_node("Pow", ["ax", "half"], ["rt"]),
        helper.make_node("Add", ["sq", "rt"], ["s"]),
        helper.make_node("ReduceMax", ["s"], ["y"], axes=[2, 3], keepdims=1),
    ]
    return model("hardswish_pow", nodes, [f32("x", [2, 4, 6, 6])], [f32("y", [2, 4, 1, 1])], inits)


def decoder():
    """Paddle2ONNX-style decoder: ConvTranspose, BatchNormalization, Resize (nearest and
    linear), Pad (reflect), Clip."""
    c, m = 6, 4
    inits = [
        const("wt", RNG.standard_normal((c, m, 4, 4)).astype(np.float32) * 0.2),
        const("bt", RNG.standard_normal(m).astype(np.float32) * 0.1),
        const("scale", RNG.uniform(0.5, 1.5, m).astype(np.float32)),
        const("bias", RNG.standard_normal(m).astype(np.float32) * 0.1),
        const("mean", RNG.standard_normal(m).astype(np.float32) * 0.1),
        const("var", RNG.uniform(0.5, 1.5, m).astype(np.float32)),
        const("scales", np.array([1, 1, 2, 2], np.float32)),
        const("sizes", np.array([1, m, 27, 25], np.int64)),
        const("pads", np.array([0, 0, 1, 2, 0, 0, 1, 2], np.int64)),
        const("lo", np.array(-1.0, np.float32)),
        const("hi", np.array(1.0, np.float32)),
    ]
    nodes = [
        helper.make_node("ConvTranspose", ["x", "wt", "bt"], ["d"], strides=[2, 2], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["d", "scale", "bias", "mean", "var"], ["n"]),
        helper.make_node("Resize", ["n", "", "scales"], ["r"], mode="nearest"),
        helper.make_node("Pad", ["r", "pads"], ["p"], mode="reflect"),
        helper.make_node("Resize", ["p", "", "", "sizes"], ["q"], mode="linear"),
        helper.make_node("Clip", ["q", "lo", "hi"], ["y"]),
    ]
    return model("decoder", nodes, [f32("x", [1, c, 5, 5])], [f32("y", [1, m, 27, 25])], inits)


def select_cast():
    """Comparisons and Where, Cast to bool and back, Not, And, a comparison of i32."""
    inits = [
        const("zero", np.array(0.0, np.float32)),
        const("one", np.array(1.0, np.float32)),
        const("zi", np.array(0, np.int32)),
    ]
    nodes = [
        helper.make_node("Cast", ["x"], ["xi"], to=TensorProto.INT32),
        helper.make_node("Greater", ["xi", "zi"], ["gi"]),
        helper.make_node("Cast", ["gi"], ["gf"], to=TensorProto.FLOAT),
        helper.make_node("Greater", ["x", "zero"], ["pos"]),
        helper.make_node("Less", ["x", "one"], ["small"]),
        helper.make_node("And", ["pos", "small"], ["mid"]),
        helper.make_node("Not", ["mid"], ["out"]),
        helper.make_node("Cast", ["out"], ["outf"], to=TensorProto.FLOAT),
        helper.make_node("Cast", ["x"], ["nz"], to=TensorProto.BOOL),
        helper.make_node("Cast", ["nz"], ["nzf"], to=TensorProto.FLOAT),
        helper.make_node("Where", ["mid", "x", "outf"], ["w"]),
        helper.make_node("Add", ["w", "nzf"], ["s"]),
        helper.make_node("Add", ["s", "gf"], ["y"]),
    ]
    return model("select_cast", nodes, [f32("x", [3, 5, 7])], [f32("y", [3, 5, 7])], inits)


MODELS = [conv_bn_leaky, hardswish_pow, decoder, select_cast]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--baton", default="target/release/baton")
    args = ap.parse_args()
    failed = False
    with tempfile.TemporaryDirectory() as tmp:
        for make in MODELS:
            m = make()
            path = os.path.join(tmp, m.graph.name + ".onnx")
            onnx.save(m, path)
            feeds, cli = {}, []
            for i in m.graph.input:
                shape = [d.dim_value for d in i.type.tensor_type.shape.dim]
                x = RNG.uniform(-2, 2, shape).astype(np.float32)
                x.flat[:3] = [0.0, -0.0, 1.0]
                feeds[i.name] = x
                np.save(os.path.join(tmp, i.name + ".npy"), x)
                cli += ["--input", f"{i.name}={os.path.join(tmp, i.name + '.npy')}"]
            expected = ort.InferenceSession(path).run(None, feeds)
            out_dir = os.path.join(tmp, m.graph.name)
            subprocess.run([args.baton, "run", path, *cli, "--output-dir", out_dir],
                           check=True, capture_output=True)
            plan = subprocess.run([args.baton, "plan", path], check=True,
                                  capture_output=True, text=True).stdout
            per = re.search(r"nodes per target: (.*)", plan).group(1)
            host = re.search(r"host (\d+)", per)
            host = int(host.group(1)) if host else 0
            worst = 0.0
            for o, e in zip(m.graph.output, expected):
                got = np.load(os.path.join(out_dir, o.name + ".npy"))
                scale = max(float(np.abs(e).max()), 1e-30)
                worst = max(worst, float(np.abs(got.astype(np.float64) - e).max()) / scale)
            ok = worst <= 1e-4 and host == 0
            failed |= not ok
            print(f"{m.graph.name:16} worst rel err {worst:.2e}  nodes: {per}  {'ok' if ok else 'FAIL'}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
