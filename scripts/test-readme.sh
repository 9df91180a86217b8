#!/usr/bin/env bash
# Run the code blocks of README.md, so that what it shows works as shown.
#
#   ./scripts/test-readme.sh      (scripts/test.sh runs it after the packaging checks)
#
# Each ```sh block runs twice in a row, from the repository root, with
# `bash -euo pipefail` (the README's commands must work again on a machine
# where they already ran); a ```c block (C99) and a ```cpp block (C++17)
# are compiled against the cargo build the quickstart block made and run,
# and when a ```c block's first line is `/* NAME.c: COMMAND */` the COMMAND
# runs as written in a directory holding the block as NAME.c, with
# pkg-config finding that build (a temporary dsh-session.pc) and no
# LD_LIBRARY_PATH; a ```rust block is the main.rs of a crate outside the
# repository that depends on the core by path, run with cargo; a ```json
# block must parse.
# ```text blocks are not code. A block preceded by the line
# `<!-- readme-test: skip: REASON -->` is listed with its reason instead of
# being run (a block that runs this very script, one that needs root and
# minutes for a chroot of its own, the benchmark).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
. scripts/lib.sh
ensure_commands python3:python3 # checks the json blocks
work=$(mktemp -d "${TMPDIR:-/tmp}/dsh-readme-XXXXXX")
trap 'rm -rf "$work"' EXIT

# Split README.md into numbered blocks: $work/N.LANG (+ $work/N.skip with
# the reason) and $work/N.line (the line of its fence).
awk -v dir="$work" '
    /^<!-- readme-test: skip: .* -->$/ { reason = $0; sub(/^<!-- readme-test: skip: /, "", reason); sub(/ -->$/, "", reason); next }
    /^```/ {
        if (inside) { inside = 0; close(file); next }
        n++; lang = substr($0, 4); if (lang == "") lang = "none"
        file = dir "/" n "." lang; printf "" > file
        print NR > (dir "/" n ".line")
        if (reason != "") { print reason > (dir "/" n ".skip"); reason = "" }
        inside = 1; next
    }
    inside { print >> file; next }
    NF { reason = "" }
' README.md

ran=0 skipped=0 failed=0
for f in $(ls "$work" | grep -E '^[0-9]+\.[a-z]+$' | grep -v '\.line$\|\.skip$' | sort -n); do
    n=${f%%.*} lang=${f#*.}
    line=$(cat "$work/$n.line")
    name="README.md:$line ($lang)"
    if [ -f "$work/$n.skip" ]; then
        echo "skip $name: $(cat "$work/$n.skip")"
        skipped=$((skipped + 1))
        continue
    fi
    log=$work/$n.log
    started=$SECONDS
    case $lang in
        sh)
            ok=1
            for round in 1 2; do
                if ! (cd "$root" && bash -euo pipefail "$work/$f") >"$log" 2>&1; then
                    ok=0
                    echo "FAIL $name (run $round):"
                    tail -n 40 "$log" | sed 's/^/#  /'
                    break
                fi
            done
            [ $ok = 1 ] || { failed=$((failed + 1)); continue; } ;;
        c)
            if ! (cc -std=c99 -Wall -Wextra -Werror -Iinclude "$work/$f" -Ltarget/release -ldsh_session \
                    -Wl,-rpath,"$root/target/release" -o "$work/$n.bin" && "$work/$n.bin") >"$log" 2>&1; then
                echo "FAIL $name:"; tail -n 40 "$log" | sed 's/^/#  /'
                failed=$((failed + 1)); continue
            fi
            first=$(head -n 1 "$work/$f")
            if [[ $first =~ ^/\*\ ([A-Za-z0-9_-]+\.c):\ (.*)\ \*/$ ]]; then
                file=${BASH_REMATCH[1]} command=${BASH_REMATCH[2]}
                pc=$work/pkgconfig
                mkdir -p "$pc" "$work/$n.dir"
                printf 'libdir=%s\nincludedir=%s\n\nName: dsh-session\nDescription: the cargo build of this checkout\nVersion: 0\nCflags: -I${includedir}\nLibs: -L${libdir} -ldsh_session\n' \
                    "$root/target/release" "$root/include" >"$pc/dsh-session.pc"
                cp "$work/$f" "$work/$n.dir/$file"
                if ! (cd "$work/$n.dir" && env -u LD_LIBRARY_PATH PKG_CONFIG_PATH="$pc" \
                        bash -euo pipefail -c "$command") >"$log" 2>&1; then
                    echo "FAIL $name (its build line: $command):"; tail -n 40 "$log" | sed 's/^/#  /'
                    failed=$((failed + 1)); continue
                fi
            fi ;;
        cpp)
            if ! (c++ -std=c++17 -Wall -Wextra -Werror -Iinclude "$work/$f" -Ltarget/release -ldsh_session \
                    -Wl,-rpath,"$root/target/release" -o "$work/$n.bin" && "$work/$n.bin") >"$log" 2>&1; then
                echo "FAIL $name:"; tail -n 40 "$log" | sed 's/^/#  /'
                failed=$((failed + 1)); continue
            fi ;;
        rust)
            crate=$work/$n.crate
            mkdir -p "$crate/src"
            cp "$work/$f" "$crate/src/main.rs"
            printf '[package]\nname = "readme-block"\nversion = "0.0.0"\nedition = "2021"\npublish = false\n\n[dependencies]\ndsh-session = { path = "%s" }\n\n[workspace]\n' "$root" >"$crate/Cargo.toml"
            if ! (cd "$crate" && CARGO_TARGET_DIR="$root/target/readme-rust" cargo run --quiet) >"$log" 2>&1; then
                echo "FAIL $name:"; tail -n 40 "$log" | sed 's/^/#  /'
                failed=$((failed + 1)); continue
            fi ;;
        json)
            if command -v python3 >/dev/null; then
                python3 -m json.tool "$work/$f" >"$log" 2>&1 || {
                    echo "FAIL $name: not JSON"; cat "$log"; failed=$((failed + 1)); continue; }
            else
                echo "skip $name: no python3 to check the JSON with"; skipped=$((skipped + 1)); continue
            fi ;;
        text) echo "text $name: not code"; continue ;;
        *) echo "FAIL $name: a block of language '$lang' that this script cannot run (mark it skip with a reason)"
           failed=$((failed + 1)); continue ;;
    esac
    echo "ok   $name ($((SECONDS - started)) s)"
    ran=$((ran + 1))
done
echo "README blocks: $ran ran, $skipped skipped, $failed failed"
[ "$failed" = 0 ]
