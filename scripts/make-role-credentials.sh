#!/usr/bin/env bash
# Writes per-role cluster credentials into DIR (mode 700): gm.toml, lm.toml and
# worker.toml, each holding that role's own token and the SHA-256 of every role's
# token (see service-kit/src/roles.rs). Give each process its role's file through
# MEGHA_CLUSTER_SECRET_FILE (or --cluster-secret-file); never give a worker the
# gm.toml or lm.toml. Existing files are kept (delete DIR to make new ones).
#
#   scripts/make-role-credentials.sh out/role-credentials
set -euo pipefail
dir=${1:?usage: make-role-credentials.sh DIR}
if [ -s "$dir/gm.toml" ] && [ -s "$dir/lm.toml" ] && [ -s "$dir/worker.toml" ]; then
  echo "role credentials already in $dir (kept)"; exit 0
fi
umask 077
mkdir -p "$dir"
declare -A token digest
for role in gm lm worker; do
  token[$role]=$(head -c 32 /dev/urandom | base64 | tr -d '\n=/+')
  digest[$role]=$(printf '%s' "${token[$role]}" | sha256sum | cut -d' ' -f1)
done
for role in gm lm worker; do
  printf 'role = "%s"\ntoken = "%s"\n\n[digests]\ngm = "%s"\nlm = "%s"\nworker = "%s"\n' \
    "$role" "${token[$role]}" "${digest[gm]}" "${digest[lm]}" "${digest[worker]}" >"$dir/$role.toml"
done
echo "role credentials written to $dir: gm.toml, lm.toml, worker.toml (one per role; keep them apart)"
