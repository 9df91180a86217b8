#!/usr/bin/env bash
# The release archive of the platform it runs on (docs/packaging.md,
# "Release archives"):
#
#   scripts/dist.sh        # target/dist/dsh-session-<version>-<os>-<arch>.tar.gz + .sha256
#
# CMake builds and installs the library (it runs cargo build --release
# --locked in the checkout's target/, so an earlier release build is
# reused) into a staging prefix, which becomes the archive: the layout of
# an install prefix, relocatable, under one top directory named like the
# archive:
#
#   include/dsh_session.h, include/dsh_session.hpp
#   lib/libdsh_session.so.<version> + the SONAME link and libdsh_session.so
#       (macOS: lib/libdsh_session.<version>.dylib and its links)
#   lib/libdsh_session.a                      (only dsh_* global on Linux)
#   lib/pkgconfig/dsh-session.pc, dsh-session-static.pc
#   lib/cmake/dsh_session/dsh_sessionConfig.cmake, …ConfigVersion.cmake
#   bin/dsh-session
#   share/doc/dsh_session/LICENSE-MIT, LICENSE-APACHE
#
# The version is Cargo.toml's [workspace.package] version (the header's
# DSH_VERSION_STRING, which CMake checks against it); <os>-<arch> is
# linux-x86_64, linux-aarch64, macos-x86_64 or macos-aarch64. The archive
# is reproducible: files sorted, owner 0, every mtime the last commit's
# time (SOURCE_DATE_EPOCH overrides it), gzip without a name or time.
#
# On macOS it also writes CDshSession.xcframework.zip (+ .sha256, the
# checksum SwiftPM's binaryTarget wants): the static library of both
# architectures (cargo --target aarch64-apple-darwin and
# x86_64-apple-darwin, joined by lipo) with the header and a module map.
#
# Environment: DSH_DIST_DIR (default target/dist), DSH_DIST_BUILD_DIR
# (default build/dist, reused), CARGO_TARGET_DIR (default target).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

. scripts/lib.sh
case "$(uname -s)" in
    Linux)
        os=linux
        ensure_commands cmake:cmake cc:build-essential c++:build-essential readelf:binutils objcopy:binutils
        ;;
    Darwin) os=macos ;;
    *) echo "dist.sh: no release archive for $(uname -s) yet (Linux and macOS)" >&2; exit 1 ;;
esac
command -v cargo >/dev/null || { echo "dist.sh needs Rust (cargo): https://rustup.rs" >&2; exit 1; }
case "$(uname -m)" in
    x86_64 | amd64) arch=x86_64 ;;
    aarch64 | arm64) arch=aarch64 ;;
    *) arch=$(uname -m) ;;
esac

version=$(sed -n 's/^#define DSH_VERSION_STRING "\(.*\)"$/\1/p' include/dsh_session.h)
[ -n "$version" ] || { echo "dist.sh: no DSH_VERSION_STRING in include/dsh_session.h" >&2; exit 1; }
name=dsh-session-$version-$os-$arch
dist=${DSH_DIST_DIR:-$root/target/dist}
build=${DSH_DIST_BUILD_DIR:-$root/build/dist}
cargo_target=${CARGO_TARGET_DIR:-$root/target}
case $cargo_target in /*) ;; *) cargo_target=$root/$cargo_target ;; esac
epoch=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}

echo "==> dist: $name (build dir $build, cargo target dir $cargo_target)"
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
want_gen=${generator[1]:-Unix Makefiles}
if [ -f "$build/CMakeCache.txt" ] && ! grep -qx "CMAKE_GENERATOR:INTERNAL=$want_gen" "$build/CMakeCache.txt"; then
    rm -rf "$build/CMakeCache.txt" "$build/CMakeFiles"
fi
cmake -S . -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DDSH_BUILD_TESTS=OFF \
    -DDSH_CARGO_BUILD=ON "-DDSH_CARGO_TARGET_DIR=$cargo_target" -DCMAKE_INSTALL_LIBDIR=lib >/dev/null
cmake --build "$build"

stage=$build/stage-dist
rm -rf "$stage"
mkdir -p "$stage" "$dist"
cmake --install "$build" --prefix "$stage/$name" >/dev/null

archive=$dist/$name.tar.gz
echo "==> dist: writing $archive"
# GNU tar (Linux) takes the reproducibility options; bsdtar (macOS) does not.
if [[ $(tar --version 2>/dev/null) == *'GNU tar'* ]]; then
    tar -C "$stage" --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$epoch" \
        --format=gnu -cf - "$name" | gzip -9n >"$archive.tmp"
else
    find "$stage/$name" -exec touch -h -t "$(date -r "$epoch" +%Y%m%d%H%M.%S)" {} +
    tar -C "$stage" --uid 0 --gid 0 -cf - "$name" | gzip -9n >"$archive.tmp"
fi
mv "$archive.tmp" "$archive"

# sha256 FILE: FILE.sha256 in sha256sum's format (name relative to its directory).
sha256() {
    local dir base
    dir=$(dirname "$1") base=$(basename "$1")
    if command -v sha256sum >/dev/null; then
        (cd "$dir" && sha256sum "$base" >"$base.sha256")
    else
        (cd "$dir" && shasum -a 256 "$base" >"$base.sha256")
    fi
}
sha256 "$archive"

if [ "$os" = macos ]; then
    # SwiftPM's binary target on Apple platforms: an XCFramework of the
    # static library for both architectures, with the header and a module
    # map naming the module CDshSession (as Package.swift's target).
    echo "==> dist: CDshSession.xcframework (aarch64 + x86_64)"
    for t in aarch64-apple-darwin x86_64-apple-darwin; do
        rustup target list --installed 2>/dev/null | grep -qx "$t" || rustup target add "$t"
        CARGO_TARGET_DIR=$cargo_target cargo build --release --locked -p dsh-session-ffi --target "$t"
    done
    xc=$build/xcframework
    rm -rf "$xc"
    mkdir -p "$xc/headers"
    lipo -create "$cargo_target"/aarch64-apple-darwin/release/libdsh_session.a \
        "$cargo_target"/x86_64-apple-darwin/release/libdsh_session.a -output "$xc/libdsh_session.a"
    cp include/dsh_session.h "$xc/headers/"
    printf 'module CDshSession {\n    header "dsh_session.h"\n    export *\n}\n' >"$xc/headers/module.modulemap"
    xcodebuild -create-xcframework -library "$xc/libdsh_session.a" -headers "$xc/headers" \
        -output "$xc/CDshSession.xcframework" >/dev/null
    (cd "$xc" && rm -f "$dist/CDshSession.xcframework.zip" &&
        ditto -c -k --sequesterRsrc --keepParent CDshSession.xcframework "$dist/CDshSession.xcframework.zip")
    sha256 "$dist/CDshSession.xcframework.zip"
fi

echo "==> dist: $(cd "$dist" && ls -1 ./*.sha256 | sed 's|^\./||' | tr '\n' ' ')"
ls -l "$archive" | awk '{ printf "%s: %.1f MiB\n", $NF, $5 / 1048576 }'
cat "$archive.sha256"
