#!/usr/bin/env bash
# The simulator's oracle: runs fixed scenarios (three schedulers, fairness with
# preemption, Mercury task types, LRAs) and compares every tasks.csv byte for byte
# with tests/oracle/, written by an earlier build. A refactor must pass unchanged.
#
#   scripts/sim-oracle.sh           # check (also part of `cargo test`)
#   scripts/sim-oracle.sh --bless   # rewrite tests/oracle/ on purpose; say why in the commit
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--bless" ]; then
  export MEGHA_ORACLE_BLESS=1
elif [ -n "${1:-}" ]; then
  echo "usage: $0 [--bless]" >&2
  exit 2
fi
exec cargo test --release -p tests --test cores oracle -- --test-threads 1
