#!/usr/bin/env bash
# The fault matrix (a report, not a test): the faulty test plugin acts out each fault at
# each entry point, in each isolation mode, through `baton run` on the bundled tinynet
# example, and a Markdown table of what happened is printed: baton's exit status, what the
# host did instead (fallback), whether the output equals the portable kernels' bit for bit,
# and baton's message about the plugin.
#
#   scripts/fault-matrix.sh [--faults "segfault hang"] [--points "probe execute"]
#
# Entry points: create, probe (the fault strikes the probe's execute), supports, compile,
# init, execute (each of the last four after the probe passed: `when = "after-probe"`).
# Faults: segfault, abort, hang, panic, error (an error status; at `supports` the Rust SDK
# has none, so the plugin declines every node), nan (NaN outputs: probe and execute only).
# Every plugin has timeout_ms = TIMEOUT_MS (default 1000): with isolation = "process" it
# bounds every call; in the host's process only the probe. A run still going after
# LIMIT_S seconds (default 10) is killed by this script and reported as hung.
# PROFILE=dev builds the debug profile instead of release.
set -euo pipefail
cd "$(dirname "$0")/.."
FAULTS="segfault abort hang panic error nan"
POINTS="create probe supports compile init execute"
while [ $# -gt 0 ]; do
    case "$1" in
        --faults) FAULTS=$2; shift 2 ;;
        --points) POINTS=$2; shift 2 ;;
        *) echo "usage: $0 [--faults LIST] [--points LIST]" >&2; exit 2 ;;
    esac
done
PROFILE=${PROFILE:-release}
TIMEOUT_MS=${TIMEOUT_MS:-1000}
LIMIT_S=${LIMIT_S:-10}
OUT=${CARGO_TARGET_DIR:-target}/$([ "$PROFILE" = dev ] && echo debug || echo "$PROFILE")
cargo build --profile "$PROFILE" -p baton-cli -p baton-runtime-host -p baton-faulty-plugin >&2
baton=$(realpath "$OUT/baton")
plugin=$(realpath "$OUT/libbaton_faulty_plugin.so")
model=examples/tinynet/tinynet.btir
image=examples/tinynet/image.npy
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# The portable kernels' answer, for comparison.
printf 'cache_dir = "%s/cache-ref"\n' "$TMP" > "$TMP/none.toml"
"$baton" run "$model" --config "$TMP/none.toml" --input image="$image" --output-dir "$TMP/ref" >/dev/null 2>&1

echo "| isolation | entry point | fault | exit | fallback | output | message |"
echo "|---|---|---|---|---|---|---|"
n=0
for isolation in in-process process; do
    for point in $POINTS; do
        case $point in
            probe) at=execute when=always ;;
            create) at=create when=always ;;
            *) at=$point when=after-probe ;;
        esac
        for fault in $FAULTS; do
            # NaN outputs are an execute fault: elsewhere the plugin would act normally.
            if [ "$fault" = nan ] && [ "$at" != execute ]; then continue; fi
            n=$((n + 1))
            cfg="$TMP/c$n.toml"
            printf 'cache_dir = "%s/cache%d"\n[[plugin]]\npath = "%s"\nisolation = "%s"\ntimeout_ms = %d\noptions = { action = "%s", at = "%s", when = "%s" }\n' \
                "$TMP" "$n" "$plugin" "$isolation" "$TIMEOUT_MS" "$fault" "$at" "$when" > "$cfg"
            set +e
            timeout -s KILL "$LIMIT_S" "$baton" run "$model" --config "$cfg" --input image="$image" \
                --output-dir "$TMP/o$n" >/dev/null 2>"$TMP/e$n"
            code=$?
            set -e
            err="$TMP/e$n"
            case $code in
                137) exit_text="hung (killed after ${LIMIT_S} s)" ;;
                139) exit_text="139 (SIGSEGV)" ;;
                134) exit_text="134 (SIGABRT)" ;;
                *) exit_text=$code ;;
            esac
            if grep -q "running its partition on the portable kernels" "$err"; then
                fallback="execute → host ran the partition"
            elif grep -q "dropped, re-partitioning" "$err"; then
                fallback="compile/init → re-partitioned"
            elif grep -q "faulty dropped" "$err"; then
                fallback="supports → re-partitioned"
            elif grep -q "skipped: probe failed" "$err"; then
                fallback="probe failed → not used"
            elif grep -q "not loaded" "$err"; then
                fallback="not loaded → not used"
            elif grep -q "nodes run by:.*faulty" "$err"; then
                fallback="none (plugin used)"
            elif [ "$code" = 0 ]; then
                fallback="declined every node → host"
            else
                fallback="-"
            fi
            if [ -f "$TMP/o$n/probabilities.npy" ]; then
                if cmp -s "$TMP/o$n/probabilities.npy" "$TMP/ref/probabilities.npy"; then
                    output="= portable"
                else
                    output="**differs**"
                fi
            else
                output="none"
            fi
            # baton's first line about the plugin (not the panic hook's report: the panic is
            # caught, and its message follows in the plugin's error), shortened.
            message=$(grep -m1 -E "^baton: .*(faulty|plugin)" "$err" \
                | sed -e 's/^baton: //' -e 's/^note: //' -e "s#$plugin not loaded: ##" \
                    -e 's/plugin faulty [0-9.]*: //g' -e 's/running its partition on the portable kernels/host runs it/' \
                    -e 's/|/\\|/g' | cut -c1-170 || true)
            echo "| $isolation | $point | $fault | $exit_text | $fallback | $output | ${message:--} |"
        done
    done
done
