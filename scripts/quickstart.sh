#!/usr/bin/env bash
# Build the library and run examples/quickstart.c against it.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v cargo >/dev/null || { echo "quickstart needs Rust (cargo): https://rustup.rs" >&2; exit 1; }
. scripts/lib.sh
# A C compiler and readelf from Debian when they are missing.
ensure_commands cc:build-essential readelf:binutils
# Cargo shows its progress on stderr (a bar on a terminal, a line per crate
# otherwise).
[ -f target/release/libdsh_session.so ] ||
    echo "==> building the library (cargo build --release; a few minutes the first time)" >&2
cargo build --release
mkdir -p target/quickstart
# cargo does not create the SONAME link (libdsh_session.so.<ABI>) that the loader looks for.
soname=$(readelf -d target/release/libdsh_session.so | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')
ln -sf libdsh_session.so "target/release/$soname"
cc -std=c99 -Wall -Wextra -Werror -Iinclude examples/quickstart.c \
   -Ltarget/release -ldsh_session -Wl,-rpath,"$PWD/target/release" -o target/quickstart/quickstart
# The first run creates the session in target/quickstart/quickstart.db;
# every later run reopens it and adds a turn.
./target/quickstart/quickstart "$@"
