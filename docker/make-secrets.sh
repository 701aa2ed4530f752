#!/bin/bash
# megha-make-secrets: what the compose `secrets` service runs (docker-compose.yml).
#
# On the first run, into $SECRETS (the volume megha-secrets, which no other service
# mounts): the cluster's credentials (megha-make-role-credentials: roles/ca-key,
# roles/gm-K.toml and lm-K.toml, one per GM and LM, and worker.toml), an API tokens file with one admin (token in
# admin-token) and the broker users' passwords (broker/USER: megha-gm, megha-lmK,
# megha-loadgen). With
# MEGHA_TLS=1 (docker-compose.tls.yml) also a CA and certificates (`loadgen certs`,
# in tls/): one for the GMs, one for the LMs, one for the broker, and the worker
# issuer, with which each worker issues its own certificate at start.
#
# On every run, copies to each process's volume ($ROLES/NAME) only what it needs (GM
# K's credential gm-K.toml as gm.toml in gm-K, LM K's as lm.toml in lm-K), and writes
# the broker's configuration into $BROKER_CONF:
#   gm-K     gm.toml tokens.toml amqp-user amqp-password   (+ ca.pem gm.pem gm-key.pem)
#   lm-K     lm.toml amqp-user amqp-password               (+ ca.pem lm.pem lm-key.pem)
#   worker   worker.toml                         (+ ca.pem worker-issuer.pem worker-issuer-key.pem)
#   loadgen  admin-token amqp-user amqp-password (+ ca.pem)
#   broker   rabbitmq.conf definitions.json    (+ ca.pem rabbitmq.pem rabbitmq-key.pem)
# Directories (for a run outside the container): SECRETS [/secrets], ROLES [/role],
# BROKER_CONF [/broker-conf]. Names: MEGHA_GMS and MEGHA_LMS [3] (global-master-N,
# local-master-N); MEGHA_WORKER_NETWORKS [private ranges] where workers' addresses lie.
set -eu
umask 077
SECRETS=${SECRETS:-/secrets}
ROLES=${ROLES:-/role}
BROKER_CONF=${BROKER_CONF:-/broker-conf}
rand() { head -c "$1" /dev/urandom | base64 | tr -d '\n=/+'; }

if [ ! -s "$SECRETS/admin-token" ]; then
  rand 32 >"$SECRETS/admin-token"
  printf '[[users]]\nname = "admin"\ntoken = "%s"\nadmin = true\n' "$(cat "$SECRETS/admin-token")" >"$SECRETS/tokens.toml"
fi
GMS=${MEGHA_GMS:-3}
LMS=${MEGHA_LMS:-3}
# Broker users, each with its kind's permissions (only LMs write the state exchange,
# LMs and GMs the events; loadgen reads): megha-gm for the GMs, megha-lmK per LM,
# megha-loadgen. Passwords in $SECRETS/broker/USER; each process's volume gets its
# user's name (amqp-user) and password (amqp-password).
mkdir -p "$SECRETS/broker"
broker_users=(megha-gm=gm megha-loadgen=observer)
for k in $(seq 0 $((LMS - 1))); do broker_users+=("megha-lm$k=lm"); done
definitions=()
for entry in "${broker_users[@]}"; do
  user=${entry%%=*}
  [ -s "$SECRETS/broker/$user" ] || rand 24 >"$SECRETS/broker/$user"
  definitions+=(--user "$entry=$SECRETS/broker/$user")
done
give_broker_user() { # give_broker_user USER DIR
  printf '%s\n' "$1" >"$2/amqp-user"
  cp "$SECRETS/broker/$1" "$2/amqp-password"
}
megha-make-role-credentials "$SECRETS/roles" --gms "$GMS" --lms "$LMS" >/dev/null
mkdir -p "$ROLES/worker" "$ROLES/loadgen"
for k in $(seq 0 $((GMS - 1))); do
  mkdir -p "$ROLES/gm-$k"
  cp "$SECRETS/roles/gm-$k.toml" "$ROLES/gm-$k/gm.toml"
  cp "$SECRETS/tokens.toml" "$ROLES/gm-$k/"
  give_broker_user megha-gm "$ROLES/gm-$k"
done
for k in $(seq 0 $((LMS - 1))); do
  mkdir -p "$ROLES/lm-$k"
  cp "$SECRETS/roles/lm-$k.toml" "$ROLES/lm-$k/lm.toml"
  give_broker_user "megha-lm$k" "$ROLES/lm-$k"
done
cp "$SECRETS/roles/worker.toml" "$ROLES/worker/"
# Read by the worker (root) only: its tasks run as other uids (--task-uids).
chmod 0400 "$ROLES/worker/worker.toml"
cp "$SECRETS/admin-token" "$ROLES/loadgen/"
give_broker_user megha-loadgen "$ROLES/loadgen"

listeners='listeners.tcp.default = 5672'
if [ "${MEGHA_TLS:-}" = 1 ]; then
  names() { local out="" i; for i in $(seq 0 $(($2 - 1))); do out="$out${out:+,}$1-$i"; done; echo "$out"; }
  loadgen certs --out "$SECRETS/tls" \
    --server "gm=$(names global-master "$GMS"),global-master-0-standby" \
    --server "lm=$(names local-master "$LMS")" \
    --server "rabbitmq=rabbitmq" \
    --worker-networks "${MEGHA_WORKER_NETWORKS:-10.0.0.0/8,172.16.0.0/12,192.168.0.0/16}" >/dev/null
  t="$SECRETS/tls"
  for k in $(seq 0 $((GMS - 1))); do cp "$t/ca.pem" "$t/gm.pem" "$t/gm-key.pem" "$ROLES/gm-$k/"; done
  for k in $(seq 0 $((LMS - 1))); do cp "$t/ca.pem" "$t/lm.pem" "$t/lm-key.pem" "$ROLES/lm-$k/"; done
  cp "$t/ca.pem" "$t/worker-issuer.pem" "$t/worker-issuer-key.pem" "$ROLES/worker/"
  cp "$t/ca.pem" "$ROLES/loadgen/"
  cp "$t/ca.pem" "$t/rabbitmq.pem" "$t/rabbitmq-key.pem" "$BROKER_CONF/"
  # RabbitMQ runs as its own user: its volume's files must be readable to it.
  chmod 644 "$BROKER_CONF/ca.pem" "$BROKER_CONF/rabbitmq.pem" "$BROKER_CONF/rabbitmq-key.pem"
  # TLS only: no plain listener.
  listeners='listeners.tcp = none
listeners.ssl.default = 5671
ssl_options.cacertfile = /broker-conf/ca.pem
ssl_options.certfile = /broker-conf/rabbitmq.pem
ssl_options.keyfile = /broker-conf/rabbitmq-key.pem
ssl_options.verify = verify_none
ssl_options.fail_if_no_peer_cert = false'
fi
# The users, their salted password hashes and permissions, loaded at the broker's
# start (no default user: no guest, no user allowed everything).
loadgen broker-users --cluster-name "${MEGHA_CLUSTER_NAME:-megha}" --vhost / "${definitions[@]}" \
  >"$BROKER_CONF/definitions.json"
printf 'loopback_users = none\n%s\nload_definitions = /broker-conf/definitions.json\n' \
  "$listeners" >"$BROKER_CONF/rabbitmq.conf"
chmod 644 "$BROKER_CONF/rabbitmq.conf" "$BROKER_CONF/definitions.json"
