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
# Installs what it lacks: the nightly toolchain (rustup) and cargo-fuzz
# (crates.io). Where that cannot be done it fails, or, with
# DSH_FUZZ_OPTIONAL=1 (scripts/test.sh), prints why fuzzing is skipped.
set -euo pipefail
cd "$(dirname "$0")/.."

secs=${1:-30}
[ "$secs" = --soak ] && secs=600

# cannot REASON: fuzzing is impossible here. With DSH_FUZZ_OPTIONAL=1 (what
# scripts/test.sh sets) that is a skip, said so; otherwise a failure.
cannot() {
    if [ "${DSH_FUZZ_OPTIONAL:-0}" = 1 ]; then
        echo "fuzzing SKIPPED: $1"
        exit 0
    fi
    echo "fuzz.sh: $1" >&2
    exit 1
}
# cargo fuzz builds with the nightly toolchain: installed through rustup
# when it is missing.
if ! rustup run nightly rustc --version >/dev/null 2>&1; then
    command -v rustup >/dev/null ||
        cannot "cargo fuzz needs Rust's nightly toolchain, and there is no rustup to install it with (https://rustup.rs)"
    echo "==> rustup toolchain install nightly --profile minimal (cargo fuzz needs it)"
    rustup toolchain install nightly --profile minimal ||
        cannot "cargo fuzz needs Rust's nightly toolchain, and rustup toolchain install nightly failed"
fi
if ! command -v cargo-fuzz >/dev/null; then
    echo "==> cargo install cargo-fuzz --locked"
    cargo install cargo-fuzz --locked || cannot "cargo install cargo-fuzz failed (crates.io unreachable?)"
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
