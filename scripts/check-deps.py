#!/usr/bin/env python3
"""Checks the crate graph against the house rules (ARCHITECTURE.md, "Crates"):

- no host crate (runtime-host, reference, onnx, partitioner, conformance) depends on a
  backend (baton-backend-*), directly or through any other crate, normal, build or dev
  dependency alike: backends reach a program only through the `baton` binary's cargo
  features or as plugin files;
- the contract's satellites (reference, onnx, partitioner) and every backend depend on no
  baton-* crate other than baton-delegate-api (dev-dependencies excepted for backends,
  whose tests drive them through the host), except that backends may share code through
  a backend library (baton-gpu-kernels: the GPU delegates' kernels, lowering and plan),
  which counts as a backend for the rules above and itself depends on the contract alone.

Usage: scripts/check-deps.py  (reads `cargo metadata`; exits 1 and names every violation)
"""

import json
import subprocess
import sys

HOSTS = [
    "baton-runtime-host",
    "baton-reference",
    "baton-onnx",
    "baton-partitioner",
    "baton-conformance",
]
CONTRACT_ONLY = ["baton-reference", "baton-onnx", "baton-partitioner"]
CONTRACT = "baton-delegate-api"
# Code shared by several backends and by nothing else.
BACKEND_LIBRARIES = ["baton-gpu-kernels"]


def is_backend(name):
    return name.startswith("baton-backend-") or name in BACKEND_LIBRARIES


def main():
    out = subprocess.run(
        ["cargo", "metadata", "--format-version", "1"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    meta = json.loads(out)
    members = set(meta["workspace_members"])
    packages = {p["id"]: p for p in meta["packages"] if p["id"] in members}
    by_name = {p["name"]: p for p in packages.values()}

    def deps(name, with_dev):
        """The workspace packages `name` depends on directly."""
        return {
            d["name"]
            for d in by_name[name]["dependencies"]
            if d["name"] in by_name and (with_dev or d["kind"] != "dev")
        }

    def closure(name):
        """Every workspace package reachable from `name` (its own dev-dependencies
        included, those of the packages it reaches not: cargo does not build them)."""
        seen, path, todo = set(), {}, [(name, True)]
        while todo:
            cur, with_dev = todo.pop()
            for d in sorted(deps(cur, with_dev)):
                if d not in seen and d != name:
                    seen.add(d)
                    path[d] = cur
                    todo.append((d, False))
        return seen, path

    def chain(path, start, end):
        hops = [end]
        while hops[-1] != start:
            hops.append(path[hops[-1]])
        return " -> ".join(reversed(hops))

    errors = []
    for host in HOSTS:
        if host not in by_name:
            errors.append(f"{host}: not a workspace member (renamed? update this script)")
            continue
        reached, path = closure(host)
        for b in sorted(filter(is_backend, reached)):
            errors.append(f"{host} depends on backend {b}: {chain(path, host, b)}")
    for name in CONTRACT_ONLY:
        if name not in by_name:
            continue
        for d in sorted(deps(name, with_dev=True)):
            if d.startswith("baton-") and d != CONTRACT:
                errors.append(f"{name} depends on {d}; it may depend on {CONTRACT} alone")
    for name in sorted(filter(is_backend, by_name)):
        for d in sorted(deps(name, with_dev=False)):
            allowed = {CONTRACT, name.removesuffix("-plugin")}
            if name not in BACKEND_LIBRARIES:
                allowed.update(BACKEND_LIBRARIES)
            if d.startswith("baton-") and d not in allowed:
                errors.append(f"{name} depends on {d}; a backend may depend on {CONTRACT} alone")

    for e in errors:
        print(f"check-deps: {e}", file=sys.stderr)
    if errors:
        return 1
    print(
        f"check-deps: ok ({', '.join(HOSTS)} reach no backend; "
        f"{', '.join(CONTRACT_ONLY)} depend on {CONTRACT} alone)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
