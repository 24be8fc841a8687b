"""Writes a QDQ (int8) version of an f32 ONNX model with ONNX Runtime's static quantizer.

Usage: make_qdq.py MODEL.onnx OUT.onnx INPUT.npy

QDQ format, per-channel i8 weights (symmetric), per-tensor i8 activations (asymmetric),
calibrated with min/max on INPUT.npy and 7 deterministic variations of it (scaled and
shifted copies plus seeded noise), so the calibration is reproducible bit for bit.
"""

import sys

import numpy as np
import onnxruntime as ort
from onnxruntime.quantization import (
    CalibrationDataReader,
    CalibrationMethod,
    QuantFormat,
    QuantType,
    quantize_static,
)


class Samples(CalibrationDataReader):
    def __init__(self, name, x):
        rng = np.random.default_rng(20261203)
        batch = [x]
        if np.issubdtype(x.dtype, np.integer):
            # Token ids: the same ids shifted along the sequence (scaling would make ids
            # that do not exist).
            batch += [np.roll(x, k, axis=-1) for k in range(1, 7)]
            self.items = iter([{name: b} for b in batch])
            return
        x = x.astype(np.float32)
        for scale, shift in [(0.5, 0.0), (1.5, 0.0), (1.0, 0.25), (1.0, -0.25)]:
            batch.append((x * scale + shift).astype(np.float32))
        for _ in range(2):
            batch.append((x + rng.normal(0, 0.3, x.shape)).astype(np.float32))
        self.items = iter([{name: b} for b in batch])

    def get_next(self):
        return next(self.items, None)


def main():
    src, dst, sample = sys.argv[1:4]
    name = ort.InferenceSession(src, providers=["CPUExecutionProvider"]).get_inputs()[0].name
    x = np.load(sample)
    quantize_static(
        src,
        dst,
        Samples(name, x),
        quant_format=QuantFormat.QDQ,
        per_channel=True,
        activation_type=QuantType.QInt8,
        weight_type=QuantType.QInt8,
        calibrate_method=CalibrationMethod.MinMax,
        extra_options={"ActivationSymmetric": False, "WeightSymmetric": True},
    )
    print(f"wrote {dst}")


if __name__ == "__main__":
    main()
