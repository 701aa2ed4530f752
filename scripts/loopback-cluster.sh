#!/usr/bin/env bash
# Starts 2 GMs, 2 LMs and 4 workers on loopback against a local RabbitMQ, prints the
# GM URLs, and stops everything on Ctrl-C. Binaries come from $BIN (default
# target/release). Example:
#   cargo build --release --bins
#   scripts/loopback-cluster.sh          # then, in another shell:
#   MEGHA_TOKEN_FILE=out/cluster-secrets/admin-token \
#   MEGHA_AMQP_PASSWORD_FILE=out/cluster-secrets/broker/megha-loadgen \
#   target/release/loadgen replay --gm "$(cat out/cluster-logs/gm-urls)" \
#       --amqp amqp://megha-loadgen@127.0.0.1:5672/megha \
#       --trace data/traces/YH_small.tr --speedup 10 --out out/replay
# Options (or environment):
#   --port-base N (PORT_BASE)        GMs listen on N, N+1; LMs on N+10, N+11; workers
#                                    on N+20..N+23. Default: a free block picked here.
#   --cluster-name NAME (MEGHA_CLUSTER_NAME, default megha)  the cluster's name; two
#                                    clusters with different names and port bases share
#                                    one host and one broker vhost (docs/clusters.md).
#   --shared-secret (SHARED_SECRET=1)  one cluster secret for every role (the simple
#                                    mode) instead of per-role credentials.
#   MAX_ATTEMPTS (default 3)         runs of a failed or lost task for jobs that name
#                                    no retry policy: the same default as docker compose.
# The GM URLs are printed and written to $LOGS/gm-urls (comma-separated).
# Credentials (README "Security", docs/security.md): per-role cluster credentials
# (scripts/make-role-credentials.sh: $SECRETS/roles/gm-0.toml, gm-1.toml, lm-0.toml,
# lm-1.toml, worker.toml, and the authority's ca-key) and
# an API tokens file with one admin user are made in $SECRETS (default
# out/cluster-secrets, mode 700) on the first run and reused; each process reads its
# own role's file (MEGHA_CLUSTER_SECRET_FILE), the GMs the tokens (MEGHA_TOKENS_FILE).
# Exec tasks: as root, each runs as a uid of its own (TASK_UIDS, default
# 3300000-3300999); otherwise as the user running this script (--allow-run-as-self:
# a task can then read these credentials). Each worker keeps its own data directory
# (the worker's default: one per cluster, LM and slot).
set -euo pipefail
PORT_BASE=${PORT_BASE:-}
CLUSTER=${MEGHA_CLUSTER_NAME:-megha}
SHARED_SECRET=${SHARED_SECRET:-}
while [ $# -gt 0 ]; do
  case "$1" in
    --port-base) PORT_BASE=${2:?--port-base needs a number}; shift 2 ;;
    --cluster-name) CLUSTER=${2:?--cluster-name needs a name}; shift 2 ;;
    --shared-secret) SHARED_SECRET=1; shift ;;
    -h|--help) sed -n '2,29p' "$0"; exit 0 ;;
    *) echo "unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
export MEGHA_CLUSTER_NAME="$CLUSTER"
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
block_free() { for o in 0 1 10 11 20 21 22 23; do port_free $(($1 + o)) || return 1; done; }
if [ -z "$PORT_BASE" ]; then
  for _ in $(seq 50); do
    b=$(( (RANDOM % 400) * 100 + 20000 ))
    if block_free "$b"; then PORT_BASE=$b; break; fi
  done
  [ -n "$PORT_BASE" ] || { echo "no free block of ports found; give --port-base" >&2; exit 1; }
elif ! block_free "$PORT_BASE"; then
  echo "--port-base $PORT_BASE: a port of N..N+23 (N, N+1, N+10, N+11, N+20..N+23) is taken" >&2; exit 1
fi
BIN=${BIN:-target/release}
# Broker: unless AMQP is given, a vhost of the cluster's own ($CLUSTER) and a broker
# user per role and per LM, never guest (made with rabbitmqctl; passwords in
# $SECRETS/broker/USER, mode 600, read through MEGHA_AMQP_PASSWORD_FILE): GMs as
# <cluster>-gm, LM k as <cluster>-lm<k>, loadgen as <cluster>-loadgen, each with
# its kind's permissions (only LMs write the state exchange); the GMs take LM k's
# state only from its user (--lm-broker-user, docs/security.md). Needs rabbitmqctl
# (run as root or the rabbitmq user).
AMQP=${AMQP:-}
LM_AMQP=() LM_PW=() GM_PW=
if [ -z "$AMQP" ]; then
  BROKER_DIR="${SECRETS:-out/cluster-secrets}/broker"
  # The secrets' parent (out/) with the usual mode: made under umask 077 it would
  # be 0700, and the task uids could not reach the workers' data dirs below it.
  mkdir -p "$(dirname "$(dirname "$BROKER_DIR")")"
  (umask 077; mkdir -p "$BROKER_DIR")
  rabbitmqctl -q add_vhost "$CLUSTER" 2>/dev/null || true
  broker_user() { # broker_user USER KIND: makes USER (first run) with KIND's permissions
    if [ ! -s "$BROKER_DIR/$1" ]; then
      (umask 077; head -c 24 /dev/urandom | base64 | tr -d '\n=/+' >"$BROKER_DIR/$1")
      rabbitmqctl -q delete_user "$1" >/dev/null 2>&1 || true
      rabbitmqctl -q add_user "$1" "$(cat "$BROKER_DIR/$1")" >/dev/null
    fi
    # Only LMs write the state exchange, LMs and GMs the events; loadgen only reads
    # (`loadgen broker-users --permissions KIND`: configure, write, read).
    local perms
    read -r -a perms < <("$BIN/loadgen" broker-users --cluster-name "$CLUSTER" --permissions "$2")
    rabbitmqctl -q set_permissions -p "$CLUSTER" "$1" "${perms[@]}" >/dev/null
  }
  broker_user "$CLUSTER-gm" gm
  broker_user "$CLUSTER-lm0" lm
  broker_user "$CLUSTER-lm1" lm
  broker_user "$CLUSTER-loadgen" observer
  AMQP="amqp://$CLUSTER-gm@127.0.0.1:5672/$CLUSTER" GM_PW="$BROKER_DIR/$CLUSTER-gm"
  for l in 0 1; do
    LM_AMQP[l]="amqp://$CLUSTER-lm$l@127.0.0.1:5672/$CLUSTER" LM_PW[l]="$BROKER_DIR/$CLUSTER-lm$l"
  done
  export MEGHA_LM_BROKER_USER="$CLUSTER-lm{lm}"
fi
PARTITION_SIZE=${PARTITION_SIZE:-2}
NODE_CPUS=${NODE_CPUS:-1}
LOGS=${LOGS:-out/cluster-logs}
SECRETS=${SECRETS:-out/cluster-secrets}
mkdir -p "$LOGS"
if [ ! -s "$SECRETS/admin-token" ]; then
  mkdir -p "$(dirname "$SECRETS")"
  (umask 077; mkdir -p "$SECRETS"
   head -c 32 /dev/urandom | base64 | tr -d '\n=/+' >"$SECRETS/admin-token"
   printf '[[users]]\nname = "admin"\ntoken = "%s"\nadmin = true\n' "$(cat "$SECRETS/admin-token")" >"$SECRETS/tokens.toml")
fi
# secret_of ROLE [ID]: the credential file of a process (each GM and LM its own).
if [ -n "$SHARED_SECRET" ]; then
  [ -s "$SECRETS/cluster-secret" ] || (umask 077; head -c 32 /dev/urandom | base64 | tr -d '\n=' >"$SECRETS/cluster-secret")
  secret_of() { echo "$SECRETS/cluster-secret"; }
else
  MEGHA_LOADGEN="$BIN/loadgen" "$(dirname "$0")/make-role-credentials.sh" "$SECRETS/roles" --gms 2 --lms 2 >/dev/null
  secret_of() { echo "$SECRETS/roles/$1${2:+-$2}.toml"; }
fi
gm_port() { echo $((PORT_BASE + $1)); }
lm_port() { echo $((PORT_BASE + 10 + $1)); }
GM_URLS="http://127.0.0.1:$(gm_port 0),http://127.0.0.1:$(gm_port 1)"
LM_URLS="http://127.0.0.1:$(lm_port 0),http://127.0.0.1:$(lm_port 1)"
pids=()
trap 'kill -TERM "${pids[@]}" 2>/dev/null; wait' EXIT INT TERM
common=(--gms 2 --lms 2 --partition-size "$PARTITION_SIZE" --node-cpus "$NODE_CPUS" --workers 2)
for l in 0 1; do
  # --gm-url: task starts and ends go to the GM that launched each task (its status API).
  MEGHA_CLUSTER_SECRET_FILE=$(secret_of lm $l) MEGHA_AMQP_PASSWORD_FILE=${LM_PW[l]:-} \
  "$BIN/local-master" --id $l "${common[@]}" --amqp "${LM_AMQP[l]:-$AMQP}" --listen "127.0.0.1:$(lm_port $l)" \
    --data-dir "$LOGS/lm$l-data" --gm-url "$GM_URLS" >"$LOGS/lm$l.out" 2>"$LOGS/lm$l.log" & pids+=($!)
done
if [ "$(id -u)" -eq 0 ]; then
  task_identity=(--task-uids "${TASK_UIDS:-3300000-3300999}")
else
  task_identity=(--allow-run-as-self)
fi
for l in 0 1; do for s in 0 1; do
  MEGHA_CLUSTER_SECRET_FILE=$(secret_of worker) \
  "$BIN/worker" --lm-url "http://127.0.0.1:$(lm_port $l)" --slot $s "${task_identity[@]}" --data-dir "$LOGS/w$l$s-data" \
    --listen "127.0.0.1:$((PORT_BASE + 20 + 2 * l + s))" >"$LOGS/w$l$s.out" 2>"$LOGS/w$l$s.log" & pids+=($!)
done; done
for g in 0 1; do
  MEGHA_CLUSTER_SECRET_FILE=$(secret_of gm $g) MEGHA_TOKENS_FILE="$SECRETS/tokens.toml" MEGHA_AMQP_PASSWORD_FILE=$GM_PW \
  "$BIN/global-master" --id $g --gms 2 --lm-urls "$LM_URLS" \
    --listen "127.0.0.1:$(gm_port $g)" --amqp "$AMQP" --max-attempts "${MAX_ATTEMPTS:-3}" \
    --gm-url "$GM_URLS" >"$LOGS/gm$g.out" 2>"$LOGS/gm$g.log" & pids+=($!)
done
echo "$GM_URLS" >"$LOGS/gm-urls"
echo "cluster $CLUSTER: GMs $GM_URLS (also in $LOGS/gm-urls; logs in $LOGS); API token in $SECRETS/admin-token; Ctrl-C stops all"
[ -z "$GM_PW" ] || echo "broker for loadgen: --amqp amqp://$CLUSTER-loadgen@127.0.0.1:5672/$CLUSTER with MEGHA_AMQP_PASSWORD_FILE=$BROKER_DIR/$CLUSTER-loadgen"
wait
