#!/usr/bin/env bash
# The whole test suite. The integration tests load the workspace's plugins (cdylibs) from
# the target directory, so the workspace is built first; gcc builds the C test plugin.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v gcc >/dev/null || { echo "gcc is required (apt-get install gcc)" >&2; exit 1; }
cargo build --workspace --all-targets
cargo test --workspace
