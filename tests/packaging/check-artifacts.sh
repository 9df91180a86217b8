#!/usr/bin/env bash
# check-artifacts.sh LIBDIR HEADER
#
# Checks the libraries in LIBDIR (a build's stage/lib or an installed
# <prefix>/lib) against HEADER (dsh_session.h):
#   - the files and SONAME links: libdsh_session.so -> <SONAME> -> .so.<version>, libdsh_session.a
#   - readelf -d: SONAME is the header's DSH_SONAME, libdsh_session.so.0.<minor> before 1.0
#     and libdsh_session.so.<major> from 1.0 on
#   - nm -D --defined-only: only dsh_* function symbols, no sqlite3_*, and
#     exactly the dsh_* functions the header declares
#   - nm on the archive: no global symbol outside dsh_*, every header function defined
#   - nm -u on both: no undefined symbol of the bundled SQLite's or zstd's (sqlite3*, ZSTD_*,
#     ZDICT_*), which would bind to a host's definition (zstd's weak ZSTD_trace_* hooks)
# Prints "ok ..." / "FAIL ...: why" per check, then "artifacts: N passed, M failed".
set -uo pipefail

libdir=${1:?usage: check-artifacts.sh LIBDIR HEADER}
header=${2:?usage: check-artifacts.sh LIBDIR HEADER}
passed=0
failed=0
ok() { passed=$((passed + 1)); echo "ok   $1"; }
fail() { failed=$((failed + 1)); echo "FAIL $1: $2"; }
check() { # check NAME DETAIL-IF-FAILED CONDITION...
    local name=$1 detail=$2
    shift 2
    if "$@"; then ok "$name"; else fail "$name" "$detail"; fi
}

abi=$(sed -n 's/^#define DSH_ABI_VERSION \([0-9][0-9]*\)$/\1/p' "$header")
version=$(sed -n 's/^#define DSH_VERSION_STRING "\(.*\)"$/\1/p' "$header")
sonamefile=$(sed -n 's/^#define DSH_SONAME "\(.*\)"$/\1/p' "$header")
if [ -z "$abi" ] || [ -z "$version" ] || [ -z "$sonamefile" ]; then
    fail "header macros" "no DSH_ABI_VERSION / DSH_VERSION_STRING / DSH_SONAME in $header"
    echo "artifacts: $passed passed, $failed failed"
    exit 1
fi
echo "# $libdir against $header (version $version, ABI $abi, SONAME $sonamefile)"

# The rule: any 0.x minor may break the ABI, then any major.
major=${version%%.*}
minor=${version#*.}
minor=${minor%%.*}
if [ "$major" = 0 ]; then
    want_soname=libdsh_session.so.0.$minor want_abi=$minor
else
    want_soname=libdsh_session.so.$major want_abi=$((major * 1000))
fi
check "DSH_SONAME of $version is $want_soname" "the header says $sonamefile" \
    test "$sonamefile" = "$want_soname"
check "DSH_ABI_VERSION of $version is $want_abi" "the header says $abi" test "$abi" = "$want_abi"

so=$libdir/libdsh_session.so
real=$libdir/libdsh_session.so.$version
soname_link=$libdir/$sonamefile
archive=$libdir/libdsh_session.a

check "libdsh_session.so.$version is a regular file" "missing or a symlink" \
    test -f "$real" -a ! -L "$real"
check "$sonamefile -> libdsh_session.so.$version" "$(readlink "$soname_link" 2>&1)" \
    test "$(readlink "$soname_link")" = "libdsh_session.so.$version"
check "libdsh_session.so -> $sonamefile" "$(readlink "$so" 2>&1)" \
    test "$(readlink "$so")" = "$sonamefile"
check "libdsh_session.a is a regular file" "missing" test -f "$archive" -a ! -L "$archive"

# SONAME
soname=$(readelf -d "$real" 2>/dev/null | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
check "SONAME is $sonamefile" "readelf -d shows SONAME '${soname}'" \
    test "$soname" = "$sonamefile"

# Installed without debug info (DSH_STRIP_DEBUG, the default).
for f in "$real" "$archive"; do
    check "$(basename "$f") carries no debug info" "readelf -S lists .debug_info" \
        bash -c "! readelf -S --wide '$f' 2>/dev/null | grep -q '\.debug_info'"
done
echo "# sizes: $(du -h "$real" "$archive" | awk '{printf "%s %s; ", $2, $1}')"

# The functions the header declares (cbindgen writes each declaration's name on its first line).
header_fns=$(grep -E '^[A-Za-z_][A-Za-z0-9_ *]*[ *]dsh_[A-Za-z0-9_]+\(' "$header" | grep -v '^typedef' |
    sed -E 's/^.*[ *](dsh_[A-Za-z0-9_]+)\(.*$/\1/' | sort -u)
check "the header declares dsh_* functions" "none found in $header" test -n "$header_fns"

# Shared library: the dynamic symbol table.
dyn=$(nm -D --defined-only "$real" 2>/dev/null)
not_dsh=$(awk 'NF >= 3 && $3 !~ /^dsh_/ {print $3}' <<<"$dyn")
check ".so exports only dsh_* symbols" "also: $(tr '\n' ' ' <<<"$not_dsh")" test -z "$not_dsh"
not_fn=$(awk 'NF >= 3 && $2 != "T" {print $2 " " $3}' <<<"$dyn")
check ".so exports only functions (type T)" "also: $(tr '\n' ' ' <<<"$not_fn")" test -z "$not_fn"
sqlite=$(grep -c ' sqlite3_' <<<"$dyn")
check ".so exports no sqlite3_* symbol" "$sqlite sqlite3_* symbols" test "$sqlite" = 0
exported=$(awk 'NF >= 3 && $3 ~ /^dsh_/ {print $3}' <<<"$dyn" | sort -u)
missing=$(comm -23 <(echo "$header_fns") <(echo "$exported"))
extra=$(comm -13 <(echo "$header_fns") <(echo "$exported"))
check "every header function is exported by the .so ($(wc -l <<<"$header_fns"))" \
    "not exported: $(tr '\n' ' ' <<<"$missing")" test -z "$missing"
check "every exported dsh_* symbol is declared in the header" \
    "not in the header: $(tr '\n' ' ' <<<"$extra")" test -z "$extra"

# Static archive: global (external, incl. weak) defined symbols.
globals=$(nm -g --defined-only "$archive" 2>/dev/null | awk 'NF >= 3 {print $3}' | sort -u)
check "the archive defines global symbols" "nm found none in $archive" test -n "$globals"
foreign=$(grep -v '^dsh_' <<<"$globals")
check "the archive has no global symbol outside dsh_*" \
    "$(wc -l <<<"$foreign") others, e.g. $(head -5 <<<"$foreign" | tr '\n' ' ')" test -z "$foreign"
a_missing=$(comm -23 <(echo "$header_fns") <(echo "$globals"))
check "every header function is a global of the archive" \
    "missing: $(tr '\n' ' ' <<<"$a_missing")" test -z "$a_missing"

# Undefined references into the bundled libraries' names: the linker or the
# loader would bind them to a host's definitions.
bundled='^(sqlite3|ZSTD_|ZDICT_)'
so_undef=$(nm -D --undefined-only "$real" 2>/dev/null | awk '{print $NF}' | sed 's/@.*//' | grep -E "$bundled")
check ".so refers to no undefined sqlite3*/ZSTD_*/ZDICT_* symbol" "$(tr '\n' ' ' <<<"$so_undef")" test -z "$so_undef"
a_undef=$(nm --undefined-only "$archive" 2>/dev/null | awk 'NF >= 2 {print $NF}' | grep -E "$bundled" | sort -u)
check "the archive refers to no undefined sqlite3*/ZSTD_*/ZDICT_* symbol" "$(tr '\n' ' ' <<<"$a_undef")" \
    test -z "$a_undef"

echo "artifacts: $passed passed, $failed failed"
[ "$failed" = 0 ]
