#!/usr/bin/env bash
# The release artifacts, end to end, as a user gets them (docs/packaging.md,
# "Release archives" and "The Go module"):
#
#   1. scripts/dist.sh: the archive of this platform and its .sha256
#      (reuses the release build);
#   2. its contents: exactly the expected files, the checksum, the headers
#      identical to include/, the libraries (tests/packaging/check-artifacts.sh),
#      the CLI's version, no path of the build machine in any text file;
#   3. the archive unpacked in a temporary directory, as if downloaded, and
#      consumers outside the repository built from it on a PATH that holds a
#      C compiler and basic tools but no cargo, cmake or pkg-config: a C
#      program against the shared and the static library, a C++ program on
#      dsh_session.hpp; each run;
#   4. the CMake package (find_package) and the pkg-config files of the
#      unpacked archive, with the tools on PATH;
#   5. scripts/go-module.sh: a module proxy on the file system with the
#      archive's static library in the module; a Go module outside the
#      repository (tests/packaging/consumer-go's program) runs go get and
#      go build through GOPROXY=file://… with an empty module cache, on the
#      PATH of 3 plus go, and its program runs with no libdsh_session.so
#      anywhere it could load one from.
#
# Prints one line per check and ends with "N passed, M failed".
# DSH_DIST_KEEP=1 keeps the temporary directory.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
. scripts/lib.sh
ensure_commands cc:build-essential c++:build-essential readelf:binutils cmake:cmake pkg-config:pkg-config \
    python3:python3 go:golang-go

work=$(mktemp -d "${TMPDIR:-/tmp}/dsh-dist.XXXXXX")
passed=0 failed=0
ok() { passed=$((passed + 1)); echo "ok   $1"; }
fail() { failed=$((failed + 1)); echo "FAIL $1${2:+: $2}"; }
expect() { local n=$1; shift; if "$@"; then ok "$n"; else fail "$n"; fi; }
step() { # step NAME COMMAND...: quiet, with the log's end on failure
    local name=$1 log=$work/log.$((passed + failed))
    shift
    if "$@" >"$log" 2>&1; then ok "$name"; else fail "$name" "exit $?"; tail -n 30 "$log" | sed 's/^/#  /'; return 1; fi
}
finish() {
    if [ "$failed" = 0 ] && [ "${DSH_DIST_KEEP:-0}" != 1 ]; then rm -rf "$work"; else echo "# kept $work"; fi
    echo "dist: $passed passed, $failed failed"
    exit $((failed > 0))
}

version=$(sed -n 's/^#define DSH_VERSION_STRING "\(.*\)"$/\1/p' include/dsh_session.h)
soname=$(sed -n 's/^#define DSH_SONAME "\(.*\)"$/\1/p' include/dsh_session.h)
case "$(uname -m)" in x86_64) arch=x86_64 goarch=amd64 ;; aarch64) arch=aarch64 goarch=arm64 ;; *) arch=$(uname -m) goarch= ;; esac
name=dsh-session-$version-linux-$arch
dist=${DSH_DIST_DIR:-$root/target/dist}
archive=$dist/$name.tar.gz

# --- 1. the archive ---------------------------------------------------------------
step "scripts/dist.sh writes $name.tar.gz" ./scripts/dist.sh || finish
expect "$name.tar.gz.sha256 matches" bash -c "cd '$dist' && sha256sum -c --quiet '$name.tar.gz.sha256'"
echo "# $(ls -l "$archive" | awk '{ printf "%s: %.1f MiB", $NF, $5 / 1048576 }')"

# --- 2. its contents ----------------------------------------------------------------
tar -tzf "$archive" | sed "s|^$name/||; /^$/d; /\/$/d" | sort >"$work/contents"
sort >"$work/expected" <<EOF
bin/dsh-session
include/dsh_session.h
include/dsh_session.hpp
lib/cmake/dsh_session/dsh_sessionConfig.cmake
lib/cmake/dsh_session/dsh_sessionConfigVersion.cmake
lib/libdsh_session.a
lib/libdsh_session.so
lib/$soname
lib/libdsh_session.so.$version
lib/pkgconfig/dsh-session-static.pc
lib/pkgconfig/dsh-session.pc
share/doc/dsh_session/LICENSE-APACHE
share/doc/dsh_session/LICENSE-MIT
EOF
if diff -u "$work/expected" "$work/contents" >"$work/contents.diff"; then
    ok "the archive holds exactly: $(tr '\n' ' ' <"$work/expected")"
else
    fail "the archive's files" "$(grep '^[-+][^-+]' "$work/contents.diff" | tr '\n' ' ')"
fi
expect "every file is under $name/" bash -c "! tar -tzf '$archive' | grep -v '^$name/'"
expect "owner 0 and one mtime for every entry" bash -c \
    "[ \"\$(tar -tvzf '$archive' | awk '{ print \$2, \$4, \$5 }' | sort -u | wc -l)\" = 1 ] &&
     tar -tvzf '$archive' | awk '{ print \$2 }' | sort -u | grep -qx 0/0"
unpacked=$work/download
mkdir -p "$unpacked"
tar -xzf "$archive" -C "$unpacked"
p=$unpacked/$name
expect "include/dsh_session.h is the repository's" cmp -s include/dsh_session.h "$p/include/dsh_session.h"
expect "include/dsh_session.hpp is the repository's" cmp -s include/dsh_session.hpp "$p/include/dsh_session.hpp"
expect "the licences are the repository's" bash -c \
    "cmp -s LICENSE-MIT '$p/share/doc/dsh_session/LICENSE-MIT' && cmp -s LICENSE-APACHE '$p/share/doc/dsh_session/LICENSE-APACHE'"
expect "bin/dsh-session --version says $version" bash -c "'$p/bin/dsh-session' --version | grep -qx 'dsh-session $version'"
bash tests/packaging/check-artifacts.sh "$p/lib" "$p/include/dsh_session.h" >"$work/artifacts.log" 2>&1
while IFS= read -r line; do
    case $line in "ok "*) ok "lib: ${line#ok   }" ;; "FAIL "*) fail "lib: ${line#FAIL }" ;; esac
done <"$work/artifacts.log"
leaks=$(grep -rIl -e "$root" -e "$(dirname "$root")/" "$p" 2>/dev/null)
expect "no text file names a path of the build machine" test -z "$leaks"

# --- 3. consumers on a PATH without cargo, cmake or pkg-config ---------------------
# A directory of links to what a C and C++ (and Go) build needs and nothing more.
sb=$work/bin
mkdir -p "$sb"
for t in sh cc c++ gcc g++ as ld ld.bfd ar readelf tar gzip cat; do
    src=$(command -v "$t") && ln -s "$src" "$sb/$t"
done
home=$work/home
mkdir -p "$home"
sandboxed() { env -i HOME="$home" PATH="$sb" LANG=C TMPDIR="$work" "$@"; }
for t in cargo rustc cmake pkg-config; do
    expect "no $t on the consumers' PATH" bash -c "! env -i PATH='$sb' sh -c 'command -v $t' >/dev/null"
done
main=tests/packaging/consumer-cmake/main.c
cp "$main" tests/packaging/consumer-cmake/main.cpp "$work/"
step "C consumer, shared: cc main.c -I<archive>/include -L<archive>/lib -ldsh_session -Wl,-rpath" \
    sandboxed cc -std=c99 -Wall -Wextra -Werror "$work/main.c" -I"$p/include" -L"$p/lib" -ldsh_session \
    -Wl,-rpath,"$p/lib" -o "$work/c_shared" &&
    step "C consumer, shared: runs" sandboxed "$work/c_shared"
expect "C consumer, shared: NEEDs $soname" bash -c "readelf -d '$work/c_shared' | grep -q 'NEEDED.*\\[$soname\\]'"
step "C consumer, static: cc main.c <archive>/lib/libdsh_session.a -lpthread -ldl -lm" \
    sandboxed cc -std=c99 -Wall -Wextra -Werror "$work/main.c" -I"$p/include" "$p/lib/libdsh_session.a" \
    -lpthread -ldl -lm -o "$work/c_static" &&
    step "C consumer, static: runs" sandboxed "$work/c_static"
expect "C consumer, static: needs no libdsh_session.so" bash -c "! readelf -d '$work/c_static' | grep -q 'NEEDED.*libdsh_session'"
step "C++ consumer: c++ -std=c++17 main.cpp (dsh_session.hpp) -ldsh_session" \
    sandboxed c++ -std=c++17 -Wall -Wextra -Werror "$work/main.cpp" -I"$p/include" -L"$p/lib" -ldsh_session \
    -Wl,-rpath,"$p/lib" -o "$work/cxx" &&
    step "C++ consumer: runs" sandboxed "$work/cxx"
step "C++ consumer, static: c++ main.cpp <archive>/lib/libdsh_session.a" \
    sandboxed c++ -std=c++17 -Wall -Wextra -Werror "$work/main.cpp" -I"$p/include" "$p/lib/libdsh_session.a" \
    -lpthread -ldl -lm -o "$work/cxx_static" &&
    step "C++ consumer, static: runs" sandboxed "$work/cxx_static"

# --- 4. the archive's CMake package and pkg-config files (tools on PATH) -------------
step "CMake: find_package(dsh_session ${version%.*} CONFIG REQUIRED) in the unpacked archive, build" \
    bash -c "cmake -S tests/packaging/consumer-cmake -B '$work/consumer-cmake' -DCMAKE_PREFIX_PATH='$p' \
             -DDSH_SESSION_VERSION=${version%.*} && cmake --build '$work/consumer-cmake'" &&
    step "CMake: consumer_shared, consumer_static and consumer_cxx run" \
        bash -c "'$work/consumer-cmake/consumer_shared' && '$work/consumer-cmake/consumer_static' && '$work/consumer-cmake/consumer_cxx'"
step "pkg-config: dsh-session and dsh-session-static of the unpacked archive" bash -c \
    "export PKG_CONFIG_PATH='$p/lib/pkgconfig'
     [ \"\$(pkg-config --modversion dsh-session)\" = '$version' ] &&
     cc '$main' \$(pkg-config --cflags --libs dsh-session) -Wl,-rpath,\$(pkg-config --variable=libdir dsh-session) -o '$work/pc_shared' &&
     cc '$main' \$(pkg-config --static --cflags --libs dsh-session-static) -o '$work/pc_static' &&
     '$work/pc_shared' && '$work/pc_static'"

# --- 5. Go through a module proxy on the file system -----------------------------------
if [ -z "$goarch" ]; then
    echo "# Go SKIPPED: no prebuilt Go platform for $(uname -m)"
    finish
fi
proxy=$work/go-proxy
step "scripts/go-module.sh: the module v$version with lib/linux_$goarch/libdsh_session.a" \
    env DSH_GO_PROXY_DIR="$proxy" ./scripts/go-module.sh
modzip=$proxy/github.com/dsh-session/dsh-session/bindings/go/@v/v$version.zip
expect "the module zip holds lib/linux_$goarch/libdsh_session.a, lib/include/dsh_session.h and the licences" bash -c \
    "python3 -c 'import sys, zipfile; n = set(zipfile.ZipFile(sys.argv[1]).namelist()); p = sys.argv[2] + \"/\";
sys.exit(0 if {p + \"lib/linux_$goarch/libdsh_session.a\", p + \"lib/include/dsh_session.h\", p + \"lib/LICENSE-MIT\",
               p + \"go.mod\", p + \"link_linux_$goarch.go\"} <= n else 1)' '$modzip' \
     'github.com/dsh-session/dsh-session/bindings/go@v$version'"
echo "# module zip: $(du -h "$modzip" | cut -f1)"
ln -s "$(command -v go)" "$sb/go"
gomod=$work/consumer-go
mkdir -p "$gomod"
cp tests/packaging/consumer-go/main.go "$gomod/"
goenv=(GOPROXY="file://$proxy" GOFLAGS="-mod=mod -modcacherw" GONOSUMDB=github.com/dsh-session GOTOOLCHAIN=local CGO_ENABLED=1
    GOPATH="$work/gopath" GOMODCACHE="$work/gopath/pkg/mod" GOCACHE="$work/gocache")
gosb() { env -C "$gomod" -i HOME="$home" PATH="$sb" LANG=C TMPDIR="$work" "${goenv[@]}" "$@"; }
step "Go: go mod init + go get github.com/dsh-session/dsh-session/bindings/go@v$version (GOPROXY=file://…, empty module cache)" \
    gosb sh -c "go mod init example.com/consumer && go get github.com/dsh-session/dsh-session/bindings/go@v$version"
expect "Go: the module came through the proxy into the empty module cache" \
    test -f "$work/gopath/pkg/mod/github.com/dsh-session/dsh-session/bindings/go@v$version/lib/linux_$goarch/libdsh_session.a"
step "Go: go build (no cargo, cmake or pkg-config on PATH)" gosb go build -o "$work/consumer-go-bin" . &&
    step "Go: the program runs (SQLite store, observer, derive) with no LD_LIBRARY_PATH" \
        env -i HOME="$home" PATH="$sb" "$work/consumer-go-bin" "$work"
expect "Go: the program needs no libdsh_session.so (the library is linked in)" \
    bash -c "! readelf -d '$work/consumer-go-bin' | grep -q 'NEEDED.*libdsh_session'"
expect "Go: go.sum records the module's hash" grep -q "github.com/dsh-session/dsh-session/bindings/go v$version h1:" "$gomod/go.sum"
finish
