#!/usr/bin/env python3
"""Writes blocks whose products end in the activations exporters emit, for measuring the
CPU delegate's fused epilogue activations against ONNX Runtime, and plain 1x1
convolutions on a large feature map, for what the NCHW edges of a model cost:

- `act_cnn.onnx`: a 3x3 conv with HardSwish (MobileNetV3), a 1x1 conv with SiLU as torch
  exports it (`Mul(x, Sigmoid(x))`, YOLOv5 and later, EfficientNet), a depthwise conv with
  `x * HardSigmoid(x)`, a 1x1 conv with LeakyRelu (YOLOv3/v4, Paddle2ONNX detectors); 64
  channels at 112x112, so that each activation's own pass would stream several MiB;
- `act_mlp.onnx`: a transformer MLP, MatMul + bias + torch's five-node Erf GELU, then
  MatMul + bias + Sigmoid, at 256 tokens of 384;
- `pw.onnx` and `pw4.onnx`: one and four 1x1 convs 64->64 with bias at 112x112, NCHW in
  and out: the first and last of pw4 convert layouts, its two middle ones do not;
- `tf_cls.onnx` and `tf_seg.onnx`: a channels-last model as tf2onnx exports one, an NHWC
  image 1x224x224x3 transposed to NCHW, five convs (3x3 stride 2, depthwise, 1x1,
  depthwise, 1x1) with Relu, transposed back to NHWC; then a mean over H and W, a
  MatMul and Softmax (`tf_cls`), or the 1x112x112x64 map itself (`tf_seg`);
- `yolo_block.onnx`: YOLO's SPPF and a C3-style join on 32x80x80: convs with SiLU, three
  5x5 stride-1 MaxPools in a row concatenated with their input, a 3x3 conv, and a Concat
  with an earlier conv's result, for pools and Concats inside a channels-last chain;
- `avg_block.onnx`: AveragePools between convs on 64x56x56: an Inception branch's 3x3
  (stride 1, pads not counted) concatenated with its input, a ResNet-vd shortcut's 2x2
  stride-2 `ceil_mode` average beside a strided conv, and a DenseNet transition's 2x2
  stride-2 average;
- `neck_block.onnx`: a YOLO neck's upsampling on 64x40x40: a strided conv to 20x20, a
  nearest 2x Resize (asymmetric, floor, as torch exports it) concatenated with a conv
  at 40x40, and a linear 2x Resize (half_pixel, a U-Net decoder's) before a conv;
- `pad_block.onnx`: explicit Pads before convs on 32x112x112: Keras' ZeroPadding2D before
  a MobileNetV2 stride-2 depthwise conv (as tf2onnx exports it), a reflection pad (torch's
  ReflectionPad2d in style-transfer and super-resolution nets) and a zero one before 3x3
  convs;
- `c2f_block.onnx`: YOLOv8's C2f on 64x80x80: a conv's channels split in two, the second
  half through two 3x3 convs and added back, the three concatenated into a conv (SiLU);
- `stem_block.onnx`: a ResNet stem on a 3x224x224 image: a 7x7 stride-2 conv with Relu, a
  3x3 stride-2 MaxPool over 64x112x112, a 1x1 conv;
- `se_block.onnx`: two MobileNetV3 inverted residuals with squeeze-and-excitation on
  24x56x56: 1x1 expand, 5x5 depthwise (stride 2, then 1), the channels pooled
  (GlobalAveragePool, then ReduceMean as tf2onnx writes it), two 1x1 convs, a HardSigmoid
  (then a Sigmoid, EfficientNet's) gate multiplied into the map per channel, a 1x1
  projection and a residual Add.

Each model has a seeded input beside it (`NAME.x.npy`), the calibration input of its
int8 twin: scripts/make-qdq.sh OUT_DIR/NAME.onnx OUT_DIR/NAME.x.npy.

Usage: .cache/peer-venv/bin/python scripts/make-act-models.py [OUT_DIR] (default
.cache/act), then scripts/compare-ort.py --model OUT_DIR/act_cnn.onnx --model ...
"""

import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def save(out, name, nodes, weights, x_shape, y_shape):
    graph = helper.make_graph(
        nodes, name,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, y_shape)],
        [numpy_helper.from_array(v, k) for k, v in weights.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, out / f"{name}.onnx")
    # A seeded input beside it: the calibration input of its QDQ twin (make-qdq.sh).
    x = np.random.default_rng(len(name)).standard_normal(x_shape).astype(np.float32)
    np.save(out / f"{name}.x.npy", x)
    print(out / f"{name}.onnx")


def main():
    out = Path(sys.argv[1] if len(sys.argv) > 1 else ".cache/act")
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)

    def w(*shape, scale=0.1):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    n = helper.make_node
    cnn = [
        n("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        n("HardSwish", ["c1"], ["a1"]),
        n("Conv", ["a1", "w2", "b2"], ["c2"]),
        n("Sigmoid", ["c2"], ["s2"]),
        n("Mul", ["c2", "s2"], ["a2"]),
        n("Conv", ["a2", "wd", "bd"], ["c3"], pads=[1, 1, 1, 1], group=64),
        n("HardSigmoid", ["c3"], ["h3"], alpha=1.0 / 6.0, beta=0.5),
        n("Mul", ["c3", "h3"], ["a3"]),
        n("Conv", ["a3", "w4", "b4"], ["c4"]),
        n("LeakyRelu", ["c4"], ["y"], alpha=0.1),
    ]
    save(out, "act_cnn", cnn,
         dict(w1=w(64, 32, 3, 3), b1=w(64, scale=1), w2=w(64, 64, 1, 1), b2=w(64, scale=1),
              wd=w(64, 1, 3, 3, scale=0.3), bd=w(64, scale=1), w4=w(64, 64, 1, 1),
              b4=w(64, scale=1)),
         [1, 32, 112, 112], [1, 64, 112, 112])
    mlp = [
        n("MatMul", ["x", "w1"], ["m1"]),
        n("Add", ["m1", "b1"], ["l1"]),
        n("Div", ["l1", "sqrt2"], ["d1"]),
        n("Erf", ["d1"], ["e1"]),
        n("Add", ["e1", "one"], ["p1"]),
        n("Mul", ["l1", "p1"], ["q1"]),
        n("Mul", ["q1", "half"], ["g1"]),
        n("MatMul", ["g1", "w2"], ["m2"]),
        n("Add", ["m2", "b2"], ["l2"]),
        n("Sigmoid", ["l2"], ["y"]),
    ]
    save(out, "act_mlp", mlp,
         dict(w1=w(384, 1536, scale=0.05), b1=w(1536, scale=1), w2=w(1536, 384, scale=0.05),
              b2=w(384, scale=1), sqrt2=np.array(np.sqrt(2), np.float32),
              one=np.array(1, np.float32), half=np.array(0.5, np.float32)),
         [1, 256, 384], [1, 256, 384])
    for k in (1, 4):
        convs = [n("Conv", ["x" if i == 0 else f"p{i}", f"wp{i}", f"bp{i}"],
                   ["y" if i == k - 1 else f"p{i + 1}"]) for i in range(k)]
        weights = {}
        for i in range(k):
            weights[f"wp{i}"] = w(64, 64, 1, 1)
            weights[f"bp{i}"] = w(64)
        save(out, "pw" if k == 1 else f"pw{k}", convs, weights,
             [1, 64, 112, 112], [1, 64, 112, 112])
    tf = [
        n("Transpose", ["x"], ["t"], perm=[0, 3, 1, 2]),
        n("Conv", ["t", "k1", "c1"], ["v1"], pads=[1, 1, 1, 1], strides=[2, 2]),
        n("Relu", ["v1"], ["r1"]),
        n("Conv", ["r1", "kd1", "cd1"], ["v2"], pads=[1, 1, 1, 1], group=32),
        n("Relu", ["v2"], ["r2"]),
        n("Conv", ["r2", "k2", "c2"], ["v3"]),
        n("Relu", ["v3"], ["r3"]),
        n("Conv", ["r3", "kd2", "cd2"], ["v4"], pads=[1, 1, 1, 1], group=64),
        n("Relu", ["v4"], ["r4"]),
        n("Conv", ["r4", "k3", "c3"], ["v5"]),
        n("Relu", ["v5"], ["r5"]),
    ]
    convs = dict(k1=w(32, 3, 3, 3), c1=w(32), kd1=w(32, 1, 3, 3), cd1=w(32),
                 k2=w(64, 32, 1, 1), c2=w(64), kd2=w(64, 1, 3, 3), cd2=w(64),
                 k3=w(64, 64, 1, 1), c3=w(64))
    head = [
        n("Transpose", ["r5"], ["nhwc"], perm=[0, 2, 3, 1]),
        n("ReduceMean", ["nhwc"], ["m"], axes=[1, 2], keepdims=0),
        n("MatMul", ["m", "fc"], ["l"]),
        n("Add", ["l", "fb"], ["z"]),
        n("Softmax", ["z"], ["y"], axis=-1),
    ]
    save(out, "tf_cls", tf + head, dict(convs, fc=w(64, 10), fb=w(10)),
         [1, 224, 224, 3], [1, 10])
    save(out, "tf_seg", tf + [n("Transpose", ["r5"], ["y"], perm=[0, 2, 3, 1])], convs,
         [1, 224, 224, 3], [1, 112, 112, 64])
    yolo, weights = [], {}

    def silu_conv(x, cin, cout, k, name):
        weights[name + "_w"], weights[name + "_b"] = w(cout, cin, k, k), w(cout)
        yolo.extend([
            n("Conv", [x, name + "_w", name + "_b"], [name + "_c"], pads=[k // 2] * 4),
            n("Sigmoid", [name + "_c"], [name + "_s"]),
            n("Mul", [name + "_c", name + "_s"], [name]),
        ])

    silu_conv("x", 32, 64, 3, "a")
    silu_conv("a", 64, 32, 1, "b")
    for i, src in enumerate(["b", "p1", "p2"], 1):
        yolo.append(n("MaxPool", [src], [f"p{i}"], kernel_shape=[5, 5], pads=[2, 2, 2, 2]))
    yolo.append(n("Concat", ["b", "p1", "p2", "p3"], ["cat"], axis=1))
    silu_conv("cat", 128, 64, 1, "d")
    silu_conv("d", 64, 64, 3, "e")
    yolo.append(n("Concat", ["e", "a"], ["cat2"], axis=1))
    silu_conv("cat2", 128, 64, 1, "y")
    save(out, "yolo_block", yolo, weights, [1, 32, 80, 80], [1, 64, 80, 80])
    avg, weights = [], {}

    def conv(x, cin, cout, k, name, stride=1, relu=True):
        weights[name + "_w"], weights[name + "_b"] = w(cout, cin, k, k), w(cout)
        avg.append(n("Conv", [x, name + "_w", name + "_b"], [name + "_c" if relu else name],
                     pads=[k // 2] * 4, strides=[stride, stride]))
        if relu:
            avg.append(n("Relu", [name + "_c"], [name]))

    conv("x", 64, 64, 3, "a")
    avg.append(n("AveragePool", ["a"], ["ap"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]))
    conv("ap", 64, 32, 1, "b")
    avg.append(n("Concat", ["a", "b"], ["cat"], axis=1))
    conv("cat", 96, 64, 1, "d")
    conv("d", 64, 128, 3, "main", stride=2, relu=False)
    avg.append(n("AveragePool", ["d"], ["vd"], kernel_shape=[2, 2], strides=[2, 2],
                 ceil_mode=1))
    conv("vd", 64, 128, 1, "short", relu=False)
    avg.extend([n("Add", ["main", "short"], ["sum"]), n("Relu", ["sum"], ["r"])])
    conv("r", 128, 64, 1, "t")
    avg.append(n("AveragePool", ["t"], ["y"], kernel_shape=[2, 2], strides=[2, 2]))
    save(out, "avg_block", avg, weights, [1, 64, 56, 56], [1, 64, 14, 14])
    yolo, weights = [], {}
    silu_conv("x", 64, 128, 3, "a")
    yolo[0].attribute.extend([helper.make_attribute("strides", [2, 2])])
    silu_conv("a", 128, 64, 1, "b")
    weights["up2"] = np.array([1, 1, 2, 2], np.float32)
    yolo.append(n("Resize", ["b", "", "up2"], ["up"], mode="nearest",
                  coordinate_transformation_mode="asymmetric", nearest_mode="floor"))
    silu_conv("x", 64, 64, 1, "c")
    yolo.append(n("Concat", ["up", "c"], ["cat"], axis=1))
    silu_conv("cat", 128, 64, 1, "d")
    yolo.append(n("Resize", ["b", "", "up2"], ["lin"], mode="linear",
                  coordinate_transformation_mode="half_pixel"))
    silu_conv("lin", 64, 64, 1, "e")
    yolo.append(n("Add", ["d", "e"], ["y"]))
    save(out, "neck_block", yolo, weights, [1, 64, 40, 40], [1, 64, 40, 40])
    pads, weights = [], {}

    def pad(x, name, p, mode="constant"):
        weights[name + "_p"] = np.array(p, np.int64)
        pads.append(n("Pad", [x, name + "_p"], [name], mode=mode))

    def clip_conv(x, cin, cout, k, name, group=1, stride=1, pad=0):
        weights[name + "_w"], weights[name + "_b"] = w(cout, cin // group, k, k), w(cout)
        weights["lo"], weights["hi"] = np.float32(0), np.float32(6)
        pads.extend([
            n("Conv", [x, name + "_w", name + "_b"], [name + "_c"], group=group,
              strides=[stride, stride], pads=[pad] * 4),
            n("Clip", [name + "_c", "lo", "hi"], [name]),
        ])

    clip_conv("x", 32, 96, 1, "e")
    pad("e", "ep", [0, 0, 0, 0, 0, 0, 1, 1])
    clip_conv("ep", 96, 96, 3, "d", group=96, stride=2)
    clip_conv("d", 96, 32, 1, "p")
    pad("p", "rp", [0, 0, 1, 1, 0, 0, 1, 1], mode="reflect")
    clip_conv("rp", 32, 32, 3, "r")
    pad("r", "zp", [0, 0, 1, 1, 0, 0, 1, 1])
    clip_conv("zp", 32, 32, 3, "y")
    save(out, "pad_block", pads, weights, [1, 32, 112, 112], [1, 32, 56, 56])
    yolo, weights = [], {}
    silu_conv("x", 64, 64, 1, "cv1")
    weights["halves"] = np.array([32, 32], np.int64)
    yolo.append(n("Split", ["cv1", "halves"], ["y0", "y1"], axis=1))
    silu_conv("y1", 32, 32, 3, "m1")
    silu_conv("m1", 32, 32, 3, "m2")
    yolo.append(n("Add", ["y1", "m2"], ["m"]))
    yolo.append(n("Concat", ["y0", "y1", "m"], ["cat"], axis=1))
    silu_conv("cat", 96, 64, 1, "y")
    save(out, "c2f_block", yolo, weights, [1, 64, 80, 80], [1, 64, 80, 80])
    stem, weights = [], {}
    weights["s1_w"], weights["s1_b"] = w(64, 3, 7, 7), w(64)
    weights["s2_w"] = w(64, 64, 1, 1)
    stem.extend([
        n("Conv", ["x", "s1_w", "s1_b"], ["s1"], pads=[3] * 4, strides=[2, 2]),
        n("Relu", ["s1"], ["r"]),
        n("MaxPool", ["r"], ["p"], kernel_shape=[3, 3], strides=[2, 2], pads=[1] * 4),
        n("Conv", ["p", "s2_w"], ["y"]),
    ])
    save(out, "stem_block", stem, weights, [1, 3, 224, 224], [1, 64, 56, 56])
    se, weights = [], {}

    def se_conv(x, cin, cout, k, name, act, group=1, stride=1):
        weights[name + "_w"], weights[name + "_b"] = w(cout, cin // group, k, k), w(cout)
        out = name if act is None else name + "_c"
        se.append(n("Conv", [x, name + "_w", name + "_b"], [out], group=group,
                    strides=[stride, stride], pads=[k // 2] * 4))
        if act == "hswish":
            se.append(n("HardSwish", [out], [name]))
        elif act is not None:
            se.append(n(act, [out], [name]))

    def squeeze(x, c, mid, name, mean):
        # Paddle2ONNX and torch export the pooling as a GlobalAveragePool, tf2onnx as a
        # ReduceMean; MobileNetV3's gate is a HardSigmoid, EfficientNet's a Sigmoid.
        if mean:
            se.append(n("ReduceMean", [x], [name + "_p"], axes=[2, 3], keepdims=1))
        else:
            se.append(n("GlobalAveragePool", [x], [name + "_p"]))
        se_conv(name + "_p", c, mid, 1, name + "_f1", "Relu")
        se_conv(name + "_f1", mid, c, 1, name + "_f2", None)
        if mean:
            se.append(n("Sigmoid", [name + "_f2"], [name + "_g"]))
        else:
            se.append(n("HardSigmoid", [name + "_f2"], [name + "_g"],
                        alpha=1.0 / 6.0, beta=0.5))
        se.append(n("Mul", [x, name + "_g"], [name]))

    se_conv("x", 24, 72, 1, "e1", "Relu")
    se_conv("e1", 72, 72, 5, "d1", "Relu", group=72, stride=2)
    squeeze("d1", 72, 24, "s1", mean=False)
    se_conv("s1", 72, 40, 1, "p1", None)
    se_conv("p1", 40, 120, 1, "e2", "hswish")
    se_conv("e2", 120, 120, 5, "d2", "hswish", group=120)
    squeeze("d2", 120, 32, "s2", mean=True)
    se_conv("s2", 120, 40, 1, "p2", None)
    se.append(n("Add", ["p1", "p2"], ["y"]))
    save(out, "se_block", se, weights, [1, 24, 56, 56], [1, 40, 28, 28])


if __name__ == "__main__":
    main()
