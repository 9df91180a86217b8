#!/usr/bin/env bash
# The Go module of a release, with the prebuilt static libraries inside
# (docs/packaging.md, "The Go module"):
#
#   scripts/go-module.sh           # target/go-proxy/: a module proxy on the file system
#   scripts/go-module.sh --stage   # bindings/go/lib/: the same files in the checkout
#
# Input: the release archives in target/dist (scripts/dist.sh, one per
# platform; DSH_DIST_DIR overrides), each giving
# lib/<goos>_<goarch>/libdsh_session.a; the header comes into lib/include/
# and the licences into lib/. The module is the tracked files of bindings/go
# plus that lib/ directory, at version v<version> (Cargo.toml's version, as
# the archives').
#
# Without --stage it writes, under target/go-proxy (DSH_GO_PROXY_DIR
# overrides), what a module proxy serves (the layout of `go mod download`'s
# cache/download):
#   github.com/dsh-session/dsh-session/bindings/go/@v/list
#   github.com/dsh-session/dsh-session/bindings/go/@v/v<version>.{info,mod,zip}
# so that GOPROXY=file://$PWD/target/go-proxy go get …@v<version> works with
# no checkout and no installed library. With --stage it fills bindings/go/lib/
# (ignored by git), so that a checkout builds without pkg-config, and a
# release commit can add it (git add -f bindings/go/lib).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
module=github.com/dsh-session/dsh-session/bindings/go

stage=
case ${1:-} in
    --stage) stage=1 ;;
    "") ;;
    *) echo "usage: scripts/go-module.sh [--stage]" >&2; exit 2 ;;
esac

. scripts/lib.sh
ensure_commands python3:python3 tar:tar
version=$(sed -n 's/^#define DSH_VERSION_STRING "\(.*\)"$/\1/p' include/dsh_session.h)
dist=${DSH_DIST_DIR:-$root/target/dist}
epoch=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}

work=$(mktemp -d "${TMPDIR:-/tmp}/dsh-go-module.XXXXXX")
trap 'rm -rf "$work"' EXIT
lib=$work/lib
mkdir -p "$lib/include"

# The platforms of the archives present, as Go names them.
found=()
for a in "$dist"/dsh-session-"$version"-*.tar.gz; do
    [ -f "$a" ] || continue
    plat=${a##*/dsh-session-"$version"-}
    plat=${plat%.tar.gz}
    case $plat in
        linux-x86_64) goplat=linux_amd64 ;;
        linux-aarch64) goplat=linux_arm64 ;;
        macos-x86_64) goplat=darwin_amd64 ;;
        macos-aarch64) goplat=darwin_arm64 ;;
        *) echo "go-module: skipping $a (no Go platform for $plat)" >&2; continue ;;
    esac
    if [ -f "$a.sha256" ]; then
        (cd "$dist" && if command -v sha256sum >/dev/null; then sha256sum -c --quiet "${a##*/}.sha256"
        else shasum -a 256 -c --quiet "${a##*/}.sha256"; fi) ||
            { echo "go-module: $a does not match its .sha256" >&2; exit 1; }
    fi
    top=dsh-session-$version-$plat
    mkdir -p "$work/x/$plat" "$lib/$goplat"
    tar -xzf "$a" -C "$work/x/$plat" "$top/lib/libdsh_session.a" "$top/include/dsh_session.h" \
        "$top/share/doc/dsh_session"
    cp "$work/x/$plat/$top/lib/libdsh_session.a" "$lib/$goplat/"
    # One header for every platform: they are the same file.
    if [ -f "$lib/include/dsh_session.h" ]; then
        cmp -s "$lib/include/dsh_session.h" "$work/x/$plat/$top/include/dsh_session.h" ||
            { echo "go-module: the header of $a differs from the other archives'" >&2; exit 1; }
    fi
    cp "$work/x/$plat/$top/include/dsh_session.h" "$lib/include/"
    cp "$work/x/$plat/$top"/share/doc/dsh_session/LICENSE-* "$lib/"
    found+=("$goplat")
done
((${#found[@]})) || { echo "go-module: no release archive of $version in $dist (run scripts/dist.sh)" >&2; exit 1; }
cmp -s "$lib/include/dsh_session.h" include/dsh_session.h ||
    { echo "go-module: the archives' header is not include/dsh_session.h (rebuild them: scripts/dist.sh)" >&2; exit 1; }
# The platforms with a link_<goos>_<goarch>.go whose archive is missing.
missing=()
for f in bindings/go/link_*_*.go; do
    p=${f#bindings/go/link_}
    p=${p%.go}
    [ -d "$lib/$p" ] || missing+=("$p")
done
echo "go-module: v$version with lib/{${found[*]}}"
((${#missing[@]} == 0)) ||
    echo "go-module: no archive for ${missing[*]}: a build there needs -tags dshsession_system (a release has them all)"

if [ -n "$stage" ]; then
    rm -rf bindings/go/lib
    cp -r "$lib" bindings/go/lib
    echo "go-module: staged bindings/go/lib ($(du -sh bindings/go/lib | cut -f1))"
    exit 0
fi

# The module's files: bindings/go as git tracks it (the working tree's
# copies), plus lib/. A file git does not know would silently be left out.
untracked=$(git ls-files --others --exclude-standard bindings/go)
[ -z "$untracked" ] ||
    { echo "go-module: not in the module until git add: $(echo "$untracked" | tr '\n' ' ')" >&2; exit 1; }
mod=$work/mod
mkdir -p "$mod"
git ls-files -z bindings/go | while IFS= read -r -d '' f; do
    [ "${f#bindings/go/lib/}" = "$f" ] || continue
    mkdir -p "$mod/$(dirname "${f#bindings/go/}")"
    cp "$f" "$mod/${f#bindings/go/}"
done
cp -r "$lib" "$mod/lib"

proxy=${DSH_GO_PROXY_DIR:-$root/target/go-proxy}
at=$proxy/$module/@v
mkdir -p "$at"
# The zip as the go command wants it: every file under <module>@<version>/.
python3 - "$mod" "$at/v$version.zip" "$module@v$version" "$epoch" <<'EOF'
import os, sys, time, zipfile
src, out, prefix, epoch = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
stamp = time.gmtime(max(epoch, 315532800))[:6]
files = []
for d, _, names in os.walk(src):
    for n in names:
        files.append(os.path.relpath(os.path.join(d, n), src))
with zipfile.ZipFile(out + ".tmp", "w", zipfile.ZIP_DEFLATED, compresslevel=9) as z:
    for rel in sorted(files):
        info = zipfile.ZipInfo(prefix + "/" + rel.replace(os.sep, "/"), stamp)
        info.compress_type = zipfile.ZIP_DEFLATED
        info.external_attr = 0o644 << 16
        with open(os.path.join(src, rel), "rb") as f:
            z.writestr(info, f.read())
os.replace(out + ".tmp", out)
EOF
cp "$mod/go.mod" "$at/v$version.mod"
printf '{"Version":"v%s","Time":"%s"}\n' "$version" "$(date -u -d "@$epoch" +%Y-%m-%dT%H:%M:%SZ 2>/dev/null ||
    date -u -r "$epoch" +%Y-%m-%dT%H:%M:%SZ)" >"$at/v$version.info"
{ [ -f "$at/list" ] && cat "$at/list"; echo "v$version"; } | sort -uV >"$at/list.tmp"
mv "$at/list.tmp" "$at/list"
echo "go-module: $at/v$version.zip ($(du -h "$at/v$version.zip" | cut -f1)); GOPROXY=file://$proxy"
