#!/usr/bin/env bash
# Build and test the Swift binding (bindings/swift) on Linux.
#
# Debian 12 has no Swift toolchain, so `swift build` and `swift test` run in a
# Debian trixie chroot that holds trixie's `swiftlang` package (and pkg-config).
# The chroot is built once per machine with debootstrap, from the Debian
# mirror the host's apt already uses, and cached in /var/cache/dsh-swift-trixie
# (2.5 GB, about 3 min to build; override with DSH_SWIFT_CHROOT). A marker
# file written after a successful `swift --version` inside it says the cache
# is usable; a cache without the marker, or in which `swift --version` fails,
# is rebuilt.
#
# The library: `cargo build --release` in this repository, with a temporary
# dsh-session.pc pointing at target/release and include/. With DSH_PREFIX set
# to an install prefix (lib/, include/, lib/pkgconfig/dsh-session.pc) that
# prefix is tested instead and nothing is built.
#
# The repository, the library and the .pc directory are bind-mounted into the
# chroot at their own paths, inside a private mount namespace (unshare), so
# the mounts vanish with the run even if it is killed; a trap unmounts them
# explicitly on every exit as well.
#
# Needs root (debootstrap, chroot, mounts). Usage: scripts/test-swift.sh
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
PKG=$REPO

ROOT=${DSH_SWIFT_CHROOT:-/var/cache/dsh-swift-trixie}
SUITE=trixie
# Bump when the chroot recipe below changes: a cache with another recipe is rebuilt.
RECIPE="dsh-swift-chroot v1: debootstrap minbase $SUITE + swiftlang pkg-config"
MARKER=$ROOT/.dsh-swift-ready
JOBS=${DSH_SWIFT_JOBS:-2}

t_start=$SECONDS
stage() { printf '==> %s\n' "$*"; }
die() { printf 'test-swift: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "needs root (debootstrap, chroot and bind mounts); run it with sudo"
case $ROOT in /*) ;; *) die "DSH_SWIFT_CHROOT must be an absolute path" ;; esac
[ "$ROOT" != / ] || die "DSH_SWIFT_CHROOT must not be /"

# --- cleanup ------------------------------------------------------------------
STAGE_DIR=
# Every mount is made in a private namespace and cannot outlive the run; this
# only reports (and lazily unmounts) anything that would still show under the
# chroot in the host's namespace, e.g. from a tool run by hand.
mounts_under() {
    awk -v r="$1" '$5 == r || index($5, r "/") == 1 { print $5 }' /proc/self/mountinfo | sort -r
}
cleanup() {
    local rc=$? m
    for m in $(mounts_under "$ROOT") $(mounts_under "$ROOT.tmp"); do
        echo "test-swift: unmounting leftover $m" >&2
        umount -l "$m" || true
    done
    [ -z "$STAGE_DIR" ] || rm -rf "$STAGE_DIR"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Remove a chroot directory, refusing while anything is mounted below it (a
# bind mount of the repository would otherwise be deleted with it).
remove_root() {
    local dir=$1
    [ -e "$dir" ] || return 0
    [ -z "$(mounts_under "$dir")" ] || die "refusing to delete $dir: something is mounted below it"
    rm -rf "$dir"
}

# --- host tools -----------------------------------------------------------------
missing=()
command -v debootstrap >/dev/null || missing+=(debootstrap)
command -v readelf >/dev/null || missing+=(binutils)
command -v unshare >/dev/null || missing+=(util-linux)
if ((${#missing[@]})); then
    stage "installing ${missing[*]} (apt-get)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# --- the library ----------------------------------------------------------------
# Per-run scratch on the host (the temporary .pc, the swift test log), bound into the chroot too.
STAGE_DIR=$(mktemp -d /tmp/dsh-swift.XXXXXX)
if [ -n "${DSH_PREFIX:-}" ]; then
    PREFIX=$(realpath "$DSH_PREFIX")
    stage "library: install prefix $PREFIX (DSH_PREFIX)"
    PCDIR=$PREFIX/lib/pkgconfig
    [ -f "$PCDIR/dsh-session.pc" ] || die "$PCDIR/dsh-session.pc not found (DSH_PREFIX must be an install prefix)"
    LIBDIR=$(PKG_CONFIG_PATH=$PCDIR pkg-config --variable=libdir dsh-session 2>/dev/null || echo "$PREFIX/lib")
    LIBDIR=$(realpath "$LIBDIR")
    INCDIR=$(realpath "$(PKG_CONFIG_PATH=$PCDIR pkg-config --variable=includedir dsh-session 2>/dev/null || echo "$PREFIX/include")")
    MOUNTS=("$REPO" "$STAGE_DIR" "$PREFIX" "$LIBDIR" "$INCDIR")
else
    command -v cargo >/dev/null || die "Rust (cargo) is required to build the library (or set DSH_PREFIX)"
    stage "library: cargo build --release"
    cargo build --release
    TARGET_DIR=$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
    LIBDIR=$(realpath "${TARGET_DIR:-$REPO/target}/release")
    INCDIR=$REPO/include
    PCDIR=$STAGE_DIR/pkgconfig
    mkdir -p "$PCDIR"
    version=$(sed -n 's/^#define DSH_VERSION_STRING "\(.*\)"/\1/p' "$INCDIR/dsh_session.h")
    # Temporary until the CMake install provides lib/pkgconfig/dsh-session.pc.
    cat >"$PCDIR/dsh-session.pc" <<EOF
libdir=$LIBDIR
includedir=$INCDIR

Name: dsh-session
Description: dsh-session C ABI (temporary .pc written by scripts/test-swift.sh)
Version: ${version:-0}
Libs: -L\${libdir} -ldsh_session
Libs.private: -lpthread -ldl -lm
Cflags: -I\${includedir}
EOF
    MOUNTS=("$REPO" "$STAGE_DIR" "$LIBDIR")
fi
SO=$LIBDIR/libdsh_session.so
[ -f "$SO" ] || die "$SO not found"
[ -f "$INCDIR/dsh_session.h" ] || die "$INCDIR/dsh_session.h not found"

# The loader looks for the SONAME (libdsh_session.so.<ABI>); cargo does not create it.
SONAME=$(readelf -d "$SO" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ -n "$SONAME" ] || die "$SO has no SONAME"
if [ ! -e "$LIBDIR/$SONAME" ]; then
    echo "creating the SONAME link $LIBDIR/$SONAME -> libdsh_session.so"
    ln -sf libdsh_session.so "$LIBDIR/$SONAME"
fi
# The newest glibc symbol version the library needs (checked against the chroot's glibc below).
NEED_GLIBC=$(readelf -V --wide "$SO" | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -1)
HOST_GLIBC=$(ldd --version | sed -n '1s/.* \([0-9][0-9.]*\)$/\1/p')
echo "library: $SO (SONAME $SONAME, needs glibc >= $NEED_GLIBC; host glibc $HOST_GLIBC)"

# --- the chroot (cached) ------------------------------------------------------------
mirror() {
    local m=${DSH_DEBIAN_MIRROR:-}
    [ -n "$m" ] || m=$(awk '/^URIs:/ { print $2; exit }' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
    [ -n "$m" ] || m=$(awk '$1 == "deb" && $2 !~ /^\[/ && $2 ~ /debian\/?$/ { print $2; exit }' /etc/apt/sources.list 2>/dev/null || true)
    echo "${m:-http://deb.debian.org/debian}"
}

# Run a shell snippet as root inside chroot $1 (with /proc, a fresh /tmp and a devpts
# mounted) in a private mount namespace.
in_chroot() {
    local root=$1 script=$2
    unshare --mount --propagation private -- bash -c '
        set -e
        root=$1
        trap "umount \"$root/dev/pts\" \"$root/tmp\" \"$root/proc\" 2>/dev/null || true" EXIT
        mount -t proc proc "$root/proc"
        mount -t tmpfs -o mode=1777 tmpfs "$root/tmp"
        # A private devpts instance, so apt can open its log pty.
        mount -t devpts -o newinstance,ptmxmode=0666 devpts "$root/dev/pts" 2>/dev/null || true
        chroot "$root" /usr/bin/env -i HOME=/root PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 \
            DEBIAN_FRONTEND=noninteractive /bin/bash -c "$2"
    ' in_chroot "$root" "$script"
}

chroot_ok() {
    # (The chroot's /usr/bin/swift is an absolute symlink: test it from inside.)
    [ -f "$MARKER" ] && [ "$(head -n 1 "$MARKER")" = "$RECIPE" ] &&
        in_chroot "$ROOT" 'swift --version && command -v pkg-config' >/dev/null 2>&1
}

build_chroot() {
    local tmp=$ROOT.tmp m t0=$SECONDS
    m=$(mirror)
    stage "building the Swift chroot $ROOT (debootstrap $SUITE from $m, then swiftlang; about 3 min)"
    remove_root "$tmp"
    mkdir -p "$(dirname "$ROOT")"
    # In its own mount namespace, so a killed debootstrap leaves no /proc mount behind.
    if ! unshare --mount --propagation private -- \
        debootstrap --variant=minbase "$SUITE" "$tmp" "$m" >"$(dirname "$ROOT")/dsh-swift-debootstrap.log" 2>&1; then
        tail -n 30 "$(dirname "$ROOT")/dsh-swift-debootstrap.log" >&2 || true
        die "debootstrap failed (log: $(dirname "$ROOT")/dsh-swift-debootstrap.log)"
    fi
    echo "debootstrap: $((SECONDS - t0)) s"
    cp /etc/resolv.conf "$tmp/etc/resolv.conf"
    printf 'Acquire::Retries "3";\nAcquire::Check-Valid-Until "false";\n' >"$tmp/etc/apt/apt.conf.d/99dsh-swift"
    in_chroot "$tmp" '
        apt-get update -q >/dev/null
        apt-get install -y -q swiftlang pkg-config >/dev/null
        apt-get clean
        rm -rf /var/lib/apt/lists/*
        swift --version' >"$tmp/.swift-version"
    { echo "$RECIPE"; cat "$tmp/.swift-version"; } >"$tmp/.dsh-swift-ready"
    rm -f "$tmp/.swift-version"
    remove_root "$ROOT"
    mv "$tmp" "$ROOT"
    echo "chroot ready in $((SECONDS - t0)) s: $(du -sh "$ROOT" 2>/dev/null | cut -f1)"
}

# One run at a time per chroot (they share its mount points and SwiftPM caches).
mkdir -p "$(dirname "$ROOT")"
exec 9>"$ROOT.lock"
flock 9
t_chroot=$SECONDS
if chroot_ok; then
    stage "Swift chroot: cached at $ROOT"
else
    [ ! -e "$ROOT" ] || echo "the cached chroot at $ROOT is missing its marker or broken: rebuilding"
    build_chroot
    chroot_ok || die "the new chroot fails 'swift --version'"
fi
sed -n 2p "$MARKER"
t_chroot=$((SECONDS - t_chroot))

# --- swift build + swift test in the chroot -------------------------------------------
# Mount points are created inside the chroot at the host paths; refuse to hide
# anything of the chroot's own (e.g. a prefix under /usr).
declare -a BINDS=()
for d in "${MOUNTS[@]}"; do
    skip=
    for b in "${BINDS[@]}"; do case $d/ in "$b"/*) skip=1 ;; esac; done
    [ -n "$skip" ] && continue
    if [ -d "$ROOT$d" ] && [ -n "$(ls -A "$ROOT$d")" ]; then
        die "cannot bind $d into the chroot: $ROOT$d exists and is not empty"
    fi
    BINDS+=("$d")
done

# Keep .build when it was made by the same toolchain; otherwise start clean.
SCRATCH=$PKG/.build
TOOLCHAIN=$(sed -n 2p "$MARKER")
if [ -d "$SCRATCH" ] && [ "$(cat "$SCRATCH/.dsh-toolchain" 2>/dev/null)" != "$TOOLCHAIN" ]; then
    rm -rf "$SCRATCH"
fi
mkdir -p "$SCRATCH"
echo "$TOOLCHAIN" >"$SCRATCH/.dsh-toolchain"

# The out-of-tree consumer: tests/packaging/consumer-swift with this checkout
# as its dependency and the README's Swift block as its program.
CONSUMER=$STAGE_DIR/consumer-swift
mkdir -p "$CONSUMER/Sources/consumer"
sed -e "s#@REPO@#$REPO#" -e "s#@REPO_ID@#$(basename "$REPO" | tr '[:upper:]' '[:lower:]')#" \
    tests/packaging/consumer-swift/Package.swift.in >"$CONSUMER/Package.swift"
awk '/^```swift$/ { inside = 1; next } inside && /^```$/ { exit } inside { print }' README.md \
    >"$CONSUMER/Sources/consumer/main.swift"
[ -s "$CONSUMER/Sources/consumer/main.swift" ] || die "no Swift block in README.md"

stage "swift build + swift test in the chroot ($PKG)"
t_swift=$SECONDS
# shellcheck disable=SC2016  # expanded inside the namespace / chroot
unshare --mount --propagation private -- bash -c '
    set -euo pipefail
    root=$1 pkg=$2 pcdir=$3 need_glibc=$4 jobs=$5 log=$6; shift 6
    mounted=() created=()
    undo() {
        local i
        for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount "${mounted[i]}" 2>/dev/null || umount -l "${mounted[i]}" || true; done
        for ((i = ${#created[@]} - 1; i >= 0; i--)); do rmdir "${created[i]}" 2>/dev/null || true; done
    }
    trap undo EXIT
    mount -t proc proc "$root/proc"; mounted+=("$root/proc")
    # A fresh /tmp per run: SwiftPM and the tests leave temporary directories there.
    mount -t tmpfs -o mode=1777 tmpfs "$root/tmp"; mounted+=("$root/tmp")
    for d in "$@"; do
        if [ ! -d "$root$d" ]; then
            p=$root$d
            while [ ! -d "$p" ]; do created=("$p" "${created[@]}"); p=$(dirname "$p"); done
            mkdir -p "$root$d"
        fi
        mount --bind "$d" "$root$d"; mounted+=("$root$d")
    done
    chroot "$root" /usr/bin/env -i HOME=/root PATH=/usr/bin:/bin LANG=C.UTF-8 \
        PKG_CONFIG_PATH="$pcdir" PKG="$pkg" NEED_GLIBC="$need_glibc" JOBS="$jobs" LOG="$log" \
        CONSUMER="$(dirname "$log")/consumer-swift" /bin/bash -c '"'"'
        set -euo pipefail
        libdir=$(pkg-config --variable=libdir dsh-session)
        echo "pkg-config dsh-session: $(pkg-config --cflags --libs dsh-session)"
        # The host-built library must load with the chroot glibc.
        chroot_glibc=$(ldd --version | sed -n "1s/.* \([0-9][0-9.]*\)\$/\1/p")
        if [ "$(printf "%s\n%s\n" "$NEED_GLIBC" "$chroot_glibc" | sort -V | head -n 1)" != "$NEED_GLIBC" ]; then
            echo "the library needs glibc $NEED_GLIBC, the chroot has $chroot_glibc" >&2; exit 1
        fi
        if ldd "$libdir/libdsh_session.so" | grep "not found"; then
            echo "the library does not resolve in the chroot" >&2; exit 1
        fi
        echo "glibc: the library needs >= $NEED_GLIBC, the chroot has $chroot_glibc; ldd resolves all dependencies"
        cd "$PKG"
        flags=(-j "$JOBS" -Xlinker -rpath -Xlinker "$libdir")
        swift build "${flags[@]}"
        # XCTest only: without this flag swift test also runs swift-testing,
        # whose "0 tests passed" would be the last line.
        swift test "${flags[@]}" --disable-swift-testing 2>&1 | tee "$LOG"
        # A package outside the repository that depends on it by path, whose
        # program is the Swift block of README.md.
        cd "$CONSUMER"
        swift build "${flags[@]}"
        echo "consumer (the README block):"
        swift run "${flags[@]}" consumer | tee "$LOG.consumer"
        grep -qxF "[\"hi\"]" "$LOG.consumer" || { echo "the README block printed something else" >&2; exit 1; }
        # The manifest as a release commit has it (releasedXCFramework filled
        # in): off Apple platforms CDshSession stays the pkg-config module.
        rel=$(dirname "$LOG")/release-manifest
        mkdir -p "$rel"
        ln -sfn "$PKG/bindings" "$rel/bindings"
        sed "s#^let releasedXCFramework: (url: String, checksum: String)? = nil\$#let releasedXCFramework: (url: String, checksum: String)? = (url: \"https://example.invalid/CDshSession.xcframework.zip\", checksum: \"$(printf %064d 0)\")#" \
            "$PKG/Package.swift" >"$rel/Package.swift"
        grep -q example.invalid "$rel/Package.swift" || { echo "Package.swift has no releasedXCFramework line to fill in" >&2; exit 1; }
        (cd "$rel" && swift package dump-package) | tr -d " \n" >"$rel/dump.json"
        if grep -q "\"type\":\"system\"" "$rel/dump.json" && grep -q "\"pkgConfig\":\"dsh-session\"" "$rel/dump.json" &&
            ! grep -q "\"type\":\"binary\"" "$rel/dump.json"; then
            echo "release manifest: on Linux CDshSession is the pkg-config module (the XCFramework is for Apple platforms)"
        else
            echo "release manifest: CDshSession is not the pkg-config module on Linux" >&2; exit 1
        fi
        # Whether this toolchain takes a static library as a binary target
        # (an artifact bundle, SE-0482, Swift 6.2): what would let Linux use
        # a binary target too. Reported, not required.
        probe=$(dirname "$LOG")/artifact-bundle-probe
        triple=$(uname -m)-unknown-linux-gnu
        b=$probe/CDshSession.artifactbundle
        mkdir -p "$b/include" "$b/$triple" "$probe/Sources/probe"
        cp "$libdir/libdsh_session.a" "$b/$triple/"
        cp "$(pkg-config --variable=includedir dsh-session)/dsh_session.h" "$b/include/"
        printf "module CDshSession {\n    header \"dsh_session.h\"\n    export *\n}\n" >"$b/include/module.modulemap"
        printf "%s\n" "{\"schemaVersion\": \"1.0\", \"artifacts\": {\"CDshSession\": {\"version\": \"0\", \"type\": \"staticLibrary\"," \
            "  \"variants\": [{\"path\": \"$triple/libdsh_session.a\", \"supportedTriples\": [\"$triple\"]," \
            "  \"staticLibraryMetadata\": {\"headerPaths\": [\"include\"], \"moduleMapPath\": \"include/module.modulemap\"}}]}}}" \
            >"$b/info.json"
        printf "%s\n" "// swift-tools-version:5.9" "import PackageDescription" \
            "let package = Package(name: \"probe\", targets: [" \
            "    .binaryTarget(name: \"CDshSession\", path: \"CDshSession.artifactbundle\")," \
            "    .executableTarget(name: \"probe\", dependencies: [\"CDshSession\"])," "])" >"$probe/Package.swift"
        printf "import CDshSession\nprint(String(cString: dsh_version()))\n" >"$probe/Sources/probe/main.swift"
        if (cd "$probe" && swift build -j "$JOBS" && .build/debug/probe) >"$probe/log" 2>&1; then
            echo "artifact bundle: this toolchain links a static-library binary target ($(tail -n 1 "$probe/log")): Linux could use one"
        else
            echo "artifact bundle: $(swift --version 2>/dev/null | head -n 1) refuses a static-library binary target (SE-0482 needs Swift 6.2): $(grep -m 1 "error:" "$probe/log")"
        fi
    '"'"'
' test-swift "$ROOT" "$PKG" "$PCDIR" "$NEED_GLIBC" "$JOBS" "$STAGE_DIR/swift-test.log" "${BINDS[@]}" || rc=$?
t_swift=$((SECONDS - t_swift))

echo "test-swift: chroot $t_chroot s, swift build + test $t_swift s, total $((SECONDS - t_start)) s"
# XCTest's last summary ("Executed N tests, with F failures") as a plain closing line.
summary=$(grep -o 'Executed [0-9]* tests*, with [0-9]* failures*' "$STAGE_DIR/swift-test.log" 2>/dev/null | tail -n 1 || true)
if [ -n "$summary" ]; then
    read -r total failed < <(echo "$summary" | sed 's/Executed \([0-9]*\) tests*, with \([0-9]*\).*/\1 \2/')
    echo "swift: $((total - failed)) passed, $failed failed"
else
    echo "test-swift: swift build or swift test failed before running tests" >&2
fi
exit "${rc:-0}"
