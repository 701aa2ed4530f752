#!/usr/bin/env bash
# Makes the images docker-compose.yml needs on a machine without an image registry,
# from Debian's packages only:
#   megha/debian:bookworm    a bookworm root filesystem (debootstrap --variant=minbase)
#   megha/rabbitmq:local     rabbitmq-server on that base (docker/rabbitmq-local.Dockerfile)
# and, with --binaries DIR, stages the service binaries built on the host
# (cargo build --release --bins -> DIR=target/release) in docker/prebuilt/, stripped,
# for the Dockerfile's PREBUILT path. Images that already exist are reused.
# Then, for example:
#   export BUILDER_IMAGE=megha/debian:bookworm RUNTIME_IMAGE=megha/debian:bookworm \
#          RABBITMQ_IMAGE=megha/rabbitmq:local PREBUILT=docker/prebuilt
#   docker-compose up --build
set -euo pipefail
cd "$(dirname "$0")/.."
BASE=${BASE:-megha/debian:bookworm}
BROKER=${BROKER:-megha/rabbitmq:local}
MIRROR=${MIRROR:-http://deb.debian.org/debian}
binaries=""
while [ $# -gt 0 ]; do
  case "$1" in
    --binaries) binaries=$2; shift 2 ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
say() { printf '==> %s\n' "$*"; }

if docker image inspect "$BASE" >/dev/null 2>&1; then
  say "reusing $BASE"
else
  command -v debootstrap >/dev/null 2>&1 || {
    echo "error: debootstrap is missing (apt-get install debootstrap)" >&2; exit 1; }
  root=$(mktemp -d /tmp/megha-bookworm.XXXXXX)
  trap 'rm -rf "$root"' EXIT
  say "debootstrap --variant=minbase bookworm $root $MIRROR"
  debootstrap --variant=minbase bookworm "$root" "$MIRROR" >"$root.log" 2>&1 || {
    tail -20 "$root.log" >&2; exit 1; }
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
  say "docker import -> $BASE"
  tar -C "$root" -c . | docker import - "$BASE" >/dev/null
  rm -rf "$root" "$root.log"
  trap - EXIT
fi

if docker image inspect "$BROKER" >/dev/null 2>&1; then
  say "reusing $BROKER"
else
  say "building $BROKER"
  docker build -q -t "$BROKER" --build-arg BASE_IMAGE="$BASE" \
    -f docker/rabbitmq-local.Dockerfile docker >/dev/null
fi

if [ -n "$binaries" ]; then
  mkdir -p docker/prebuilt
  for b in global-master local-master worker megha-task-exec loadgen megha; do
    [ -x "$binaries/$b" ] || { echo "error: $binaries/$b is missing (cargo build --bins)" >&2; exit 1; }
    strip -o "docker/prebuilt/$b" "$binaries/$b" 2>/dev/null || cp "$binaries/$b" "docker/prebuilt/$b"
  done
  say "staged the binaries of $binaries in docker/prebuilt/"
fi
say "done"
