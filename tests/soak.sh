#!/usr/bin/env bash
# Long soaks (manual), far beyond what CI runs:
#   tests/soak.sh [trials-per-backend] [race-seconds-per-backend]
# SIGKILL crash trials of a host appending through the store API
# (tests/crash.rs, default 5000 a backend), then racing
# handles on one store (tests/concurrent_acks.rs, default 120 s a backend).
# PostgreSQL joins both with DSH_TEST_POSTGRES_URL set.
set -euo pipefail
cd "$(dirname "$0")/.."
DSH_CRASH_TRIALS="${1:-5000}" cargo test --release -p dsh-session --test crash -- --nocapture --test-threads=2
DSH_RACE_SECS="${2:-120}" cargo test --release -p dsh-session --test concurrent_acks -- --nocapture --test-threads=1
