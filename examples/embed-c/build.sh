#!/usr/bin/env bash
# Builds embed-c against libbaton (the baton-capi crate), as a C program's build would:
# the static library by default, the shared one with `shared` (the binary then finds it by
# its rpath).
#
#   cargo build -p baton-capi --release
#   examples/embed-c/build.sh target/release          # or: target/release shared
#   examples/embed-c/embed-c examples/tinynet/tinynet.btir
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
libdir="$(cd "${1:-$here/../../target/release}" && pwd)"
link="${2:-static}"
cc="${CC:-cc}"
case "$link" in
    # A Rust static library needs the system libraries its standard library uses.
    static) libs=("$libdir/libbaton.a" -lpthread -ldl -lm) ;;
    shared) libs=(-L"$libdir" -lbaton -Wl,-rpath,"$libdir") ;;
    *) echo "build.sh: link '$link' is neither static nor shared" >&2; exit 2 ;;
esac
"$cc" -std=c99 -Wall -Wextra -Werror -O2 -I"$here/../../capi/include" \
    -o "$here/embed-c" "$here/main.c" "${libs[@]}"
echo "built $here/embed-c ($link, from $libdir)"
