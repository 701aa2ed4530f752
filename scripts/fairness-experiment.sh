#!/usr/bin/env bash
# The Megha paper's fairness setup (section VI-E, Figures 10 and 11) in the simulator:
# 4 queues with 10 %, 25 %, 15 % and 50 % shares, served by GM 0, GM 1 (second and
# third queues) and GM 2; clusters of about 200, 500 and 1,500 one-core nodes
# (3 GMs x 2 LMs); the first 300 jobs (12,200 tasks) of the Yahoo trace sample, which
# keeps every size under contention. Each size runs with and without preemption.
# Now `loadgen experiment fairness` (this script calls it): OUT_DIR/summary.json and
# one directory of simulate reports per run.
#
#   scripts/fairness-experiment.sh [OUT_DIR] [extra experiment flags, e.g. --preempt-*]
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-out/fairness}
shift || true
cargo build --release -q -p loadgen
exec ./target/release/loadgen experiment fairness --out "$out" "$@"
