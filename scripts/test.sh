#!/usr/bin/env bash
# Every test of dsh-session, with the set-up a fresh machine needs.
# Installs missing system packages from Debian (valgrind, pkg-config, a C
# compiler, cmake, python3, Go, PostgreSQL, mingw-w64 and Wine for the
# Windows suite; as root or through sudo), the rustup targets
# x86_64-pc-windows-gnu, x86_64-apple-darwin and aarch64-apple-darwin and,
# for fuzzing, the nightly toolchain (fuzzing is skipped, saying why, where
# it cannot be installed); crates come from crates.io through cargo. The
# Swift step needs root: run as another user, it says so and the later
# steps still run.
# DSH_TEST_POSTGRES_URL points the PostgreSQL tests at a server of the
# caller's; DSH_TEST_NO_POSTGRES=1 runs without one (they say skipped).
set -euo pipefail
cd "$(dirname "$0")/.."

. scripts/lib.sh
ensure_commands cc:build-essential valgrind:valgrind pkg-config:pkg-config readelf:binutils tmux:tmux
command -v cargo >/dev/null || { echo "Rust (cargo) is required: https://rustup.rs" >&2; exit 1; }
rustup component add rustfmt clippy >/dev/null 2>&1 || true

# A throwaway PostgreSQL cluster for the postgres backend's tests (unless
# the caller points them at a server of its own), stopped on exit.
if [ -z "${DSH_TEST_POSTGRES_URL:-}" ] && [ "${DSH_TEST_NO_POSTGRES:-}" != 1 ]; then
    echo "==> PostgreSQL: a throwaway cluster on loopback"
    pg_dir=$(mktemp -d /tmp/dsh-pg.XXXXXX)
    trap 'scripts/pg-cluster.sh stop "$pg_dir"' EXIT
    scripts/pg-cluster.sh start "$pg_dir"
    . "$pg_dir/env"
fi

echo "==> format and lints"
cargo fmt --all --check
cargo clippy --locked --workspace --all-targets -- -D warnings
# The backends are cargo features of the core and of the C library (which
# passes them down): every choice must build cleanly, its tests included.
for features in "" sqlite jsonl postgres; do
    cargo clippy --locked -p dsh-session --all-targets --no-default-features --features "$features" -- -D warnings
    cargo clippy --locked -p dsh-session-ffi --no-default-features --features "$features" -- -D warnings
done
# The Rust API documentation builds without a warning (no broken link, no
# link from a public item to a private one).
RUSTDOCFLAGS="-D warnings" cargo doc --locked -p dsh-session -p dsh-session-ffi-impl --no-deps

echo "==> cargo test (unit, conformance vectors, checklist, contract, crash, C ABI misuse)"
# The C programs link the shared library, which `cargo test` alone does not build.
cargo build --locked --workspace
cargo test --locked --workspace

echo "==> the core's suites with each choice of backends (a suite that needs a backend runs where it is built)"
for features in "" sqlite jsonl postgres; do
    echo "backends: ${features:-memory only}"
    cargo test --locked -q -p dsh-session --no-default-features --features "$features" --lib --tests
done

echo "==> the CLI at scale: peak memory of show, derive, verify and stats on 200k events (release build)"
cargo test --locked --release -p dsh-session-cli --test cli_scale -- --nocapture

echo "==> C ABI misuse test under valgrind"
DSH_VALGRIND=1 cargo test --locked -p dsh-session-ffi --test c_abi

echo "==> Go binding"
./scripts/test-go.sh

echo "==> binding parity: every function of include/dsh_session.h in Go, Swift and dsh_session.hpp"
./scripts/test-go.sh --parity

echo "==> Swift binding (in a cached Debian trixie chroot)"
if [ "$(id -u)" = 0 ]; then
    ./scripts/test-swift.sh
else
    echo "Swift binding SKIPPED: scripts/test-swift.sh needs root (debootstrap, chroot, bind mounts); run it with sudo"
fi

echo "==> fuzzing: every target of fuzz/ for 30 s (./scripts/fuzz.sh --soak runs 10 min each)"
DSH_FUZZ_OPTIONAL=1 ./scripts/fuzz.sh 30

echo "==> quickstart"
./scripts/quickstart.sh >/dev/null
echo "quickstart ran"

echo "==> packaging: CMake package, pkg-config, static archive, C suites (reuses the release build)"
DSH_PACKAGING_CARGO_TARGET_DIR=$PWD/target ./scripts/test-packaging.sh

echo "==> release artifacts: scripts/dist.sh's archive and its contents; C, C++ and Go consumers outside the repository built from it (Go through a module proxy) with no cargo, cmake or pkg-config on PATH"
./scripts/test-dist.sh

echo "==> backends: the C library without postgres (cargo build --no-default-features --features sqlite,jsonl), its symbols and sizes"
./scripts/test-backends.sh

echo "==> Windows: cross-built with mingw-w64, Rust tests and C programs under Wine"
./scripts/test-windows.sh

echo "==> macOS: type-checked only, x86_64 and aarch64 (a stand-in C compiler; nothing is linked or run)"
./scripts/check-macos.sh

echo "==> README: every code block, each shell block twice"
./scripts/test-readme.sh
