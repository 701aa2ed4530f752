#!/usr/bin/env bash
# The Megha paper's fairness setup (section VI-E, Figures 10 and 11) in the simulator:
# 4 queues with 10 %, 25 %, 15 % and 50 % shares, served by GM 0, GM 1 (second and
# third queues) and GM 2; clusters of about 200, 500 and 1,500 one-core nodes
# (3 GMs x 2 LMs); the first 300 jobs (12,200 tasks) of the Yahoo trace sample, which
# keeps every size under contention. Each size runs with and without preemption.
#
#   scripts/fairness-experiment.sh [OUT_DIR] [extra simulate flags...]
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-out/fairness}
shift || true
cargo build --release -q -p loadgen
for nodes in 200 500 1500; do
  per=$(( (nodes + 5) / 6 ))
  for preemption in true false; do
    echo "== ~${nodes} nodes ($((per * 6))), preemption ${preemption}"
    ./target/release/loadgen simulate \
      --trace data/traces/YH1_sub.tr --first-jobs 300 \
      --gms 3 --lms 2 --partition-size "$per" \
      --queues a:0.10:0,b:0.25:1,c:0.15:1,d:0.50:2 \
      --preemption "$preemption" --constraints none --seed 42 \
      --out "$out/${nodes}-preemption-${preemption}" "$@" 2>/dev/null
  done
done
