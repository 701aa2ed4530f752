#!/usr/bin/env bash
# Mercury (sections 5 and 7.4) in the simulator: GUARANTEED vs QUEUEABLE work on the
# same traces and cluster. Workloads: short tasks (jobs of ten 2 s tasks every 0.16 s,
# 125 % of capacity) and mixed tasks (per job 8 x 2 s + 2 x 50 s, one job per second,
# 116 % of capacity), on 100 one-core nodes (2 GMs x 2 LMs x 25). Policies: only-G
# (all through the designated GM), only-Q, 50%-Q and <10s-70%-Q (hybrid-GQ), with the
# Mercury paper's 3 s heartbeat and Megha's 10 s. Prints task throughput (and the gain
# over only-G), job latency and the QUEUEABLE containers killed.
#
#   scripts/mercury-experiment.sh [OUT_DIR] [extra simulate flags...]
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-out/mercury}
shift || true
# The traces are small and committed; regenerate them if missing.
[ -f data/traces/mercury_short.tr ] || awk 'BEGIN{for(j=0;j<1875;j++){printf "%.3f 10 2.0", j*0.16; for(i=0;i<10;i++) printf " 2.0"; printf "\n"}}' > data/traces/mercury_short.tr
[ -f data/traces/mercury_mixed.tr ] || awk 'BEGIN{for(j=0;j<300;j++){printf "%.3f 10 11.6", j*1.0; for(i=0;i<10;i++) printf " %s", (i%5==4)?"50.0":"2.0"; printf "\n"}}' > data/traces/mercury_mixed.tr
target=${CARGO_TARGET_DIR:-target}
cargo build --release -q -p loadgen
# The experiment itself is `loadgen experiment mercury` (summary.json and a table).
exec "$target/release/loadgen" experiment mercury --out "$out" -- "$@"
