#!/usr/bin/env bash
# The C packaging of dsh-session, end to end (docs/packaging.md):
#
#   1. cmake configure + build with DSH_CARGO_BUILD=ON (Ninja when present): the
#      one cargo build of this script, in the checkout's target/ (reused);
#   2. ctest: the C suites (sample, round trip, ABI misuse, own-SQLite host,
#      shared and static), the C++ host (shared and static), header hygiene
#      (dsh_session.h as C99, C11, C++17; dsh_session.hpp alone, as C++17,
#      C++20 and without exceptions), the staged artifacts, and the valgrind
#      runs (label valgrind);
#   3. cmake --install to a temporary prefix; the installed artifacts: SONAME
#      links, SONAME (the header's DSH_SONAME), .so exports == the
#      header's functions and nothing else, archive globals only dsh_*;
#   4. a separate CMake project (tests/packaging/consumer-cmake) with
#      find_package(dsh_session CONFIG REQUIRED): dsh::session and
#      dsh::session_static, and a C++ program on the installed
#      dsh_session.hpp, built and run; the version file accepts and refuses;
#   5. the prefix is moved and the consumer built and run again (relocatable);
#   6. pkg-config consumers (dsh-session, --static dsh-session-static), the C++
#      host on the installed dsh_session.hpp, the static host that defines
#      sqlite3_open itself, and the host that uses the system's SQLite and
#      zstd (shared, then static) next to the installed archive, against the
#      moved prefix; the last two also against cargo's unprocessed archive,
#      where they must fail.
#
# Prints one line per check and ends with the plain line "N passed, M failed";
# exits non-zero when anything failed. Installs missing Debian packages (as
# root, or through sudo). Environment:
#   DSH_PACKAGING_BUILD_DIR   build directory (default build/packaging; reused, cargo is incremental)
#   DSH_PACKAGING_CARGO_TARGET_DIR  cargo's target dir (default ./target, so a `cargo build
#                             --release` made before is reused)
#   DSH_PACKAGING_CLEAN=1     delete that build directory first
#   DSH_PACKAGING_KEEP=1      keep the temporary prefix and consumer builds
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
t0=$SECONDS
build=${DSH_PACKAGING_BUILD_DIR:-$root/build/packaging}
cargo_target=${DSH_PACKAGING_CARGO_TARGET_DIR:-$PWD/target}
work=$(mktemp -d "${TMPDIR:-/tmp}/dsh-packaging-XXXXXX")
logs=$work/logs
mkdir -p "$logs"
passed=0
failed=0

ok() { passed=$((passed + 1)); echo "ok   $1"; }
fail() { failed=$((failed + 1)); echo "FAIL $1${2:+: $2}"; }
finish() {
    echo "packaging: $((SECONDS - t0)) s"
    if [ "$failed" = 0 ] && [ "${DSH_PACKAGING_KEEP:-0}" != 1 ]; then
        rm -rf "$work"
    else
        echo "# logs and installs kept in $work"
    fi
    echo "$passed passed, $failed failed"
    exit $((failed > 0))
}
# step NAME COMMAND...: run quietly into a log; on failure show its end.
step() {
    local name=$1 log
    shift
    log=$logs/$(tr -c 'A-Za-z0-9_.-' '_' <<<"$name").log
    if "$@" >"$log" 2>&1; then
        ok "$name"
    else
        fail "$name" "exit $? (log: $log)"
        tail -n 40 "$log" | sed 's/^/#  /'
        return 1
    fi
}
# expect NAME CONDITION...: a check without a log.
expect() {
    local name=$1
    shift
    if "$@"; then ok "$name"; else fail "$name"; fi
}
# run_checks NAME COMMAND...: run a program that prints ok/FAIL lines and fold
# them into the totals; a failure without a FAIL line fails NAME.
run_checks() {
    local name=$1 log rc
    shift
    log=$logs/$(tr -c 'A-Za-z0-9_.-' '_' <<<"$name").log
    "$@" >"$log" 2>&1
    rc=$?
    count_checks "$name" "$log"
    if [ "$rc" != 0 ] && ! grep -q '^FAIL' "$log"; then
        fail "$name" "exit $rc (log: $log)"
        tail -n 20 "$log" | sed 's/^/#  /'
    fi
}
# count_checks NAME LOG: fold the ok/FAIL lines of a sub-check into the totals.
count_checks() {
    local line
    while IFS= read -r line; do
        case $line in
            "ok "*) ok "$1: $(sed 's/^ok  *//' <<<"$line")" ;;
            "FAIL "*) fail "$1: $(sed 's/^FAIL  *//' <<<"$line")" ;;
            "#"*) echo "$line" ;;
        esac
    done <"$2"
}

# --- 0. tools --------------------------------------------------------------------
need=()
command -v cmake >/dev/null || need+=(cmake)
command -v pkg-config >/dev/null || need+=(pkg-config)
command -v valgrind >/dev/null || need+=(valgrind)
command -v cc >/dev/null && command -v c++ >/dev/null || need+=(build-essential)
for t in readelf nm objcopy ld ar; do command -v $t >/dev/null || { need+=(binutils); break; }; done
# The system's SQLite and zstd, for the host that links them next to the archive.
for h in sqlite3:libsqlite3-dev zstd:libzstd-dev; do
    echo "#include <${h%%:*}.h>" | cc -E - >/dev/null 2>&1 || need+=("${h#*:}")
done
if ((${#need[@]})); then
    sudo_cmd=()
    [ "$(id -u)" = 0 ] || sudo_cmd=(sudo)
    if [ "$(id -u)" = 0 ] || command -v sudo >/dev/null; then
        echo "==> ${sudo_cmd[*]:+${sudo_cmd[*]} }apt-get install ${need[*]}"
        "${sudo_cmd[@]}" apt-get update -qq >"$logs/apt.log" 2>&1
        DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq "${need[@]}" >>"$logs/apt.log" 2>&1 ||
            { fail "apt-get install ${need[*]}" "see $logs/apt.log"; finish; }
    else
        fail "tools" "missing ${need[*]} (run as root or with sudo, or install them)"
        finish
    fi
fi
command -v cargo >/dev/null || [ -x "$HOME/.cargo/bin/cargo" ] || { fail "tools" "Rust (cargo) is required"; finish; }

abi=$(sed -n 's/^#define DSH_ABI_VERSION \([0-9][0-9]*\)$/\1/p' include/dsh_session.h)
soname=$(sed -n 's/^#define DSH_SONAME "\(.*\)"$/\1/p' include/dsh_session.h)
version=$(sed -n 's/^#define DSH_VERSION_STRING "\(.*\)"$/\1/p' include/dsh_session.h)
major=${version%%.*}
minor=${version#*.}
minor=${minor%%.*}
echo "# dsh-session $version, ABI $abi, SONAME $soname (from include/dsh_session.h); build dir $build; temp $work"

# --- 1. configure + build (the one cargo build) --------------------------------------
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
want_gen=${generator[1]:-Unix Makefiles}
if [ "${DSH_PACKAGING_CLEAN:-0}" = 1 ]; then
    rm -rf "$build"
elif [ -f "$build/CMakeCache.txt" ] && ! grep -qx "CMAKE_GENERATOR:INTERNAL=$want_gen" "$build/CMakeCache.txt"; then
    rm -rf "$build/CMakeCache.txt" "$build/CMakeFiles" # another generator: reconfigure, keep cargo's target dir
fi
t=$SECONDS
step "cmake configure (DSH_CARGO_BUILD=ON, $want_gen)" \
    cmake -S . -B "$build" "${generator[@]}" -DDSH_CARGO_BUILD=ON "-DDSH_CARGO_TARGET_DIR=$cargo_target" \
    -DCMAKE_INSTALL_LIBDIR=lib ||
    finish
step "cmake --build (cargo build --release --locked, staging, C tests)" cmake --build "$build" || finish
echo "# configure + build: $((SECONDS - t)) s"

# --- 2. ctest ----------------------------------------------------------------------------
t=$SECONDS
nvalgrind=$(ctest --test-dir "$build" -N -L valgrind 2>/dev/null | sed -n 's/^Total Tests: //p')
expect "valgrind tests registered (label valgrind: ${nvalgrind:-0})" test "${nvalgrind:-0}" -gt 0
nsystem=$(ctest --test-dir "$build" -N -R '_host_system_libs$' 2>/dev/null | sed -n 's/^Total Tests: //p')
expect "the hosts with the system's SQLite and zstd are registered (c_*_host_system_libs: ${nsystem:-0})" \
    test "${nsystem:-0}" = 2
ctest --test-dir "$build" --output-on-failure -j2 >"$logs/ctest.log" 2>&1
ctest_rc=$?
before=$failed
while IFS= read -r line; do
    if [[ $line =~ Test\ +#[0-9]+:\ ([^ ]+)\ \.+\ *(\*+)?(.*)\ +[0-9.]+\ sec ]]; then
        name=${BASH_REMATCH[1]}
        result=${BASH_REMATCH[3]}
        if [[ $result == Passed* ]]; then ok "ctest $name"; else fail "ctest $name" "$result"; fi
    fi
done <"$logs/ctest.log"
if [ "$ctest_rc" != 0 ]; then
    [ "$failed" = "$before" ] && fail "ctest" "exit $ctest_rc"
    grep -v '^ok ' "$logs/ctest.log" | tail -n 80 | sed 's/^/#  /'
fi
grep -E '% tests passed' "$logs/ctest.log" | sed 's/^/# ctest: /'
echo "# ctest: $((SECONDS - t)) s"

# --- 3. install + installed artifacts -------------------------------------------------------
prefix=$work/prefix
step "cmake --install to a temporary prefix" cmake --install "$build" --prefix "$prefix" || finish
lib=$prefix/lib
for f in include/dsh_session.h include/dsh_session.hpp lib/libdsh_session.a lib/pkgconfig/dsh-session.pc \
    lib/pkgconfig/dsh-session-static.pc lib/cmake/dsh_session/dsh_sessionConfig.cmake \
    lib/cmake/dsh_session/dsh_sessionConfigVersion.cmake; do
    expect "installed $f" test -f "$prefix/$f"
done
expect "installed header == include/dsh_session.h" cmp -s include/dsh_session.h "$prefix/include/dsh_session.h"
expect "installed C++ header == include/dsh_session.hpp" cmp -s include/dsh_session.hpp "$prefix/include/dsh_session.hpp"
expect "installed bin/dsh-session --version says $version" \
    bash -c "'$prefix/bin/dsh-session' --version | grep -qx 'dsh-session $version'"
bash tests/packaging/check-artifacts.sh "$lib" "$prefix/include/dsh_session.h" >"$logs/artifacts.log" 2>&1
count_checks "installed" "$logs/artifacts.log"
echo "# readelf -d $lib/libdsh_session.so: $(readelf -d "$lib/libdsh_session.so" | grep SONAME | sed 's/  */ /g')"
echo "# nm -D --defined-only: $(nm -D --defined-only "$lib/libdsh_session.so" | wc -l) symbols, $(nm -D --defined-only "$lib/libdsh_session.so" | grep -vc ' dsh_') not dsh_*"
echo "# nm -g --defined-only libdsh_session.a: $(nm -g --defined-only "$lib/libdsh_session.a" 2>/dev/null | grep -c ' dsh_') dsh_* globals, $(nm -g --defined-only "$lib/libdsh_session.a" 2>/dev/null | awk 'NF>=3' | grep -vc ' dsh_') others"

# --- 4. the CMake consumer --------------------------------------------------------------------
consumer() { # consumer TAG PREFIX: configure, build and run tests/packaging/consumer-cmake
    local tag=$1 pfx=$2 dir=$work/consumer-$1
    step "consumer-cmake ($tag): find_package(dsh_session $major.$minor CONFIG REQUIRED) + build" \
        bash -c "cmake -S tests/packaging/consumer-cmake -B '$dir' ${generator[*]} -DCMAKE_PREFIX_PATH='$pfx' \
                 -DDSH_SESSION_VERSION=$major.$minor && cmake --build '$dir'" || return 1
    step "consumer-cmake ($tag): run consumer_shared (dsh::session)" "$dir/consumer_shared"
    step "consumer-cmake ($tag): run consumer_static (dsh::session_static)" "$dir/consumer_static"
    step "consumer-cmake ($tag): run consumer_cxx (dsh_session.hpp, dsh::session)" "$dir/consumer_cxx"
    local needed
    needed=$(readelf -d "$dir/consumer_shared" | sed -n 's/.*(NEEDED).*\[\(libdsh_session[^]]*\)\]/\1/p')
    expect "consumer-cmake ($tag): consumer_shared NEEDs $needed (the SONAME, no path)" \
        test "$needed" = "$soname"
    expect "consumer-cmake ($tag): consumer_static needs no libdsh_session.so" \
        bash -c "! readelf -d '$dir/consumer_static' | grep -q 'NEEDED.*libdsh_session'"
}
t=$SECONDS
consumer installed "$prefix"
# The version file: SameMinorVersion while 0.x (SameMajorVersion after 1.0).
if [ "$major" = 0 ]; then refuse=$major.$((minor + 1)); else refuse=$((major + 1)).0; fi
expect "dsh_sessionConfigVersion.cmake refuses a request for $refuse" \
    bash -c "! cmake -S tests/packaging/consumer-cmake -B '$work/consumer-refuse' ${generator[*]} \
             -DCMAKE_PREFIX_PATH='$prefix' -DDSH_SESSION_VERSION=$refuse >'$logs/refuse.log' 2>&1"

# --- 5. move the prefix: relocatable ------------------------------------------------------------
moved=$work/moved/elsewhere
mkdir -p "$work/moved"
step "move the prefix to $moved" mv "$prefix" "$moved"
leaks=$(grep -rIl -- "$prefix" "$moved" 2>/dev/null)
expect "no installed text file names the old prefix" test -z "$leaks"
consumer moved "$moved"
echo "# consumer builds: $((SECONDS - t)) s"

# --- 6. pkg-config consumers (moved prefix) ---------------------------------------------------
export PKG_CONFIG_PATH=$moved/lib/pkgconfig
main=tests/packaging/consumer-cmake/main.c
expect "pkg-config --modversion dsh-session = $version" test "$(pkg-config --modversion dsh-session)" = "$version"
expect "pkg-config --modversion dsh-session-static = $version" \
    test "$(pkg-config --modversion dsh-session-static)" = "$version"
echo "# pkg-config --cflags --libs dsh-session: $(pkg-config --cflags --libs dsh-session)"
echo "# pkg-config --static --cflags --libs dsh-session-static: $(pkg-config --static --cflags --libs dsh-session-static)"
pc_shared=$work/pc_shared
pc_static=$work/pc_static
step "cc \$(pkg-config --cflags --libs dsh-session)" bash -c \
    "cc -std=c99 -Wall -Wextra -Werror $main \$(pkg-config --cflags --libs dsh-session) \
     -Wl,-rpath,\$(pkg-config --variable=libdir dsh-session) -o $pc_shared" &&
    step "run the pkg-config shared consumer" "$pc_shared"
step "cc \$(pkg-config --static --cflags --libs dsh-session-static)" bash -c \
    "cc -std=c99 -Wall -Wextra -Werror $main \$(pkg-config --static --cflags --libs dsh-session-static) -o $pc_static" &&
    step "run the pkg-config static consumer" "$pc_static"
step "cc bindings/c/sample.c \$(pkg-config ... dsh-session) and run it" bash -c \
    "cc -std=c99 -Wall -Wextra -Werror bindings/c/sample.c \$(pkg-config --cflags --libs dsh-session) \
     -Wl,-rpath,\$(pkg-config --variable=libdir dsh-session) -o $work/sample && $work/sample"

step "c++ bindings/cpp/tests/cpp_host.cpp \$(pkg-config ... dsh-session) and run it" bash -c \
    "c++ -std=c++17 -pthread -Wall -Wextra -Werror bindings/cpp/tests/cpp_host.cpp \$(pkg-config --cflags --libs dsh-session) \
     -Wl,-rpath,\$(pkg-config --variable=libdir dsh-session) -o $work/cpp_host && $work/cpp_host"

# A Go module outside the repository that requires the binding (replace ->
# this checkout), built with the tag dshsession_system through pkg-config
# against the moved prefix; the rpath comes from CGO_LDFLAGS. (scripts/test-dist.sh
# builds the same program from a module proxy, with the prebuilt library.)
if command -v go >/dev/null; then
    gomod=$work/consumer-go
    cp -r tests/packaging/consumer-go "$gomod"
    step "consumer-go: go mod edit -replace the binding => $root/bindings/go" \
        bash -c "cd '$gomod' && go mod edit -replace github.com/dsh-session/dsh-session/bindings/go='$root/bindings/go'"
    step "consumer-go: go build -tags dshsession_system (PKG_CONFIG_PATH=<prefix>/lib/pkgconfig, CGO_LDFLAGS=-Wl,-rpath,<prefix>/lib)" \
        env -C "$gomod" CGO_ENABLED=1 GOTOOLCHAIN=local GOPROXY=off GOFLAGS=-mod=mod \
        "GOCACHE=${GOCACHE:-$root/target/go-cache}" "CGO_LDFLAGS=-Wl,-rpath,$moved/lib" \
        go build -tags dshsession_system -o "$work/consumer-go-bin" . &&
        step "consumer-go: run it (no LD_LIBRARY_PATH)" env -u LD_LIBRARY_PATH "$work/consumer-go-bin" "$work"
    goneeded=$(readelf -d "$work/consumer-go-bin" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(libdsh_session[^]]*\)\]/\1/p')
    expect "consumer-go NEEDs $goneeded (the SONAME)" test "$goneeded" = "$soname"
else
    echo "# consumer-go SKIPPED: no go on PATH (scripts/test-go.sh installs it)"
fi

# The host that defines sqlite3_open itself, statically linked.
host=bindings/c/tests/host_sqlite.c
step "static link of a host defining sqlite3_open (installed archive)" bash -c \
    "cc -std=c99 -Wall -Wextra -Werror $host \$(pkg-config --static --cflags --libs dsh-session-static) -o $work/host_sqlite" &&
    step "run the host defining sqlite3_open" "$work/host_sqlite"
# A host that uses the system's SQLite and zstd beside the installed archive:
# the host's calls reach the system libraries, the library's its own copies,
# and the library's zstd never calls the host's ZSTD_trace_* hooks.
sys_host=bindings/c/tests/host_system_libs.c
echo "# $sys_host: sqlite3_*/ZSTD_* of the host are the system's (version, dladdr), the library writes and reads its SQLite and zstd JSONL stores, ZSTD_trace_* hooks of the host stay the host's"
step "static link: a host with the system's shared libsqlite3 and libzstd + the installed archive" bash -c \
    "cc -std=c99 -Wall -Wextra -Werror -DHOST_SHARED_SYSTEM_LIBS $sys_host \$(pkg-config --static --cflags --libs dsh-session-static) \
     -lsqlite3 -lzstd -o $work/host_system_shared" &&
    run_checks "host with shared system libs" "$work/host_system_shared"
step "static link: a host with the system's libsqlite3.a and libzstd.a + the installed archive" bash -c \
    "cc -std=c99 -Wall -Wextra -Werror $sys_host \$(pkg-config --static --cflags --libs dsh-session-static) \
     -Wl,-Bstatic -lsqlite3 -lzstd -Wl,-Bdynamic -lpthread -ldl -lm -o $work/host_system_static" &&
    run_checks "host with static system libs" "$work/host_system_static"
# ... and why the archive is post-processed: cargo's own archive cannot link it.
raw=$cargo_target/release/libdsh_session.a
if [ -f "$raw" ]; then
    cc -std=c99 -Iinclude "$host" "$raw" -lpthread -ldl -lm -o "$work/host_sqlite_raw" >"$logs/raw.log" 2>&1
    raw_rc=$?
    expect "the same host against cargo's unprocessed archive fails: multiple definition of sqlite3_open" \
        bash -c "[ $raw_rc != 0 ] && grep -q 'multiple definition of .sqlite3_open' '$logs/raw.log'"
    cc -std=c99 -Iinclude -DHOST_SHARED_SYSTEM_LIBS "$sys_host" "$raw" -lsqlite3 -lzstd -lpthread -ldl -lm \
        -o "$work/host_system_raw" >"$logs/system-raw.log" 2>&1 && "$work/host_system_raw" >>"$logs/system-raw.log" 2>&1
    raw_rc=$?
    expect "the system-libs host against cargo's unprocessed archive fails: its calls reach the bundled copies" \
        bash -c "[ $raw_rc != 0 ] && grep -q '^FAIL the host' '$logs/system-raw.log'"
    grep '^FAIL' "$logs/system-raw.log" | sed 's/^/#   (as it should) /'
fi

finish
