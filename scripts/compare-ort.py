#!/usr/bin/env python3
"""Baton next to ONNX Runtime on the same models, inputs and thread counts, in one run.

For each model and thread count, ONNX Runtime runs in this process (CPU execution
provider, intra-op threads = N, sequential execution, all graph optimisations) and
`baton bench --json` runs beside it on the same .npy inputs; both take the median of
--runs timed runs after --warmup untimed ones. The table gives milliseconds and the
ratio Baton / ORT (below 1: Baton is faster). Run it with a Python that has onnxruntime
and numpy (scripts/peer-venv.sh makes one):

    .cache/peer-venv/bin/python scripts/compare-ort.py [--threads 1,2] [--runs 50]

Models come from ../shared/peers/models (mobilenet_tiny, transformer_enc2, stream_asr),
their int8 QDQ twins when scripts/make-qdq.sh has written them to .cache/qdq/, and, when
fetched, silero VAD (.cache/silero/silero_vad.onnx: one 576-sample chunk). `--model
PATH` (repeatable) runs any other model instead, on seeded random inputs of its declared
shapes (a dynamic dimension taken as 1), e.g. the blocks of scripts/make-act-models.py.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT.parent / "shared" / "peers" / "models"


def peer_models():
    """(name, onnx path, {input name: array}) for every model present."""
    out = []
    for name in ("mobilenet_tiny", "transformer_enc2", "stream_asr"):
        d = MODELS / name
        if not d.is_dir():
            print(f"note: {d} missing; {name} skipped", file=sys.stderr)
            continue
        inputs = {
            p.stem[len("input_"):]: np.load(p) for p in sorted(d.glob("input_*.npy"))
        }
        out.append((name, d / f"{name}.onnx", inputs))
        # The int8 twin, when scripts/make-qdq.sh made one (same inputs).
        twin = ROOT / ".cache" / "qdq" / f"{name}.qdq.onnx"
        if twin.is_file():
            out.append((f"{name} (QDQ int8)", twin, inputs))
    silero = ROOT / ".cache" / "silero" / "silero_vad.onnx"
    if silero.is_file():
        rng = np.random.default_rng(0)
        out.append(
            (
                "silero_vad (1 chunk)",
                silero,
                {
                    "input": (rng.standard_normal((1, 576)) * 0.1).astype(np.float32),
                    "state": np.zeros((2, 1, 128), np.float32),
                    "sr": np.array(16000, np.int64),
                },
            )
        )
    else:
        print(f"note: {silero} missing (scripts/fetch-silero.sh); silero skipped", file=sys.stderr)
    return out


def random_inputs(path):
    """Seeded inputs for every input of the model at `path`, from ONNX Runtime's view of
    its declared types and shapes (a dynamic dimension as 1)."""
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    types = {"tensor(float)": np.float32, "tensor(int64)": np.int64,
             "tensor(int32)": np.int32, "tensor(bool)": np.bool_}
    out = {}
    for i in sess.get_inputs():
        shape = [d if isinstance(d, int) and d > 0 else 1 for d in i.shape]
        dtype = types.get(i.type)
        if dtype is None:
            raise SystemExit(f"{path}: input {i.name} is {i.type}, which --model cannot make")
        if dtype == np.float32:
            out[i.name] = rng.standard_normal(shape).astype(np.float32)
        else:
            out[i.name] = np.zeros(shape, dtype)
    return out


def ort_median(path, inputs, threads, warmup, runs):
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    for _ in range(warmup):
        sess.run(None, inputs)
    samples = []
    for _ in range(runs):
        t = time.perf_counter()
        sess.run(None, inputs)
        samples.append((time.perf_counter() - t) * 1e3)
    return statistics.median(samples), min(samples)


def baton_median(baton, path, inputs, threads, warmup, runs, tmp):
    args = [str(baton), "bench", str(path), "--threads", str(threads), "--runs", str(runs),
            "--warmup", str(warmup), "--json"]
    for name, value in inputs.items():
        f = Path(tmp) / f"{name}.npy"
        np.save(f, value)
        args += ["--input", f"{name}={f}"]
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"baton bench failed on {path}: {r.stderr.strip()}")
    j = json.loads(r.stdout.strip().splitlines()[-1])
    return j["median_ms"], j["min_ms"], j["nodes_per_backend"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--baton", default=str(ROOT / "target" / "release" / "baton"))
    ap.add_argument("--json", help="also write the rows to this file")
    ap.add_argument("--models", default="",
                    help="comma-separated substrings: only models whose name has one")
    ap.add_argument("--model", action="append", default=[],
                    help="an ONNX file to run instead of the peer models (repeatable)")
    a = ap.parse_args()
    if a.runs < 50:
        print("note: fewer than 50 runs: medians are noisier than the issue asks", file=sys.stderr)
    cpu = subprocess.run(["sh", "-c", "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"],
                         capture_output=True, text=True).stdout.strip()
    print(f"machine: {cpu or 'unknown CPU'}, {os.cpu_count()} logical CPUs; "
          f"onnxruntime {ort.__version__}; {a.runs} runs after {a.warmup} warm-up, medians")
    rows = []
    # The minimum of each side is printed too: on a busy machine it is the steadier figure.
    print("| model | threads | Baton ms | ORT ms | Baton/ORT | min ratio | Baton nodes |")
    print("|---|---:|---:|---:|---:|---:|---|")
    wanted = [m for m in a.models.split(",") if m]
    with tempfile.TemporaryDirectory() as tmp:
        chosen = [(Path(m).stem, Path(m), random_inputs(m)) for m in a.model] or peer_models()
        for name, path, inputs in chosen:
            if wanted and not any(w in name for w in wanted):
                continue
            for threads in [int(t) for t in a.threads.split(",")]:
                o_med, o_min = ort_median(path, inputs, threads, a.warmup, a.runs)
                b_med, b_min, per = baton_median(a.baton, path, inputs, threads, a.warmup,
                                                 a.runs, tmp)
                nodes = ", ".join(f"{k} {v}" for k, v in sorted(per.items()))
                print(f"| {name} | {threads} | {b_med:.3f} | {o_med:.3f} | "
                      f"{b_med / o_med:.2f} | {b_min / o_min:.2f} | {nodes} |", flush=True)
                rows.append({"model": name, "threads": threads, "baton_median_ms": b_med,
                             "baton_min_ms": b_min, "ort_median_ms": o_med,
                             "ort_min_ms": o_min, "ratio": b_med / o_med,
                             "baton_nodes": per})
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
