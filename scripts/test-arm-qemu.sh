#!/usr/bin/env bash
# Runs the CPU delegate's tests and then the conformance kit on the CPU plugin for aarch64
# under qemu-user, once per emulated core, so that every NEON dispatch path is exercised:
# `max` (all extensions), `neoverse-n1` (dotprod, no i8mm) and `cortex-a72` (plain NEON).
# Conformance reports go to baton-reports/cpu-aarch64-<core>/.
#
# rustup cannot fetch targets on the CI machines, so this uses Debian's Rust toolchain,
# whose aarch64 standard library installs through multiarch; it installs what it needs
# when missing (needs root and apt). Exits non-zero when any run fails.
#
# Usage: [ARM_QEMU_TARGET_DIR=DIR] scripts/test-arm-qemu.sh [extra cargo test args...]
set -euo pipefail
cd "$(dirname "$0")/.."

CPUS=(max neoverse-n1 cortex-a72)
PACKAGES=(rustc-web cargo-web libstd-rust-web-dev:arm64 gcc-aarch64-linux-gnu
          libc6-dev-arm64-cross qemu-user-static)

have_toolchain() {
    [ -x /usr/bin/rustc ] && [ -x /usr/bin/cargo ] && command -v qemu-aarch64-static >/dev/null &&
        command -v aarch64-linux-gnu-gcc >/dev/null &&
        /usr/bin/rustc --print sysroot >/dev/null 2>&1 &&
        [ -d "$(/usr/bin/rustc --print sysroot)/lib/rustlib/aarch64-unknown-linux-gnu" ]
}

if ! have_toolchain; then
    echo "test-arm-qemu: installing ${PACKAGES[*]}" >&2
    SUDO=""
    [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO dpkg --add-architecture arm64
    $SUDO apt-get update -qq
    # Refuse to go on if apt would remove anything.
    if $SUDO apt-get install -s --no-install-recommends "${PACKAGES[@]}" | grep -q '^Remv'; then
        echo "test-arm-qemu: installing the toolchain would remove packages; refusing" >&2
        exit 1
    fi
    $SUDO apt-get install -y -qq --no-install-recommends "${PACKAGES[@]}" >/dev/null
fi

# Debian's compiler: only it matches the multiarch aarch64 std.
export RUSTC=/usr/bin/rustc RUSTDOC=/usr/bin/rustdoc
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
# Without -L: with it, threaded tests hang under qemu-user.
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER=qemu-aarch64-static
# Apart from the rustup builds (another compiler, another std); ARM_QEMU_TARGET_DIR moves it
# (CARGO_TARGET_DIR is deliberately not honoured: it usually names the rustup build's dir).
export CARGO_TARGET_DIR="${ARM_QEMU_TARGET_DIR:-target/aarch64-qemu}"

# Build once, then run under each emulated core.
/usr/bin/cargo test --target aarch64-unknown-linux-gnu -p baton-backend-cpu --no-run
/usr/bin/cargo build --release --target aarch64-unknown-linux-gnu -p baton-backend-cpu-plugin \
    -p baton-conformance
rel="$CARGO_TARGET_DIR/aarch64-unknown-linux-gnu/release"
status=0
for cpu in "${CPUS[@]}"; do
    echo "== QEMU_CPU=$cpu: tests" >&2
    if ! QEMU_CPU="$cpu" /usr/bin/cargo test --target aarch64-unknown-linux-gnu \
        -p baton-backend-cpu "$@"; then
        echo "test-arm-qemu: tests FAILED under QEMU_CPU=$cpu" >&2
        status=1
    fi
    echo "== QEMU_CPU=$cpu: conformance of the CPU plugin" >&2
    # The kit starts its isolated children through the runner (no binfmt_misc needed).
    if ! QEMU_CPU="$cpu" BATON_CHILD_RUNNER=qemu-aarch64-static qemu-aarch64-static \
        "$rel/baton-conformance" --plugin "$rel/libbaton_backend_cpu.so" \
        --report-dir "baton-reports/cpu-aarch64-$cpu"; then
        echo "test-arm-qemu: conformance FAILED under QEMU_CPU=$cpu" >&2
        status=1
    fi
done
exit $status
