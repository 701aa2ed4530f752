#!/usr/bin/env bash
# The cores stay pure: no runtime, network or broker crate among the normal (non-dev)
# dependencies of the crates that hold the scheduling logic. Run by scripts/test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
cores=(gm-core lra-placer lm-core worker-core common)
forbidden='^(tokio|actix|actix-rt|actix-web|axum|hyper|reqwest|lapin|mio|tracing-subscriber|service-kit)$'
status=0
for core in "${cores[@]}"; do
  found=$(cargo tree -p "$core" -e normal --prefix none --format '{p}' 2>/dev/null \
    | awk '{print $1}' | sort -u | grep -E "$forbidden" || true)
  if [ -n "$found" ]; then
    echo "error: $core depends on I/O crates: $(echo "$found" | tr '\n' ' ')" >&2
    cargo tree -p "$core" -e normal -i "$(echo "$found" | head -1)" >&2 || true
    status=1
  else
    echo "ok: $core has no I/O dependency"
  fi
done
exit $status
