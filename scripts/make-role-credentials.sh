#!/usr/bin/env bash
# Writes per-role cluster credentials into DIR (mode 700): gm.toml, lm.toml and
# worker.toml, each holding that role's own ed25519 key and every role's public key
# (see service-kit/src/roles.rs): each role signs its internal requests with its key,
# and no credential is ever sent to a callee. Give each process its role's file
# through MEGHA_CLUSTER_SECRET_FILE (or --cluster-secret-file); never give a worker
# the gm.toml or lm.toml. A complete set already in DIR is kept (delete DIR to make
# new ones); files of the earlier form (bearer tokens) are replaced.
#
# The keys are made by `loadgen role-credentials` (ed25519, which a shell cannot
# compute): $MEGHA_LOADGEN, else `loadgen` on PATH (the image), else this checkout's
# target/release or target/debug build.
#
#   scripts/make-role-credentials.sh out/role-credentials
set -euo pipefail
dir=${1:?usage: make-role-credentials.sh DIR}
root=$(cd "$(dirname "$0")/.." && pwd)
loadgen=${MEGHA_LOADGEN:-}
if [ -z "$loadgen" ]; then
  for candidate in "$(command -v loadgen || true)" "$root/target/release/loadgen" "$root/target/debug/loadgen"; do
    if [ -n "$candidate" ] && [ -x "$candidate" ]; then loadgen=$candidate; break; fi
  done
fi
if [ -z "$loadgen" ]; then
  echo "make-role-credentials.sh: needs the loadgen binary to make the keys: build it (cargo build --release -p loadgen) or set MEGHA_LOADGEN" >&2
  exit 1
fi
umask 077
exec "$loadgen" role-credentials "$dir"
