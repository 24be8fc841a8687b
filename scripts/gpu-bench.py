#!/usr/bin/env python3
"""GPU delegates on one machine, in one prepared step: conformance, agreement and speed.

For every GPU delegate plugin found in the build folder (the Vulkan delegate and the
wgpu delegate), this script
  1. lists the devices the plugin sees (`baton devices`),
  2. runs the conformance kit on it (`baton-conformance --abi-checks` with the plugin's
     expectations file) and reads the counts from its report,
  3. runs every model with `baton run --check` through a config that puts the GPU
     delegate first and the CPU delegate second, so each GPU partition is compared
     with the reference executor on the model's real inputs,
  4. times every model with `baton bench` through that config and through the CPU
     delegate alone (1 thread and every core), in the same run,
and prints one table (ms per model, GPU against CPU) and writes it, with the raw JSON,
to the output folder.

It needs no Rust toolchain where it runs: give it a folder of release binaries built
elsewhere (`--bin`), which is how it runs on a lent GPU machine. With `--build` it builds
them first (`cargo build --release`). Python's standard library only.

    scripts/gpu-bench.py --build                      # here, on lavapipe
    scripts/gpu-bench.py --bin DIR --models DIR --out DIR --runs 200

A model folder holds one `.onnx` or `.btir` and its inputs as `input_<NAME>.npy` (the
layout of `../shared/peers/models`); `--models` may be given several times.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
GPU_PLUGINS = {
    # plugin library stem -> the delegate's expectations file, relative to the repo
    "libbaton_backend_vulkan": "backends/vulkan/conformance-expectations.txt",
    "libbaton_backend_wgpu": "backends/wgpu/conformance-expectations.txt",
}
BUILD_PACKAGES = [
    "baton-cli",
    "baton-conformance",
    "baton-backend-cpu-plugin",
    "baton-backend-vulkan-plugin",
]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", type=Path, default=REPO / "target" / "release",
                    help="folder with baton, baton-conformance and the plugin libraries")
    ap.add_argument("--build", action="store_true", help="cargo build --release them first")
    ap.add_argument("--models", type=Path, action="append",
                    help="a folder of model folders (default: ../shared/peers/models "
                         "and the bundled examples)")
    ap.add_argument("--out", type=Path, default=REPO / "baton-reports" / "gpu-bench")
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--no-kit", action="store_true", help="skip the conformance kit")
    ap.add_argument("--kit-timeout", type=int, default=1200,
                    help="seconds allowed to each plugin's kit run")
    args = ap.parse_args()

    if args.build:
        pkgs = list(BUILD_PACKAGES)
        if (REPO / "backends" / "wgpu" / "plugin").is_dir():
            pkgs.append("baton-backend-wgpu-plugin")
        cmd = ["cargo", "build", "--release"] + [a for p in pkgs for a in ("-p", p)]
        print("$", " ".join(cmd), flush=True)
        subprocess.run(cmd, cwd=REPO, check=True)

    bin_dir = args.bin.resolve()
    baton = bin_dir / "baton"
    kit = bin_dir / "baton-conformance"
    cpu = bin_dir / lib_name("libbaton_backend_cpu")
    for f in (baton, cpu):
        if not f.exists():
            sys.exit(f"gpu-bench: {f} is missing (build with --build, or give --bin)")
    gpus = [(stem, bin_dir / lib_name(stem)) for stem in GPU_PLUGINS
            if (bin_dir / lib_name(stem)).exists()]
    if not gpus:
        sys.exit(f"gpu-bench: no GPU delegate plugin in {bin_dir}")

    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    models = find_models(args.models or default_model_dirs())
    if not models:
        sys.exit("gpu-bench: no models found")
    cores = os.cpu_count() or 1
    cfg_dir = Path(tempfile.mkdtemp(prefix="baton-gpu-bench-"))
    cpu_cfg = write_config(cfg_dir / "cpu.toml", [(cpu, {"threads": 1})])
    cpu_n_cfg = write_config(cfg_dir / "cpu-n.toml", [(cpu, {"threads": cores})])

    lines = [f"# GPU delegates, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
             f"host CPU: {cpu_model()}, {cores} cores", ""]
    raw = {"devices": {}, "kit": {}, "check": {}, "bench": {}}

    for stem, lib in gpus:
        name = stem.removeprefix("libbaton_backend_")
        gpu_cfg = write_config(cfg_dir / f"{name}.toml", [(lib, {}), (cpu, {"threads": 1})])
        dev = run([baton, "devices", "--config", gpu_cfg], timeout=300)
        raw["devices"][name] = dev.stdout + dev.stderr
        lines += [f"## {name}", "", "```", (dev.stdout + dev.stderr).strip(), "```", ""]

        if not args.no_kit and kit.exists():
            exp = REPO / GPU_PLUGINS[stem]
            cmd = [kit, "--plugin", lib, "--abi-checks", "--report-dir", out / f"kit-{name}"]
            if exp.exists():
                cmd += ["--expectations", exp]
            t0 = time.monotonic()
            r = run(cmd, timeout=args.kit_timeout)
            counts = kit_counts(out / f"kit-{name}" / "report.json")
            raw["kit"][name] = {"rc": r.returncode, "seconds": round(time.monotonic() - t0, 1),
                                "counts": counts, "tail": (r.stdout + r.stderr)[-3000:]}
            lines.append(f"kit: exit {r.returncode} in {raw['kit'][name]['seconds']} s; "
                         + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
            lines.append("")

        rows = []
        for m in models:
            key = f"{name}/{m['name']}"
            chk = run([baton, "run", m["path"], "--config", gpu_cfg, "--check", "--json"]
                      + m["inputs"], timeout=600)
            raw["check"][key] = parse_check(chk)
            b_gpu = bench(baton, m, gpu_cfg, args)
            b_cpu1 = bench(baton, m, cpu_cfg, args)
            b_cpun = bench(baton, m, cpu_n_cfg, args)
            raw["bench"][key] = {"gpu": b_gpu, "cpu_1t": b_cpu1, f"cpu_{cores}t": b_cpun}
            rows.append((m["name"], b_gpu, b_cpu1, b_cpun, raw["check"][key]))

        lines.append(f"| model | {name} ms | CPU 1t ms | CPU {cores}t ms | {name} / CPU 1t "
                     f"| {name} / CPU {cores}t | nodes per backend | check vs reference |")
        lines.append("|---|---:|---:|---:|---:|---:|---|---|")
        for mname, g, c1, cn, chk in rows:
            lines.append(f"| {mname} | {ms(g)} | {ms(c1)} | {ms(cn)} | {ratio(g, c1)} "
                         f"| {ratio(g, cn)} | {nodes(g)} | {chk['verdict']} |")
        lines.append("")

    table = "\n".join(lines)
    print(table)
    (out / "gpu-bench.md").write_text(table + "\n")
    (out / "gpu-bench.json").write_text(json.dumps(raw, indent=1, default=str))
    print(f"written: {out / 'gpu-bench.md'}, {out / 'gpu-bench.json'}")
    failed = any(k.get("rc", 0) != 0 for k in raw["kit"].values()) or any(
        c["verdict"].startswith("FAIL") for c in raw["check"].values())
    return 1 if failed else 0


def lib_name(stem: str) -> str:
    return stem + (".dylib" if sys.platform == "darwin" else ".so")


def default_model_dirs() -> list:
    return [REPO.parent / "shared" / "peers" / "models", REPO / "examples"]


def find_models(roots) -> list:
    """Every folder under `roots` (one level) with one model file and its input files."""
    found = []
    for root in roots:
        if not root.is_dir():
            continue
        for d in sorted(p for p in root.iterdir() if p.is_dir()):
            files = sorted(list(d.glob("*.onnx")) + list(d.glob("*.btir")))
            if len(files) != 1:
                continue
            inputs = []
            for npy in sorted(d.glob("input_*.npy")):
                inputs += ["--input", f"{npy.stem.removeprefix('input_')}={npy}"]
            # The bundled examples name their inputs after the input alone (image.npy).
            if not inputs:
                for npy in sorted(d.glob("*.npy")):
                    if not npy.stem.startswith("expected"):
                        inputs += ["--input", f"{npy.stem}={npy}"]
            found.append({"name": d.name, "path": files[0], "inputs": inputs})
    return found


def write_config(path: Path, plugins) -> Path:
    parts = []
    for prio, (lib, opts) in enumerate(plugins, start=1):
        parts.append(f'[[plugin]]\npath = "{lib}"\npriority = {prio}')
        if opts:
            parts.append("options = { " + ", ".join(f"{k} = {v}" for k, v in opts.items())
                         + " }")
    parts.append('[fallback]\non_execute_error = "host"\non_init_error = "next-backend"')
    path.write_text("\n".join(parts) + "\n")
    return path


def run(cmd, timeout):
    cmd = [str(c) for c in cmd]
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        return subprocess.CompletedProcess(cmd, 124, e.stdout or "", f"timed out after {timeout} s")


def bench(baton, m, cfg, args) -> dict:
    r = run([baton, "bench", m["path"], "--config", cfg, "--runs", args.runs,
             "--warmup", args.warmup, "--load-runs", 1, "--json"] + m["inputs"], timeout=900)
    for line in r.stdout.splitlines():
        if line.startswith("{"):
            return json.loads(line)
    return {"error": (r.stderr or r.stdout).strip()[-500:]}


def parse_check(r) -> dict:
    try:
        parts = json.loads(r.stdout)
    except json.JSONDecodeError:
        return {"verdict": f"FAIL (exit {r.returncode}: {(r.stderr or '').strip()[-200:]})"}
    gpu = [p for p in parts if p["backend"] not in ("cpu",)]
    bad = [p for p in parts if any(o["past"] for o in p["outputs"])]
    worst = max((o["max_abs"] for p in parts for o in p["outputs"]), default=0.0)
    verdict = ("FAIL: " if bad else "ok: ") + f"{len(parts)} partitions, max abs {worst:.2e}"
    return {"verdict": verdict, "partitions": parts, "gpu_partitions": len(gpu)}


def kit_counts(report: Path) -> dict:
    try:
        rep = json.loads(report.read_text())
    except (OSError, json.JSONDecodeError):
        return {"report": "missing"}
    return dict(rep.get("totals", {}))


def ms(b: dict) -> str:
    return f"{b['median_ms']:.3f}" if "median_ms" in b else "error"


def ratio(a: dict, b: dict) -> str:
    if "median_ms" in a and "median_ms" in b and b["median_ms"] > 0:
        return f"{a['median_ms'] / b['median_ms']:.2f}"
    return "-"


def nodes(b: dict) -> str:
    per = b.get("nodes_per_backend")
    if isinstance(per, dict):
        return ", ".join(f"{k} {v}" for k, v in per.items())
    if isinstance(per, list):
        return ", ".join(f"{k} {v}" for k, v in per)
    return b.get("error", "-")[:120]


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


if __name__ == "__main__":
    sys.exit(main())
