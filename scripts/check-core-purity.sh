#!/usr/bin/env bash
# The cores stay pure: no runtime, network or broker crate among the normal (non-dev)
# dependencies of the crates that hold the scheduling logic, nor of the simulator
# (megha-sim), which drives them and must build without any service. Fails when
# `cargo tree` itself fails (an unknown package, a broken manifest), so that "ok" is
# never printed for a tree that was not read. Run by scripts/test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
cores=(gm-core lra-placer lm-core worker-core common megha-sim)
forbidden='^(tokio|actix|actix-rt|actix-web|axum|hyper|reqwest|lapin|mio|tracing-subscriber|service-kit|global-master|local-master|worker)$'
status=0
for core in "${cores[@]}"; do
  if ! tree=$(cargo tree -p "$core" -e normal --prefix none --format '{p}'); then
    echo "error: cargo tree -p $core failed (see above)" >&2
    status=1
    continue
  fi
  found=$(printf '%s\n' "$tree" | awk '{print $1}' | sort -u | grep -E "$forbidden" || true)
  if [ -n "$found" ]; then
    echo "error: $core depends on I/O crates: $(echo "$found" | tr '\n' ' ')" >&2
    cargo tree -p "$core" -e normal -i "$(echo "$found" | head -1)" >&2 || true
    status=1
  else
    echo "ok: $core has no I/O dependency"
  fi
done
exit $status
