#!/usr/bin/env bash
# Starts 2 GMs, 2 LMs and 4 workers on loopback against a local RabbitMQ, prints the
# GM URLs, and stops everything on Ctrl-C. Binaries come from $BIN (default
# target/release). Example:
#   cargo build --release --bins
#   scripts/loopback-cluster.sh          # then, in another shell:
#   target/release/loadgen replay --gm http://127.0.0.1:8080,http://127.0.0.1:8081 \
#       --trace data/traces/YH_small.tr --speedup 10 --out out/replay
set -euo pipefail
BIN=${BIN:-target/release}
AMQP=${AMQP:-amqp://guest:guest@127.0.0.1:5672/%2f}
PARTITION_SIZE=${PARTITION_SIZE:-2}
NODE_CPUS=${NODE_CPUS:-1}
LOGS=${LOGS:-out/cluster-logs}
mkdir -p "$LOGS"
pids=()
trap 'kill -TERM "${pids[@]}" 2>/dev/null; wait' EXIT INT TERM
common=(--gms 2 --lms 2 --partition-size "$PARTITION_SIZE" --node-cpus "$NODE_CPUS" --workers 2 --amqp "$AMQP")
for l in 0 1; do
  # --gm-url: task starts and ends go to the GM that launched each task (its status API).
  "$BIN/local-master" --id $l "${common[@]}" --listen 127.0.0.1:910$l \
    --gm-url http://127.0.0.1:8080,http://127.0.0.1:8081 >"$LOGS/lm$l.out" 2>"$LOGS/lm$l.log" & pids+=($!)
done
for l in 0 1; do for s in 0 1; do
  "$BIN/worker" --lm-url http://127.0.0.1:910$l --slot $s --listen 127.0.0.1:92$l$s >"$LOGS/w$l$s.out" 2>"$LOGS/w$l$s.log" & pids+=($!)
done; done
for g in 0 1; do
  "$BIN/global-master" --id $g --gms 2 --lm-urls http://127.0.0.1:9100,http://127.0.0.1:9101 \
    --listen 127.0.0.1:808$g --amqp "$AMQP" \
    --gm-url http://127.0.0.1:8080,http://127.0.0.1:8081 >"$LOGS/gm$g.out" 2>"$LOGS/gm$g.log" & pids+=($!)
done
echo "GMs: http://127.0.0.1:8080,http://127.0.0.1:8081 (logs in $LOGS); Ctrl-C stops all"
wait
