#!/usr/bin/env bash
# The Python package (python/): its abi3 wheel built once with maturin, installed in a
# fresh venv beside numpy and ONNX Runtime (scripts/peer-requirements.txt, by hash) and
# pytest, and its test suite run there (silero VAD streaming against ONNX Runtime
# included). Needs network for the venvs' packages (PyPI).
#
# Usage: scripts/python-wheel.sh [PROFILE]   (release by default; `dev` builds faster)
# The wheel is built in the workspace's target dir (CARGO_TARGET_DIR, else target/), so
# the runtime's crates already built there for PROFILE are reused. It is left in
# target/wheels/. BATON_CPU_PLUGIN (a plugin file) adds the tests on the CPU plugin.
set -euo pipefail
cd "$(dirname "$0")/.."
profile="${1:-release}"
target="${CARGO_TARGET_DIR:-$PWD/target}"

build=.cache/maturin-venv
if [[ ! -x "$build/bin/maturin" ]]; then
    python3 -m venv "$build"
    "$build/bin/pip" install --quiet --disable-pip-version-check "maturin>=1.7,<2"
fi
rm -rf "$target/wheels"
start=$SECONDS
CARGO_TARGET_DIR="$target" "$build/bin/maturin" build --profile "$profile" \
    -m python/Cargo.toml --out "$target/wheels" --interpreter python3
echo "wheel built in $((SECONDS - start)) s: $(ls "$target"/wheels/*.whl)"

# A fresh venv each time (scripts/bench-embed.sh uses it afterwards).
venv="$PWD/.cache/baton-venv"
rm -rf "$venv"
python3 -m venv "$venv"
pip=("$venv/bin/pip" install --quiet --disable-pip-version-check)
"${pip[@]}" --no-deps --require-hashes -r scripts/peer-requirements.txt
"${pip[@]}" "pytest>=8,<9"
"${pip[@]}" --no-deps "$target"/wheels/*.whl
# From outside the source tree, so `import baton` is the installed wheel.
(cd "$venv" && "$venv/bin/python" -m pytest -q "$OLDPWD/python/tests")
