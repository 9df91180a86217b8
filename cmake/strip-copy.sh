#!/bin/sh
# strip-copy.sh IN OUT: copy a Mach-O library without its debug symbols
# (macOS has no objcopy; `strip -S` removes debug info, keeps the symbols).
set -e
cp "$1" "$2"
strip -S "$2"
