#!/bin/bash
# megha-healthcheck PORT [ready]: GET http://127.0.0.1:PORT/healthz without curl (bash's
# /dev/tcp). Healthy when the service answers "status":"ok"; with `ready`, only once it
# also says "ready":true (a GM that has the state of every LM).
# A service serving TLS (MEGHA_TLS_CERT_FILE or MEGHA_TLS_ISSUER_CERT_FILE set, as in
# docker-compose.tls.yml) is asked over HTTPS by `loadgen healthcheck`, which trusts
# MEGHA_TLS_CA_FILE (its certificates name 127.0.0.1).
set -eu
port=$1
if [ -n "${MEGHA_TLS_CERT_FILE:-}${MEGHA_TLS_ISSUER_CERT_FILE:-}" ]; then
  if [ "${2:-}" = ready ]; then
    exec loadgen healthcheck "https://127.0.0.1:$port" --ready
  fi
  exec loadgen healthcheck "https://127.0.0.1:$port"
fi
want='"status":"ok"'
[ "${2:-}" = ready ] && want='"ready":true'
exec 3<>"/dev/tcp/127.0.0.1/$port"
printf 'GET /healthz HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3
answer=$(cat <&3)
case "$answer" in *"$want"*) exit 0 ;; *) exit 1 ;; esac
