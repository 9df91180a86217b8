#!/usr/bin/env bash
# Type-checks every crate of the workspace (all targets: libraries, the
# CLI, tests, benches) for x86_64 and aarch64 macOS; links nothing, runs
# nothing. Linux has no macOS SDK: the C parts that build scripts
# compile (the bundled SQLite, zstd) go to a stand-in compiler that only
# creates empty output files and a stand-in `ar` that writes empty
# archives, which `cargo check` never links. What this shows: the Rust
# code compiles for Apple targets without a warning, with every
# Linux-only call gated.
# macOS is built and tested by the CI workflow (.github/workflows/ci.yml).
set -euo pipefail
cd "$(dirname "$0")/.."

command -v cargo >/dev/null || { echo "Rust (cargo) is required: https://rustup.rs" >&2; exit 1; }
targets=(x86_64-apple-darwin aarch64-apple-darwin)
for t in "${targets[@]}"; do
    rustup target list --installed 2>/dev/null | grep -qx "$t" || rustup target add "$t"
done

stand_in="$PWD/target/macos-stand-in"
mkdir -p "$stand_in"
# cc: create every file named after -o, empty; print nothing (a
# preprocessor run, as cc-rs makes to tell the compiler's family, gets
# nothing and cc-rs assumes GCC).
cat >"$stand_in/cc" <<'EOF'
#!/bin/sh
while [ $# -gt 0 ]; do
    if [ "$1" = -o ] && [ $# -gt 1 ]; then : >"$2"; shift; fi
    shift
done
exit 0
EOF
# ar: every *.a argument becomes an empty archive.
cat >"$stand_in/ar" <<'EOF'
#!/bin/sh
for a in "$@"; do
    case $a in *.a) printf '!<arch>\n' >"$a" ;; esac
done
exit 0
EOF
chmod +x "$stand_in/cc" "$stand_in/ar"

for t in "${targets[@]}"; do
    v=${t//-/_}
    echo "macos: cargo check --workspace --all-targets --target $t (stand-in C compiler; nothing is linked or run)"
    if ! env "CC_$v=$stand_in/cc" "AR_$v=$stand_in/ar" "RUSTFLAGS=${RUSTFLAGS:-} -D warnings" \
        cargo check --locked --workspace --all-targets --target "$t" 2>&1 |
        sed '/^ *\(Compiling\|Checking\)/d'; then
        echo "macos: FAILED: cargo check --target $t" >&2
        exit 1
    fi
done
echo "macos: ${#targets[@]} targets type-checked (x86_64, aarch64); nothing was linked or run"
