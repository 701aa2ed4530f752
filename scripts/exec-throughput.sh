#!/usr/bin/env bash
# How fast the loopback cluster starts real commands, and where the CPU goes
# (issue 31's measure): starts scripts/loopback-cluster.sh (2 GMs, 2 LMs, 4 workers,
# 8 one-core nodes), runs `loadgen bench-exec --worker-tasks 1 --gm URL --tasks N
# --cpu-millis 1000` (N one-task jobs of 0 ms synthetic tasks, then N of exec
# `true`), and prints, besides the bench's own lines, the CPU each kind of process
# used during each phase (from /proc/<pid>/stat at its first submission and at its
# last task's end, so not the reading of the task records after it; a
# command's CPU is counted under the process that reaped it: `true` under
# megha-task-exec) with its thread switches per task (voluntary and not, from
# /proc/<pid>/task/*/status), and the machine's CPU split. Stops the cluster at the end.
#   cargo build --release --bins
#   scripts/exec-throughput.sh [--tasks N] [--runs R] [--submitters S]   (as root)
# Options (or environment): --tasks N (TASKS, default 2000), --runs R (RUNS, default
# 1; one cluster per run), --submitters S (SUBMITTERS, default 1: POSTs in flight at
# once), BIN (default target/release) to measure another build.
set -euo pipefail
cd "$(dirname "$0")/.."
TASKS=${TASKS:-2000}
RUNS=${RUNS:-1}
SUBMITTERS=${SUBMITTERS:-1}
BIN=${BIN:-target/release}
while [ $# -gt 0 ]; do
  case "$1" in
    --tasks) TASKS=$2; shift 2 ;;
    --runs) RUNS=$2; shift 2 ;;
    --submitters) SUBMITTERS=$2; shift 2 ;;
    -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "exec-throughput.sh: unknown option $1 (try --help)" >&2; exit 2 ;;
  esac
done
for b in loadgen global-master local-master worker megha-task-exec; do
  [ -x "$BIN/$b" ] || { echo "exec-throughput.sh: $BIN/$b is missing: cargo build --release --bins" >&2; exit 2; }
done
snapshot() { # per process: comm, own CPU ticks, reaped children's CPU ticks, thread switches
  # One cat for all (a cat per process cost the run about 0.5 ms per task); the
  # switches (voluntary and not) summed over the threads alive at the snapshot.
  { grep -s -H ctxt_switches /proc/[0-9]*/task/[0-9]*/status || true
    echo "--"
    cat /proc/[0-9]*/stat 2>/dev/null || true; } | awk '
    !stat && $0 == "--" { stat = 1; next }
    !stat { split($1, p, "/"); sw[p[3]] += $NF; next }
    {
    line = $0; lp = index(line, "("); rp = 0
    for (i = length(line); i > 0; i--) if (substr(line, i, 1) == ")") { rp = i; break }
    if (!lp || !rp) next
    comm = substr(line, lp + 1, rp - lp - 1); gsub(/ /, "_", comm)
    split(substr(line, rp + 2), f, " ")
    pid = substr(line, 1, lp - 2)
    print pid, comm, f[12] + f[13], f[14] + f[15], sw[pid] + 0
  }'
}
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
hz=$(getconf CLK_TCK)
for run in $(seq 1 "$RUNS"); do
  rm -f out/cluster-logs/gm-urls
  BIN=$BIN scripts/loopback-cluster.sh >"$logs/cluster.log" 2>&1 &
  cluster=$!
  for _ in $(seq 1 120); do [ -s out/cluster-logs/gm-urls ] && break; sleep 1; done
  if [ ! -s out/cluster-logs/gm-urls ]; then
    echo "exec-throughput.sh: the loopback cluster did not start; its log:" >&2
    tail -20 "$logs/cluster.log" >&2
    kill -TERM "$cluster" 2>/dev/null || true
    exit 1
  fi
  sleep 3
  gm=$(cut -d, -f1 out/cluster-logs/gm-urls)
  echo "== run $run of $RUNS: $TASKS tasks of each executor ($BIN)"
  # A CPU snapshot as each phase starts submitting and as its last task ends: the
  # CPU of each phase apart, without the reading of its tasks' records after it.
  phase=0
  while IFS= read -r line; do
    case "$line" in
      e2e*': submitting '*)
        phase=$((phase + 1))
        head -1 /proc/stat >"$logs/stat${phase}a"; snapshot >"$logs/s${phase}a" ;;
      e2e*': all ended in '*)
        head -1 /proc/stat >"$logs/stat${phase}b"; snapshot >"$logs/s${phase}b" ;;
      e2e*) echo "$line" ;;
    esac
  done < <(MEGHA_TOKEN_FILE=out/cluster-secrets/admin-token "$BIN/loadgen" bench-exec --worker-tasks 1 \
    --gm "$gm" --tasks "$TASKS" --submitters "$SUBMITTERS" --cpu-millis 1000)
  if [ "$phase" != 2 ] || [ ! -s "$logs/s2b" ]; then
    echo "exec-throughput.sh: the bench did not end both phases" >&2
    kill -TERM "$cluster"; wait "$cluster" 2>/dev/null || true
    exit 1
  fi
  for p in 1 2; do
    name=$([ "$p" = 1 ] && echo "synthetic 0 ms" || echo "exec true")
    echo "CPU during the $name phase, by process kind (own CPU per task of its $TASKS):"
    awk -v hz="$hz" -v tasks="$TASKS" '
      # Keyed by pid: a kernel worker renames itself with its work item, so a
      # name-keyed delta counted such a thread'"'"'s whole lifetime (up to 1 ms/task).
      # Thread switches: of the threads alive at each snapshot (a thread or
      # process that ended within the phase, such as `true`, is not counted).
      NR == FNR { own[$1] = $3; kids[$1] = $4; sw[$1] = $5; next }
      { n = $2; if (n ~ /^kworker/) n = "kworker"; o[n] += $3 - own[$1]; c[n] += $4 - kids[$1]; s[n] += $5 - sw[$1] }
      END {
        for (n in o) if (o[n] + c[n] >= hz / 20)
          printf "  %-28s own %7.2f s %6.3f ms/task   reaped children %6.2f s   thread switches %5.1f/task\n", n, o[n] / hz, 1000 * o[n] / hz / tasks, c[n] / hz, s[n] / tasks
      }' "$logs/s${p}a" "$logs/s${p}b" | sort -k3 -rn
    paste "$logs/stat${p}a" "$logs/stat${p}b" | awk -v hz="$hz" -v tasks="$TASKS" '{
      busy = ($13 - $2) + ($14 - $3) + ($15 - $4) + ($18 - $7) + ($19 - $8)
      printf "  machine: user %.2f s, system %.2f s, idle %.2f s, softirq %.2f s, steal %.2f s; busy %.3f ms/task\n",
        ($13 - $2) / hz, ($15 - $4) / hz, ($16 - $5) / hz, ($19 - $8) / hz, ($20 - $9) / hz, 1000 * busy / hz / tasks }'
  done
  kill -TERM "$cluster"; wait "$cluster" 2>/dev/null || true
done
