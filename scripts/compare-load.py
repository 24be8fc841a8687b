#!/usr/bin/env python3
"""Load time and peak memory of a `.baton` program next to ONNX Runtime, in one run.

For each model: `baton compile` makes a program; ONNX Runtime's InferenceSession is
created --loads times in this process (CPU execution provider, all graph optimisations,
as scripts/compare-ort.py sets it up) and the median taken; `baton bench --json` reports
`load_ms` for the program and for the ONNX file (the median of --loads in-process loads,
from opening the file to a session ready to run, the probe cache warm). Then `baton run`
on the program runs once under /usr/bin/time, and its peak RSS, less the peak of
`baton devices` (the executable, the plugin and its probe, no model), is set beside the
model's weights plus its arenas, as `baton bench` reports them: the host's arena and what
each delegate says it holds beyond the file (ABI 1.2 `memory`: scratch and own copies; a
blob it reads in place is part of the mapped file, not counted twice).

    python=$(scripts/peer-venv.sh)
    cargo build --release -p baton-cli -p baton-backend-cpu-plugin
    $python scripts/compare-load.py [--loads 15] [--baton target/release/baton]

Targets (issue 11): program load <= 1/4 of ORT's session creation; peak RSS of
`baton run` on a program <= 1.2 x (weights + arena).
"""

import argparse
import json
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


def models(tmp):
    """(name, onnx path, {input: .npy path}, [--dim flags]) for every model present."""
    out = []
    for name in ("mobilenet_tiny", "transformer_enc2", "stream_asr"):
        d = MODELS / name
        if not d.is_dir():
            print(f"note: {d} missing; {name} skipped", file=sys.stderr)
            continue
        inputs = {p.stem[len("input_"):]: p for p in sorted(d.glob("input_*.npy"))}
        out.append((name, d / f"{name}.onnx", inputs, []))
    silero = ROOT / ".cache" / "silero" / "silero_vad.onnx"
    if silero.is_file():
        rng = np.random.default_rng(0)
        arrays = {
            "input": (rng.standard_normal((1, 576)) * 0.1).astype(np.float32),
            "state": np.zeros((2, 1, 128), np.float32),
            "sr": np.array(16000, np.int64),
        }
        inputs = {}
        for k, v in arrays.items():
            inputs[k] = Path(tmp) / f"silero_{k}.npy"
            np.save(inputs[k], v)
        dims = ["--dim", "input_dim0=1", "--dim", "input_dim1=576", "--dim", "state_dim1=1"]
        out.append(("silero_vad", silero, inputs, dims))
    else:
        print("note: .cache/silero missing (scripts/fetch-silero.sh); silero skipped", file=sys.stderr)
    return out


def ort_session_ms(path, loads):
    so = ort.SessionOptions()
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    samples = []
    for _ in range(loads):
        start = time.perf_counter()
        ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
        samples.append((time.perf_counter() - start) * 1e3)
    return statistics.median(samples)


def bench(baton, model, inputs, loads):
    cmd = [baton, "bench", str(model), "--json", "--runs", "1", "--warmup", "0"]
    cmd += ["--load-runs", str(loads)]
    for k, v in inputs.items():
        cmd += ["--input", f"{k}={v}"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def peak_rss_bytes(cmd, tmp):
    """Peak resident set of cmd, by /usr/bin/time (GNU time's %M, KiB). Not wait4 on a
    child of this process: until it execs, a child started here shares or copies this
    process's memory (ONNX Runtime loaded), and its peak would count that."""
    report = Path(tmp) / "rss.txt"
    subprocess.run(
        ["/usr/bin/time", "-f", "%M", "-o", str(report), *cmd],
        check=True,
        capture_output=True,
    )
    return int(report.read_text().split()[-1]) * 1024


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--loads", type=int, default=15)
    ap.add_argument("--baton", default=str(ROOT / "target" / "release" / "baton"))
    a = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, onnx, inputs, dims in models(tmp):
            program = Path(tmp) / f"{name}.baton"
            subprocess.run(
                [a.baton, "compile", str(onnx), *dims, "-o", str(program)],
                check=True,
                capture_output=True,
            )
            ort_ms = ort_session_ms(onnx, a.loads)
            aot = bench(a.baton, program, inputs, a.loads)
            jit = bench(a.baton, onnx, inputs, a.loads)
            run = [a.baton, "run", str(program), "--output-dir", str(Path(tmp) / name)]
            for k, v in inputs.items():
                run += ["--input", f"{k}={v}"]
            rss = peak_rss_bytes(run, tmp)
            # Weights and every arena: the host's, and the delegates' own (ABI 1.2 `memory`
            # scratch and copies). A blob a delegate reads in place is part of the file.
            held = (aot["weights_bytes"] + aot["arena_bytes"]
                    + aot.get("delegate_scratch_bytes", 0) + aot.get("delegate_owned_bytes", 0))
            rows.append((name, aot["load_ms"], jit["load_ms"], ort_ms, rss, held))
        # What the process holds with no model: the executable, the plugin, the probe.
        base = peak_rss_bytes([a.baton, "devices"], tmp)
    mib = 2**20
    print(f"{'model':<18} {'.baton load':>12} {'.onnx load':>11} {'ORT session':>12} "
          f"{'.baton/ORT':>10} {'peak RSS':>10} {'- base':>10} {'weights+arenas':>15} {'ratio':>6}")
    for name, aot, jit, ort_ms, rss, held in rows:
        print(f"{name:<18} {aot:>9.2f} ms {jit:>8.2f} ms {ort_ms:>9.2f} ms {aot / ort_ms:>10.2f} "
              f"{rss / mib:>6.1f} MiB {(rss - base) / mib:>6.1f} MiB {held / mib:>11.1f} MiB "
              f"{(rss - base) / max(held, 1):>6.2f}")
    print(f"base: peak RSS of `baton devices` (no model loaded) {base / mib:.1f} MiB")


if __name__ == "__main__":
    main()
