"""Expected outputs of silero VAD on a synthetic signal, from ONNX Runtime.

Usage: silero_expected.py MODEL OUT_DIR

The signal (16 kHz, 4 s, deterministic): 1 s of silence, 1.5 s of a voiced-like sound (a
140 Hz fundamental with 11 harmonics under a formant-like weighting, slow vibrato, a
raised-cosine envelope), 0.5 s of silence, 1 s of white noise from a seeded PCG64.

It is fed as the silero wrapper does at 16 kHz: 512 new samples per call, preceded by the
last 64 samples of the previous call's input (zeros at first), so each input is [1, 576];
`state` [2, 1, 128] starts at zeros and is carried; `sr` is int64 16000.

Writes: chunks.npy [C, 1, 576] f32 (each call's input), sr.npy (int64 scalar),
state0.npy [2, 1, 128], probs.npy [C, 1, 1] (each call's output), states.npy
[C, 2, 1, 128] (the state after each call) and stateN.npy (the last of those).
"""

import os
import sys

import numpy as np
import onnxruntime as ort

RATE = 16000
CONTEXT = 64
CHUNK = 512


def signal() -> np.ndarray:
    t = np.arange(4 * RATE) / RATE
    x = np.zeros_like(t)
    voiced = (t >= 1.0) & (t < 2.5)
    tv = t[voiced] - 1.0
    f0 = 140.0 * (1.0 + 0.03 * np.sin(2 * np.pi * 5.0 * tv))
    phase = 2 * np.pi * np.cumsum(f0) / RATE
    tone = sum(np.sin(k * phase) / k * (1.5 if 3 <= k <= 5 else 1.0) for k in range(1, 12))
    envelope = 0.5 - 0.5 * np.cos(2 * np.pi * tv / 1.5)
    x[voiced] = 0.3 * envelope * tone / np.max(np.abs(tone))
    noisy = t >= 3.0
    x[noisy] = 0.05 * np.random.Generator(np.random.PCG64(20240611)).standard_normal(noisy.sum())
    return x.astype(np.float32)


def main() -> None:
    model, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    x = signal()
    sr = np.array(RATE, dtype=np.int64)
    state = np.zeros((2, 1, 128), dtype=np.float32)
    context = np.zeros((1, CONTEXT), dtype=np.float32)
    chunks, probs, states = [], [], []
    np.save(os.path.join(out, "state0.npy"), state)
    for start in range(0, len(x) - CHUNK + 1, CHUNK):
        inp = np.concatenate([context, x[None, start : start + CHUNK]], axis=1)
        prob, state = session.run(None, {"input": inp, "state": state, "sr": sr})
        context = inp[:, -CONTEXT:]
        chunks.append(inp)
        probs.append(prob.astype(np.float32))
        states.append(state.astype(np.float32))
    np.save(os.path.join(out, "chunks.npy"), np.stack(chunks))
    np.save(os.path.join(out, "sr.npy"), sr)
    np.save(os.path.join(out, "probs.npy"), np.stack(probs))
    np.save(os.path.join(out, "states.npy"), np.stack(states))
    np.save(os.path.join(out, "stateN.npy"), states[-1])
    p = np.stack(probs).ravel()
    print(
        f"silero expected: {len(chunks)} chunks, onnxruntime {ort.__version__}, numpy {np.__version__}; "
        f"probability min {p.min():.4f} max {p.max():.4f}; written to {out}"
    )


if __name__ == "__main__":
    main()
