#!/usr/bin/env bash
# Prints the Secret `megha-secrets` with fresh random credentials and certificates:
#   gm-K.toml, lm-K.toml, worker.toml  the cluster's credentials, one per GM and LM
#                                   (scripts/make-role-credentials.sh --gms --lms; each
#                                   pod reads its own: gm-$(MEGHA_GM_ID).toml)
#   tokens.toml, admin-token        API users: one admin
#   amqp-password-gm, -lmK, -loadgen  the broker users megha-gm, megha-lmK, megha-loadgen
#   rabbitmq-definitions.json       those users (salted hashes) and their permissions
#                                   (loadgen broker-users), loaded by the broker
#   ca.pem                          the cluster's private CA (`loadgen certs`)
#   gm.pem, gm-key.pem              HTTPS of megha-gm-N.megha-gm
#   lm.pem, lm-key.pem              HTTPS of megha-lm-N.megha-lm
#   rabbitmq.pem, rabbitmq-key.pem  amqps:// of megha-rabbitmq
#   worker-issuer.pem, -key.pem     workers issue their own certificate for their pod
#                                   IP at start (name-constrained to WORKER_NETWORKS)
# The CA's key is not kept: to add names later, run this again (new credentials).
#
#   k8s/make-secrets.sh | kubectl -n megha apply -f -         # once, before k8s/
#   kubectl -n megha get secret megha-secrets -o jsonpath='{.data.admin-token}' | base64 -d
#
# Needs the `loadgen` binary: $LOADGEN, or on PATH, or target/release or target/debug
# of this checkout (cargo build --release --bins). Environment: GMS [3], LMS [3] (the
# replicas of megha-gm and megha-lm), WORKER_NETWORKS [10.0.0.0/8,172.16.0.0/12,
# 192.168.0.0/16] (the pod network).
#
# Re-running it replaces every credential: restart every pod afterwards (the broker
# loads the definitions again at its start).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
loadgen=${LOADGEN:-}
if [ -z "$loadgen" ]; then
  for c in "$(command -v loadgen || true)" "$here/../target/release/loadgen" "$here/../target/debug/loadgen"; do
    if [ -n "$c" ] && [ -x "$c" ]; then loadgen=$c; break; fi
  done
fi
[ -n "$loadgen" ] || {
  echo "error: k8s/make-secrets.sh needs the loadgen binary for the certificates: set LOADGEN=PATH or run cargo build --release --bins" >&2
  exit 1
}
GMS=${GMS:-3}
LMS=${LMS:-3}
WORKER_NETWORKS=${WORKER_NETWORKS:-10.0.0.0/8,172.16.0.0/12,192.168.0.0/16}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
rand() { head -c "$1" /dev/urandom | base64 | tr -d '\n=/+'; }
b64() { base64 <"$1" | tr -d '\n'; }
names() { local out="" i; for i in $(seq 0 $(($2 - 1))); do out="$out${out:+,}$1-$i.$1"; done; echo "$out"; }
rand 32 >"$tmp/admin-token"
printf '[[users]]\nname = "admin"\ntoken = "%s"\nadmin = true\n' "$(cat "$tmp/admin-token")" >"$tmp/tokens.toml"
MEGHA_LOADGEN="$loadgen" "$here/../scripts/make-role-credentials.sh" "$tmp/roles" --gms "$GMS" --lms "$LMS" >/dev/null
brokers=(gm=gm loadgen=observer)
for k in $(seq 0 $((LMS - 1))); do brokers+=("lm$k=lm"); done
definitions=()
for b in "${brokers[@]}"; do
  rand 24 >"$tmp/amqp-password-${b%%=*}"
  definitions+=(--user "megha-${b%%=*}=${b#*=}=$tmp/amqp-password-${b%%=*}")
done
"$loadgen" broker-users --cluster-name "${MEGHA_CLUSTER_NAME:-megha}" --vhost / "${definitions[@]}" \
  >"$tmp/rabbitmq-definitions.json"
"$loadgen" certs --out "$tmp/tls" \
  --server "gm=$(names megha-gm "$GMS")" \
  --server "lm=$(names megha-lm "$LMS")" \
  --server "rabbitmq=megha-rabbitmq" \
  --worker-networks "$WORKER_NETWORKS" >/dev/null
cat <<YAML
apiVersion: v1
kind: Secret
metadata:
  name: megha-secrets
  labels: {app.kubernetes.io/part-of: megha}
type: Opaque
data:
  worker.toml: $(b64 "$tmp/roles/worker.toml")
  admin-token: $(b64 "$tmp/admin-token")
  tokens.toml: $(b64 "$tmp/tokens.toml")
  rabbitmq-definitions.json: $(b64 "$tmp/rabbitmq-definitions.json")
YAML
for f in "$tmp"/roles/gm-*.toml "$tmp"/roles/lm-*.toml "$tmp"/amqp-password-*; do
  echo "  $(basename "$f"): $(b64 "$f")"
done
for f in ca gm gm-key lm lm-key rabbitmq rabbitmq-key worker-issuer worker-issuer-key; do
  echo "  $f.pem: $(b64 "$tmp/tls/$f.pem")"
done
