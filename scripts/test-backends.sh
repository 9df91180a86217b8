#!/usr/bin/env bash
# The C library with a choice of backends (docs/packaging.md, "Backends"):
#
#   ./scripts/test-backends.sh        (scripts/test.sh runs it)
#
#   1. the full library (every backend; cargo build --release, target/) and the
#      desktop one: cargo build --release -p dsh-session-ffi
#      --no-default-features --features sqlite,jsonl, in target/desktop;
#   2. nm on both (.so symbol table and cargo's .a): the desktop library holds
#      no symbol of tokio, tokio-postgres, postgres-protocol, postgres-types or
#      the core's postgres module, and the full one does; objdump -p: neither
#      needs a shared library beyond libc's and libgcc's;
#   3. the sizes of both, as cargo makes them, as CMake installs them (no
#      debug info, the archive's symbols localized) and, for the .so, with
#      every symbol stripped (strip -s, as an application may ship it);
#   4. tests/packaging/check-artifacts.sh on the desktop library as installed
#      (exports, SONAME, an archive whose only globals are dsh_*);
#   5. bindings/c/tests/backends.c against each library: dsh_build_info lists
#      its backends, a configuration naming another is config.backend-not-built;
#   6. the core's unit tests of that rule, built without postgres.
#
# Prints one line per check; exits non-zero when one failed.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
work=$(mktemp -d "${TMPDIR:-/tmp}/dsh-backends-XXXXXX")
trap 'rm -rf "$work"' EXIT
desktop_features=sqlite,jsonl
full_dir=${CARGO_TARGET_DIR:-$root/target}/release
desktop_target=$root/target/desktop
desktop_dir=$desktop_target/release
passed=0
failed=0
ok() { passed=$((passed + 1)); echo "ok   $1"; }
fail() { failed=$((failed + 1)); echo "FAIL $1${2:+: $2}"; }
expect() { # expect NAME DETAIL-IF-FAILED CONDITION...
    local name=$1 detail=$2
    shift 2
    if "$@"; then ok "$name"; else fail "$name" "$detail"; fi
}
# run NAME COMMAND...: run quietly; on failure show the end of its output.
run() {
    local name=$1 log=$work/log
    shift
    [ "$(type -t "$1")" = function ] || echo "# $*"
    if "$@" >"$log" 2>&1; then
        ok "$name"
    else
        fail "$name" "exit $?"
        tail -n 30 "$log" | sed 's/^/#  /'
        return 1
    fi
}

# --- 1. the two builds ------------------------------------------------------------
# The full one is the command CMake runs (a no-op after the packaging checks).
run "full library: cargo build --release -p dsh-session-ffi -p dsh-session-cli" \
    cargo build --release --locked -p dsh-session-ffi -p dsh-session-cli || exit 1
run "desktop library: cargo build --release -p dsh-session-ffi --no-default-features --features $desktop_features" \
    cargo build --release --locked -p dsh-session-ffi --no-default-features --features "$desktop_features" \
    --target-dir "$desktop_target" || exit 1

# --- 2. symbols -----------------------------------------------------------------------
# Demangled names of the PostgreSQL client's crates and of the core's backend.
pg='(^|[^A-Za-z0-9_])(tokio|tokio_postgres|postgres_protocol|postgres_types)::|dsh_session::store::postgres::'
count() { nm -C "$1" 2>/dev/null | grep -cE "$pg"; }
for kind in so a; do
    f=libdsh_session.$kind
    full_n=$(count "$full_dir/$f")
    desktop_n=$(count "$desktop_dir/$f")
    echo "# nm -C $f | grep tokio/postgres: full $full_n symbols, desktop $desktop_n"
    expect "the full $f has tokio and PostgreSQL symbols (the check sees them)" "none" test "$full_n" -gt 0
    expect "the desktop $f has no tokio or PostgreSQL symbol" \
        "$(nm -C "$desktop_dir/$f" 2>/dev/null | grep -E "$pg" | head -3 | tr '\n' ' ')" test "$desktop_n" = 0
done
for build in full desktop; do
    dir=${build}_dir
    needed=$(objdump -p "${!dir}/libdsh_session.so" | awk '$1 == "NEEDED" {print $2}')
    echo "# objdump -p ($build): NEEDED $(tr '\n' ' ' <<<"$needed")"
    others=$(grep -vE '^(libc|libm|libgcc_s|libpthread|libdl|librt|libutil|ld-linux-[^.]*)\.so' <<<"$needed")
    expect "the $build .so needs no shared library beyond libc's and libgcc's" "$others" test -z "$others"
done

# --- 3. sizes ---------------------------------------------------------------------------
mib() { awk -v b="$(stat -c %s "$1")" 'BEGIN { printf "%.1f MiB", b / 1048576 }'; }
installed() { # installed BUILD-DIR OUT-DIR: the two libraries as CMake installs them
    mkdir -p "$2"
    objcopy --strip-debug "$1/libdsh_session.so" "$2/libdsh_session.so.strip" &&
        strip --strip-all -o "$2/libdsh_session.so.strip-all" "$1/libdsh_session.so" &&
        cmake -DINPUT="$1/libdsh_session.a" -DOUTPUT="$2/libdsh_session.a" -DLD=ld -DOBJCOPY=objcopy -DAR=ar \
            -DSTRIP_DEBUG=ON -P cmake/DshLocalizeArchive.cmake
}
run "the full library as installed (objcopy --strip-debug; cmake/DshLocalizeArchive.cmake)" \
    installed "$full_dir" "$work/full"
run "the desktop library as installed" installed "$desktop_dir" "$work/desktop"
echo "# sizes                          full (sqlite, jsonl, postgres)   desktop ($desktop_features)"
printf '# %-30s %-32s %s\n' "libdsh_session.so, cargo" "$(mib "$full_dir/libdsh_session.so")" \
    "$(mib "$desktop_dir/libdsh_session.so")"
printf '# %-30s %-32s %s\n' "libdsh_session.so, installed" "$(mib "$work/full/libdsh_session.so.strip")" \
    "$(mib "$work/desktop/libdsh_session.so.strip")"
printf '# %-30s %-32s %s\n' "libdsh_session.so, strip -s" "$(mib "$work/full/libdsh_session.so.strip-all")" \
    "$(mib "$work/desktop/libdsh_session.so.strip-all")"
printf '# %-30s %-32s %s\n' "libdsh_session.a, cargo" "$(mib "$full_dir/libdsh_session.a")" \
    "$(mib "$desktop_dir/libdsh_session.a")"
printf '# %-30s %-32s %s\n' "libdsh_session.a, installed" "$(mib "$work/full/libdsh_session.a")" \
    "$(mib "$work/desktop/libdsh_session.a")"

# --- 4. the desktop library as installed ------------------------------------------------
version=$(sed -n 's/^#define DSH_VERSION_STRING "\(.*\)"$/\1/p' include/dsh_session.h)
soname=$(sed -n 's/^#define DSH_SONAME "\(.*\)"$/\1/p' include/dsh_session.h)
lib=$work/desktop/lib
mkdir -p "$lib"
cp "$work/desktop/libdsh_session.so.strip" "$lib/libdsh_session.so.$version"
ln -s "libdsh_session.so.$version" "$lib/$soname"
ln -s "$soname" "$lib/libdsh_session.so"
cp "$work/desktop/libdsh_session.a" "$lib/"
bash tests/packaging/check-artifacts.sh "$lib" include/dsh_session.h >"$work/artifacts.log" 2>&1
while IFS= read -r line; do
    case $line in
        "ok "*) ok "desktop: ${line#ok   }" ;;
        "FAIL "*) fail "desktop: ${line#FAIL }" ;;
    esac
done <"$work/artifacts.log"

# --- 5. the backends through the C ABI --------------------------------------------------
backends() { # backends BUILD LIBDIR MISSING...: backends.c against LIBDIR's .so
    local build=$1 libdir=$2 bin=$work/backends-$1 rt=$work/rt-$1
    shift 2
    mkdir -p "$rt"
    ln -sf "$libdir/libdsh_session.so" "$rt/$soname"
    if ! cc -std=c99 -Wall -Wextra -Werror -Iinclude bindings/c/tests/backends.c -L"$libdir" -ldsh_session \
        -Wl,-rpath,"$rt" -o "$bin" >"$work/cc.log" 2>&1; then
        fail "$build: cc bindings/c/tests/backends.c" "$(tail -n 5 "$work/cc.log")"
        return
    fi
    "$bin" "$@" >"$work/backends.log" 2>&1
    local rc=$?
    while IFS= read -r line; do
        case $line in
            "ok "*) ok "$build: ${line#ok   }" ;;
            "FAIL "*) fail "$build: ${line#FAIL }" ;;
            "#"*) echo "$line" ;;
        esac
    done <"$work/backends.log"
    [ "$rc" = 0 ] || grep -q '^FAIL' "$work/backends.log" || fail "$build: backends" "exit $rc"
}
backends full "$full_dir"
backends desktop "$desktop_dir" postgres

# --- 6. the core's rule, on a build without postgres ------------------------------------
run "cargo test -p dsh-session --lib --no-default-features --features $desktop_features -- store::config::tests" \
    cargo test --locked -p dsh-session --lib --no-default-features --features "$desktop_features" \
    -- store::config::tests
grep -E '^test .* (ok|FAILED)$' "$work/log" | sed 's/^/#   /'

echo "backends: $passed passed, $failed failed"
[ "$failed" = 0 ]
