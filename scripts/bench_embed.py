"""Per-run time of the Python package and of ONNX Runtime's Python API on one model, in
the same process (a bench, not a test; scripts/bench-embed.sh runs it).

Usage: bench_embed.py MODEL.onnx [RUNS]

Every input is f32, filled with a fixed ramp (symbolic dimensions at 1). Each runtime
runs the model RUNS times (10 000 by default) after 100 warm-up runs, one thread, and the
mean microseconds per run are printed as `label<TAB>us`.
"""

import sys
import time

import numpy as np
import onnxruntime as ort

import baton


def timed(label, f, runs):
    for _ in range(100):
        f()
    start = time.perf_counter()
    for _ in range(runs):
        f()
    us = (time.perf_counter() - start) * 1e6 / runs
    print(f"{label}\t{us:.3f}")


def main():
    path = sys.argv[1]
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 10_000
    session = baton.Engine().load(path)
    feeds = {}
    for decl in session.inputs:
        shape = [d if isinstance(d, int) else 1 for d in decl["shape"]]
        n = int(np.prod(shape))
        feeds[decl["name"]] = ((np.arange(n) % 7) * 0.25 - 0.5).astype(np.float32).reshape(shape)
    timed("python_run", lambda: session.run(feeds), runs)
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    peer = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    timed("ort_python_run", lambda: peer.run(None, feeds), runs)
    # The two agree (the model is tiny; the same kernels' arithmetic).
    ours = session.run(feeds)
    theirs = peer.run(None, feeds)
    for got, want in zip(ours.values(), theirs):
        assert np.allclose(got, want, rtol=1e-5, atol=1e-6), (got, want)


if __name__ == "__main__":
    main()
