#!/usr/bin/env bash
# A soak run of streaming (not a timed test): silero VAD streamed in one session on the
# CPU plugin for 100,000 steps (pass --steps N to change), sampling the resident set, then
# the last replay of the chunks compared bit for bit with a fresh session's outputs. See
# runtime-host/examples/soak_stream.rs for what it prints.
#
#   scripts/soak-stream.sh [--steps N]
#
# PROFILE=dev builds the debug profile instead of release (faster to build, slower to run).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/fetch-silero.sh >&2
[ -f .cache/silero/expected/chunks.npy ] || scripts/silero-expected.sh >&2
PROFILE=${PROFILE:-release}
OUT=${CARGO_TARGET_DIR:-target}/$([ "$PROFILE" = dev ] && echo debug || echo "$PROFILE")
cargo build --profile "$PROFILE" -p baton-backend-cpu-plugin -p baton-runtime-host --example soak_stream >&2
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
plugin=$(realpath "$OUT/libbaton_backend_cpu.so")
printf 'cache_dir = "%s/cache"\n[[plugin]]\npath = "%s"\n' "$TMP" "$plugin" > "$TMP/soak.toml"
"$OUT/examples/soak_stream" .cache/silero --config "$TMP/soak.toml" "$@"
