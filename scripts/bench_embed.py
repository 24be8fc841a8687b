"""Per-run time of the Python package and of ONNX Runtime's Python API on one model, in
the same process (a bench, not a test; scripts/bench-embed.sh runs it).

Usage: bench_embed.py MODEL.onnx [RUNS]

Every input is f32, filled with a fixed ramp (symbolic dimensions at 1). Each runtime
runs the model RUNS times (10 000 by default) after 100 warm-up runs, one thread, in ten
interleaved rounds; the median of the rounds' mean microseconds per run is printed as
`label<TAB>us`.
"""

import sys
import time

import numpy as np
import onnxruntime as ort

import baton


def timed(calls, runs, rounds=10):
    """Mean microseconds per call of each of `calls` ({label: f}), RUNS calls each: run in
    interleaved rounds (each label RUNS/rounds calls per round, in turn), so that a busy
    spell of the machine falls on all of them alike; the median of the rounds' means."""
    for f in calls.values():
        for _ in range(100):
            f()
    per_round = max(1, runs // rounds)
    means = {label: [] for label in calls}
    for _ in range(rounds):
        for label, f in calls.items():
            start = time.perf_counter()
            for _ in range(per_round):
                f()
            means[label].append((time.perf_counter() - start) * 1e6 / per_round)
    for label, m in means.items():
        print(f"{label}\t{sorted(m)[len(m) // 2]:.3f}")


def main():
    path = sys.argv[1]
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 10_000
    session = baton.Engine().load(path)
    feeds = {}
    for decl in session.inputs:
        shape = [d if isinstance(d, int) else 1 for d in decl["shape"]]
        n = int(np.prod(shape))
        feeds[decl["name"]] = ((np.arange(n) % 7) * 0.25 - 0.5).astype(np.float32).reshape(shape)
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    peer = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    timed(
        {
            "python_run": lambda: session.run(feeds),
            "ort_python_run": lambda: peer.run(None, feeds),
        },
        runs,
    )
    # The two agree (the model is tiny; the same kernels' arithmetic).
    ours = session.run(feeds)
    theirs = peer.run(None, feeds)
    for got, want in zip(ours.values(), theirs):
        assert np.allclose(got, want, rtol=1e-5, atol=1e-6), (got, want)


if __name__ == "__main__":
    main()
