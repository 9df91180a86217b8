#!/usr/bin/env bash
# Test the Go binding (bindings/go): gofmt, go vet, go test -race, with the
# build tag dshsession_system (the library found through pkg-config; the
# prebuilt archives that a release puts into the module are tested by
# scripts/test-dist.sh, through a module proxy).
#
#   DSH_PREFIX=/usr/local ./scripts/test-go.sh   # against an installed library
#   ./scripts/test-go.sh                          # against a cargo build of this tree
#   ./scripts/test-go.sh --parity                 # only TestBindingParity, with its table
#
# With DSH_PREFIX the library is found through $DSH_PREFIX/lib/pkgconfig/dsh-session.pc
# (lib64 and lib/<multiarch> are tried too). Without it the crate is built here
# (cargo build --release) and a temporary dsh-session.pc in target/go-pkgconfig/
# points at target/release and include/.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

. scripts/lib.sh
# The module carries the repository's licences at its root (pkg.go.dev and
# licence scanners look there): the same files.
for f in LICENSE-MIT LICENSE-APACHE; do
    cmp -s "$f" "bindings/go/$f" || { echo "bindings/go/$f differs from $f: copy it again" >&2; exit 1; }
done
# Go from Debian (golang-go) when it is missing; any Go from 1.19 on works.
ensure_commands cc:build-essential pkg-config:pkg-config readelf:binutils go:golang-go
command -v go >/dev/null || { echo "the Go binding needs Go (go): https://go.dev/dl" >&2; exit 1; }

if [ -n "${DSH_PREFIX:-}" ]; then
    pcdir=$DSH_PREFIX/lib/pkgconfig
    for d in "$DSH_PREFIX"/lib64/pkgconfig "$DSH_PREFIX"/lib/*-linux-gnu/pkgconfig; do
        if [ ! -f "$pcdir/dsh-session.pc" ] && [ -f "$d/dsh-session.pc" ]; then pcdir=$d; fi
    done
    export PKG_CONFIG_PATH=$pcdir${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
    pkg-config --exists dsh-session ||
        { echo "no dsh-session.pc under $DSH_PREFIX (looked in $pcdir)" >&2; exit 1; }
    libdir=$(pkg-config --variable=libdir dsh-session)
    echo "==> using the installed library: $(pkg-config --modversion dsh-session) in $libdir"
else
    command -v cargo >/dev/null || { echo "building the library needs Rust (cargo): https://rustup.rs" >&2; exit 1; }
    echo "==> cargo build --release"
    cargo build --release --locked
    # Where cargo put it (honours CARGO_TARGET_DIR and .cargo/config).
    target_dir=$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
    libdir=${target_dir:-$root/target}/release
    # cargo does not create the SONAME link (libdsh_session.so.<ABI>) the loader looks for.
    soname=$(readelf -d "$libdir/libdsh_session.so" | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')
    [ -n "$soname" ] || { echo "libdsh_session.so has no SONAME" >&2; exit 1; }
    [ "$soname" = libdsh_session.so ] || ln -sf libdsh_session.so "$libdir/$soname"
    version=$(sed -n 's/^#define DSH_VERSION_STRING "\(.*\)"/\1/p' include/dsh_session.h)
    mkdir -p target/go-pkgconfig
    cat >target/go-pkgconfig/dsh-session.pc <<EOF
# Temporary, written by scripts/test-go.sh for a library built in this tree.
libdir=$libdir
includedir=$root/include

Name: dsh-session
Description: DeepSeek Harness session engine (C ABI), uninstalled build
Version: $version
Libs: -L\${libdir} -ldsh_session
Cflags: -I\${includedir}
EOF
    export PKG_CONFIG_PATH=$root/target/go-pkgconfig
fi
export LD_LIBRARY_PATH=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

# cgo on, this toolchain only, no module downloads (the module has no dependencies).
export CGO_ENABLED=1 GOTOOLCHAIN=local GOPROXY=off GOFLAGS=${GOFLAGS:-}
# Without HOME (e.g. a bare CI shell) go has no build cache: keep one under target/.
case "$(go env GOCACHE 2>/dev/null)" in "" | off) export GOCACHE=$root/target/go-cache ;; esac
[ -n "$(go env GOMODCACHE 2>/dev/null)" ] || export GOMODCACHE=$root/target/go-modcache
cd bindings/go
go version

if [ "${1:-}" = --parity ]; then
    echo "==> go test -run BindingParity: every function of include/dsh_session.h in Go, Swift and dsh_session.hpp"
    go test -tags dshsession_system -count=1 -run BindingParity -v .
    exit
fi

echo "==> gofmt"
unformatted=$(gofmt -l .)
[ -z "$unformatted" ] || { echo "not gofmt-clean: $unformatted" >&2; exit 1; }

echo "==> go vet -tags dshsession_system ./..."
go vet -tags dshsession_system ./...

echo "==> go test -tags dshsession_system -race -count=1 ./..."
go test -tags dshsession_system -race -count=1 -v ./...

echo "==> go test -tags dshsession_system,dshsession_debug (GOGC=1, a GC before every call) on the GC and concurrency tests"
GOGC=1 go test -count=1 -tags dshsession_system,dshsession_debug -run 'GC|Concurrent|Finalizer|Close|Context' ./...
