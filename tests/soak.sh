#!/usr/bin/env bash
# Long crash soak (manual): many more SIGKILL trials than CI runs.
#   tests/soak.sh [trials-per-backend]   (default 5000)
set -euo pipefail
cd "$(dirname "$0")/.."
DSH_CRASH_TRIALS="${1:-5000}" cargo test --release -p dsh-session-ffi-impl --test crash -- --nocapture --test-threads=2
