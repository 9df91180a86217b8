#!/usr/bin/env bash
# The Windows suite, on Linux: cross-builds for x86_64-pc-windows-gnu with
# mingw-w64 and runs the tests and the C programs under Wine (Debian's,
# headless, in a prefix of its own under target/). Installs what it lacks.
#
# What runs, and why (under Wine every file operation is a round trip to
# wineserver, and the whole debug suite takes far longer than a CI run
# can give it, so the Windows run takes what differs on Windows):
# - the core crate's file-store tests (`cargo test -p dsh-session --lib`,
#   JSONL and SQLite only: no PostgreSQL server under Wine): the platform
#   layer (lock, private files, write-through publication, reads at an
#   offset), quarantine, the Windows tests of both backends (DACLs, the
#   lock file, reparse points), and the backends' round trips, layout,
#   opening rules, schema, crash repair and writer tests; and
#   tests/foreign_sqlite.rs (an exclusive store's WAL index beside a
#   planted `-shm`; its foreign-file cases need a user-only DACL the
#   public API cannot make, and are ignored there);
# - the C library as a C host sees it: dsh_session.dll with its import
#   library, and the static library, each linked into
#   crates/ffi/tests/c/store_round_trip.c (a SQLite and a JSONL store:
#   append a turn, flush, fork, the lock, reopen: the C ABI of
#   crates/ffi-impl over both file backends), plus the ABI misuse program
#   (crates/ffi/tests/c/abi_misuse.c, threads included) against the DLL;
# - the CLI (dsh-session.exe), listing and verifying the stores the C host
#   left;
# - the CMake packaging, cross-built with cmake/mingw-w64-x86_64.cmake
#   (cargo's release build for the target): ctest runs the Windows C
#   programs under Wine (the store round trip and the ABI misuse suite,
#   each against the DLL and the static library), then the install
#   (bin/dsh_session.dll, lib/libdsh_session.dll.a, lib/libdsh_session.a,
#   the CMake package, pkg-config files) and a separate project that
#   finds it with find_package and links both libraries, plus the same
#   through pkg-config, each run under Wine.
# The rest is platform-independent (json, engine: Linux runs it) or Unix
# by nature (SIGKILL crash trials, LD_PRELOAD system-call faults, symlink
# and mode-bit tests). Tests that Wine cannot show are #[ignore]d on
# Windows with the reason, and counted here as skipped.
set -euo pipefail
cd "$(dirname "$0")/.."

. scripts/lib.sh
ensure_commands x86_64-w64-mingw32-gcc:mingw-w64 wine:wine /usr/lib/wine/wine64:wine64
command -v cargo >/dev/null || { echo "Rust (cargo) is required: https://rustup.rs" >&2; exit 1; }
target=x86_64-pc-windows-gnu
rustup target list --installed 2>/dev/null | grep -qx "$target" || rustup target add "$target"

out="$PWD/target/$target/debug"
export WINEPREFIX="$PWD/target/wine-prefix" WINEDEBUG=-all WINEDLLOVERRIDES="mscoree,mshtml="
export CARGO_TARGET_X86_64_PC_WINDOWS_GNU_RUNNER=wine
export DSH_TEST_NO_POSTGRES=1
unset DISPLAY

# Wine 8 has no bcryptprimitives.dll, whose ProcessPrng Rust's std calls:
# the shim of scripts/windows/ goes next to every Windows executable.
shim_dir="$PWD/target/windows-shim"
mkdir -p "$shim_dir"
x86_64-w64-mingw32-gcc -O2 -shared -o "$shim_dir/bcryptprimitives.dll" \
    scripts/windows/bcryptprimitives.c -ladvapi32
place_shim() { mkdir -p "$1" && cp "$shim_dir/bcryptprimitives.dll" "$1/"; }

if [ ! -d "$WINEPREFIX" ]; then
    echo "windows: making the Wine prefix $WINEPREFIX"
    wine wineboot --init >/dev/null 2>&1 || true
fi

run=0 skipped=0
# The sum of the "N passed;" (or ignored) of every cargo test result.
count() {
    awk -v w="$1;" '/^test result: ok\./ { for (i = 2; i <= NF; i++) if ($i == w) s += $(i - 1) }
        END { print s + 0 }' "$2"
}
# Run one cargo test command for Windows; add its counts.
cargo_windows() {
    local log
    log=$(mktemp)
    echo "windows: cargo test --target $target $*"
    # Build first, so that the shim is in place when the runner starts.
    cargo test --locked --target "$target" --no-run "$@" 2>&1 | grep -v "^ *\(Compiling\|Checking\)" || true
    place_shim "$out/deps"
    if ! cargo test --locked --target "$target" "$@" 2>&1 | tee "$log" | grep -E "^(test result|running|.*FAILED|.*panicked|failures:)"; then
        :
    fi
    if ! grep -q "^test result" "$log" || grep -q "^test result: FAILED" "$log" \
        || grep -q "error: test failed" "$log"; then
        tail -50 "$log"
        echo "windows: FAILED: cargo test $*" >&2
        rm -f "$log"
        exit 1
    fi
    local p i
    p=$(count passed "$log")
    i=$(count ignored "$log")
    grep -h "^test .* ignored, " "$log" | sed 's/^/windows: skipped: /' || true
    run=$((run + p)) skipped=$((skipped + i))
    rm -f "$log"
}

echo "windows: Rust tests under Wine"
cargo_windows -p dsh-session --no-default-features --features jsonl,sqlite --lib -- \
    engine::cwd store::platform store::quarantine tests_windows store::jsonl::tests:: \
    store::jsonl::tests_layout store::jsonl::tests_crash store::jsonl::fsio \
    store::sqlite::tests:: store::sqlite::tests_open store::sqlite::tests_schema \
    store::sqlite::tests_writer store::sqlite::file
cargo_windows -p dsh-session --no-default-features --features jsonl,sqlite --test foreign_sqlite

echo "windows: the C library (DLL, import library, static library)"
cargo build --locked -p dsh-session-ffi --target "$target" 2>&1 | grep -v "^ *Compiling" || true
for f in dsh_session.dll libdsh_session.dll.a libdsh_session.a; do
    [ -f "$out/$f" ] || { echo "windows: $out/$f was not built" >&2; exit 1; }
    printf 'windows: %-22s %s bytes\n' "$f" "$(stat -c %s "$out/$f")"
done

c_dir="$PWD/target/windows-c"
rm -rf "$c_dir" && mkdir -p "$c_dir"
place_shim "$c_dir"
cp "$out/dsh_session.dll" "$c_dir/"
cc_win() { x86_64-w64-mingw32-gcc -std=c99 -Wall -Wextra -Werror -Iinclude "$@"; }
# With the DLL (through its import library), and with the static library
# (and the Windows libraries it needs).
cc_win crates/ffi/tests/c/store_round_trip.c -o "$c_dir/store_round_trip.exe" \
    -L"$out" -l:libdsh_session.dll.a
cc_win crates/ffi/tests/c/store_round_trip.c -o "$c_dir/store_round_trip_static.exe" \
    "$out/libdsh_session.a" -lws2_32 -luserenv -lbcrypt -lntdll -ladvapi32 -lkernel32 -lsynchronization -lsecur32
cc_win crates/ffi/tests/c/abi_misuse.c -o "$c_dir/abi_misuse.exe" \
    -L"$out" -l:libdsh_session.dll.a -Wl,-Bstatic -lpthread -Wl,-Bdynamic

# Run one C program under Wine in the C directory; add its counts.
c_windows() {
    local name=$1 log
    shift
    log=$(mktemp)
    echo "windows: wine $name.exe $*"
    if ! (cd "$c_dir" && wine "./$name.exe" "$@") >"$log" 2>&1; then
        cat "$log"
        echo "windows: FAILED: $name" >&2
        exit 1
    fi
    grep -E "^(FAIL|#)" "$log" || true
    local summary
    summary=$(tail -1 "$log" | tr -d '\r')
    echo "windows: $name: $summary"
    [[ $summary =~ ^([0-9]+)\ passed,\ 0\ failed$ ]] || { cat "$log"; exit 1; }
    run=$((run + BASH_REMATCH[1]))
    rm -f "$log"
}
rm -rf "$c_dir/dll" "$c_dir/static" && mkdir -p "$c_dir/dll" "$c_dir/static"
c_windows store_round_trip dll
c_windows store_round_trip_static static
c_windows abi_misuse

# The CLI, on the stores the C host left: it lists and verifies them.
echo "windows: the CLI (dsh-session.exe list / verify)"
cargo build --locked -p dsh-session-cli --target "$target" 2>&1 | grep -v "^ *Compiling" || true
place_shim "$out"
cli() { (cd "$c_dir" && wine "$out/dsh-session.exe" "$@") | tr -d '\r'; }
listed=$(cli list dll/store.db)
echo "$listed"
[[ $listed == *host-fork* ]] || { echo "windows: FAILED: the CLI's list" >&2; exit 1; }
verified=$(cli verify dll/jsonl)
echo "$verified"
[[ $verified == *"2 clean, 0 repairable, 0 corrupt"* ]] || { echo "windows: FAILED: the CLI's verify" >&2; exit 1; }
run=$((run + 2))

# The CMake packaging, cross-built: configure with the mingw-w64 toolchain
# file (cargo builds x86_64-pc-windows-gnu in release), build, ctest (the
# C programs under Wine), install to a prefix, then a separate project
# that finds the package there and links both libraries, run under Wine.
echo "windows: CMake cross build (-DCMAKE_TOOLCHAIN_FILE=cmake/mingw-w64-x86_64.cmake)"
ensure_commands cmake:cmake ninja:ninja-build pkg-config:pkg-config
cm="$PWD/target/windows-cmake"
toolchain="$PWD/cmake/mingw-w64-x86_64.cmake"
rm -rf "$cm/prefix" "$cm/consumer"
mkdir -p "$cm"
cm_step() { # cm_step WHAT COMMAND...: run quietly into a log; show its end on failure.
    local what=$1 log="$cm/step.log"
    shift
    echo "windows: cmake: $what"
    if ! "$@" >"$log" 2>&1; then
        tail -40 "$log"
        echo "windows: FAILED: $what" >&2
        exit 1
    fi
}
cm_step "configure" cmake -S . -B "$cm/build" -G Ninja "-DCMAKE_TOOLCHAIN_FILE=$toolchain" -DCMAKE_INSTALL_LIBDIR=lib
cm_step "build (cargo build --release --target x86_64-pc-windows-gnu, staging, C tests)" cmake --build "$cm/build"
place_shim "$cm/build/bindings/c"
echo "windows: cmake: ctest (Windows programs under Wine)"
if ! ctest --test-dir "$cm/build" --output-on-failure >"$cm/ctest.log" 2>&1; then
    cat "$cm/ctest.log"
    echo "windows: FAILED: ctest" >&2
    exit 1
fi
grep -E "Test +#|tests passed" "$cm/ctest.log" | sed 's/^ */windows: ctest: /'
n=$(sed -n 's/.*tests passed, 0 tests failed out of \([0-9]*\)$/\1/p' "$cm/ctest.log")
[ -n "$n" ] || { cat "$cm/ctest.log"; exit 1; }
run=$((run + n))

cm_step "install to $cm/prefix" cmake --install "$cm/build" --prefix "$cm/prefix"
for f in bin/dsh_session.dll bin/dsh-session.exe lib/libdsh_session.dll.a lib/libdsh_session.a \
    include/dsh_session.h include/dsh_session.hpp lib/pkgconfig/dsh-session.pc lib/pkgconfig/dsh-session-static.pc \
    lib/cmake/dsh_session/dsh_sessionConfig.cmake lib/cmake/dsh_session/dsh_sessionConfigVersion.cmake; do
    [ -f "$cm/prefix/$f" ] || { echo "windows: FAILED: $f is not installed" >&2; exit 1; }
done
echo "windows: installed bin/dsh_session.dll, bin/dsh-session.exe, lib/libdsh_session.dll.a, lib/libdsh_session.a, headers, pkg-config, CMake package"
run=$((run + 1))

# find_package(dsh_session) from the prefix, through the same toolchain file.
cm_step "consumer: find_package(dsh_session CONFIG REQUIRED) from the prefix, build" bash -c \
    "cmake -S tests/packaging/consumer-cmake -B '$cm/consumer' -G Ninja '-DCMAKE_TOOLCHAIN_FILE=$toolchain' \
     '-DCMAKE_PREFIX_PATH=$cm/prefix' && cmake --build '$cm/consumer'"
# pkg-config against the prefix (only its .pc files).
pc() { PKG_CONFIG_LIBDIR="$cm/prefix/lib/pkgconfig" pkg-config "$@"; }
pc_shared=$(pc --cflags --libs dsh-session)
pc_static=$(pc --static --cflags --libs dsh-session-static)
echo "windows: pkg-config --cflags --libs dsh-session: $pc_shared"
echo "windows: pkg-config --static --cflags --libs dsh-session-static: $pc_static"
main=tests/packaging/consumer-cmake/main.c
# shellcheck disable=SC2086 # the flags are words
cm_step "pkg-config consumer: dsh-session (the DLL's import library)" \
    x86_64-w64-mingw32-gcc -std=c99 -Wall -Wextra -Werror "$main" $pc_shared -o "$cm/consumer/pc_shared.exe"
# shellcheck disable=SC2086
cm_step "pkg-config consumer: dsh-session-static" \
    x86_64-w64-mingw32-gcc -std=c99 -Wall -Wextra -Werror -static "$main" $pc_static -o "$cm/consumer/pc_static.exe"
# The DLL from the prefix (and the shim) beside the programs, as an
# application ships them.
cp "$cm/prefix/bin/dsh_session.dll" "$cm/consumer/"
place_shim "$cm/consumer"
for exe in consumer_shared consumer_static consumer_cxx pc_shared pc_static; do
    if ! out=$(cd "$cm/consumer" && wine "./$exe.exe" 2>"$cm/wine-stderr.log" | tr -d '\r') ||
        [[ $out != consumer* ]]; then
        echo "$out"
        cat "$cm/wine-stderr.log"
        echo "windows: FAILED: consumer $exe" >&2
        exit 1
    fi
    echo "windows: wine $exe.exe: $out"
    run=$((run + 1))
done
# The import table is read whole before grep looks at it: under pipefail,
# `objdump | grep -q` fails when grep stops early and objdump gets SIGPIPE.
imports() {
    local table
    table=$(x86_64-w64-mingw32-objdump -p "$cm/consumer/$1.exe") ||
        { echo "windows: FAILED: objdump -p $1.exe" >&2; exit 1; }
    grep -qi "DLL Name: dsh_session.dll" <<<"$table"
}
if ! imports consumer_shared || ! imports pc_shared || imports consumer_static || imports pc_static; then
    echo "windows: FAILED: the shared consumers must import dsh_session.dll, the static ones not" >&2
    exit 1
fi
echo "windows: consumer_shared and pc_shared import dsh_session.dll, consumer_static and pc_static do not"
run=$((run + 1))

echo "windows: $run run, $skipped skipped"
echo "windows: $run passed, 0 failed, $skipped skipped"
