#!/usr/bin/env bash
# Fuzz every target in fuzz/ (cargo fuzz, libFuzzer with AddressSanitizer):
#   ./scripts/fuzz.sh            # 30 s a target (what ./scripts/test.sh runs)
#   ./scripts/fuzz.sh 60         # N seconds a target
#   ./scripts/fuzz.sh --soak     # 10 min a target
# A crash, a panic (DSH_E_INTERNAL and output that is not JSON are panics
# in the targets), a leak, an input slower than 10 s or more than 2 GB of
# memory fails the run and leaves the input in fuzz/artifacts/<target>/.
# The corpus of the repository (fuzz/corpus) seeds each run; what a run
# finds goes to a scratch copy, so the repository stays as it is.
set -euo pipefail
cd "$(dirname "$0")/.."

secs=${1:-30}
[ "$secs" = --soak ] && secs=600
rustup run nightly rustc --version >/dev/null 2>&1 ||
    { echo "fuzzing needs the nightly toolchain (rustup toolchain install nightly)" >&2; exit 1; }
if ! command -v cargo-fuzz >/dev/null; then
    echo "==> cargo install cargo-fuzz"
    cargo install cargo-fuzz --locked
fi

cd fuzz
echo "==> cargo fuzz build (nightly, AddressSanitizer)"
cargo +nightly fuzz build -O
work=$(mktemp -d "${TMPDIR:-/tmp}/dsh-fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT
status=0
for target in $(cargo +nightly fuzz list); do
    mkdir -p "$work/$target"
    cp corpus/"$target"/* "$work/$target/"
    log="$work/$target.log"
    echo "==> fuzz $target for ${secs} s"
    if cargo +nightly fuzz run -O "$target" "$work/$target" -- \
        -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 >"$log" 2>&1; then
        runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
        echo "fuzz $target: ${runs:-?} runs in ${secs} s, no failure"
    else
        status=1
        echo "fuzz $target FAILED:" >&2
        grep -E "panicked|ERROR|SUMMARY|Test unit written|artifact" "$log" | head -20 >&2 || tail -40 "$log" >&2
    fi
done
exit $status
