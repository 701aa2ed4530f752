#!/bin/bash
# megha-healthcheck PORT [ready]: GET http://127.0.0.1:PORT/healthz without curl (bash's
# /dev/tcp). Healthy when the service answers "status":"ok"; with `ready`, only once it
# also says "ready":true (a GM that has the state of every LM).
set -eu
port=$1
want='"status":"ok"'
[ "${2:-}" = ready ] && want='"ready":true'
exec 3<>"/dev/tcp/127.0.0.1/$port"
printf 'GET /healthz HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3
answer=$(cat <&3)
case "$answer" in *"$want"*) exit 0 ;; *) exit 1 ;; esac
