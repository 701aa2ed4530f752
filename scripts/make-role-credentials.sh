#!/usr/bin/env bash
# Writes the cluster's credential files into DIR (mode 700): gm.toml (or, with
# --gms N, gm-0.toml .. one per GM), lm.toml (or lm-0.toml .. with --lms N) and
# worker.toml, each holding one ed25519 key and its certificate by the cluster's
# credential authority, whose key is DIR/ca-key (keep it; no process needs it). See
# service-kit/src/roles.rs: each process signs its internal requests with its key,
# and no credential is ever sent to a callee; a per-process file is usable only by
# the process of that --id, and its requests may speak only for that GM or LM.
# Give each process its own file through MEGHA_CLUSTER_SECRET_FILE (or
# --cluster-secret-file); never give a worker a GM's or an LM's file. Files of this
# authority already in DIR are kept and missing ones issued (run again with a larger
# --lms to add an LM); files of earlier forms (bearer tokens) are replaced.
#
# The keys are made by `loadgen role-credentials` (ed25519, which a shell cannot
# compute): $MEGHA_LOADGEN, else `loadgen` on PATH (the image), else this checkout's
# target/release or target/debug build.
#
#   scripts/make-role-credentials.sh out/role-credentials --gms 2 --lms 2
set -euo pipefail
dir=${1:?usage: make-role-credentials.sh DIR [--gms N] [--lms N]}
shift
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
exec "$loadgen" role-credentials "$dir" "$@"
