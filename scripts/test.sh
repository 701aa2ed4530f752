#!/usr/bin/env bash
# The project's test command: installs and starts what the tests need, then runs the
# format check, clippy and every test of the workspace.
#
#   scripts/test.sh            # everything
#   SKIP_LINT=1 scripts/test.sh  # tests only
set -euo pipefail
cd "$(dirname "$0")/.."

# Each step says when it starts (seconds since this script started), so a slow CI
# run shows where its time went.
say() { printf '==> [%4ds] %s\n' "$SECONDS" "$*"; }

# --- system packages (Debian) -------------------------------------------------------
need_pkgs=()
command -v rabbitmq-server >/dev/null 2>&1 || [ -x /usr/sbin/rabbitmq-server ] || need_pkgs+=(rabbitmq-server)
# HiGHS (the LRA placer's ILP solver, built from source by highs-sys) needs these.
command -v cmake >/dev/null 2>&1 || need_pkgs+=(cmake)
dpkg -s libclang-dev >/dev/null 2>&1 || need_pkgs+=(libclang-dev)
# scripts/api-fuzz.sh installs schemathesis (PyPI) into a venv.
command -v python3 >/dev/null 2>&1 || need_pkgs+=(python3)
python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || need_pkgs+=(python3-venv)
# The dashboard test (services_dashboard) drives the GM's web page in headless Chromium.
command -v chromium >/dev/null 2>&1 || [ -n "${MEGHA_CHROMIUM:-}" ] || need_pkgs+=(chromium)
# promtool (tests/tests/metrics_lint.rs lints every role's /metrics with it).
command -v promtool >/dev/null 2>&1 || need_pkgs+=(prometheus)
if [ ${#need_pkgs[@]} -gt 0 ]; then
  if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
    say "installing ${need_pkgs[*]} from Debian's packages"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_pkgs[@]}" >/dev/null
  else
    echo "error: missing ${need_pkgs[*]}; install them (apt-get install ${need_pkgs[*]}) or run as root" >&2
    exit 1
  fi
fi

# --- Python tools (PyPI) --------------------------------------------------------------
# kubernetes-validate checks k8s/ offline against the API schemas it ships
# (tests/tests/k8s_manifests.rs).
if ! command -v kubernetes-validate >/dev/null 2>&1; then
  say "installing kubernetes-validate from PyPI"
  python3 -m pip install -q kubernetes-validate 2>/dev/null \
    || python3 -m pip install -q --break-system-packages kubernetes-validate \
    || { echo "error: cannot install kubernetes-validate (python3 -m pip install kubernetes-validate)" >&2; exit 1; }
fi

# --- RabbitMQ -------------------------------------------------------------------------
if ! (echo > /dev/tcp/127.0.0.1/5672) 2>/dev/null; then
  say "starting rabbitmq-server"
  service rabbitmq-server start >/dev/null 2>&1 || rabbitmq-server -detached || true
  for _ in $(seq 1 60); do
    (echo > /dev/tcp/127.0.0.1/5672) 2>/dev/null && break
    sleep 1
  done
fi
if (echo > /dev/tcp/127.0.0.1/5672) 2>/dev/null; then
  say "RabbitMQ is listening on 127.0.0.1:5672"
else
  echo "warning: RabbitMQ is not reachable on 127.0.0.1:5672; tests that need it will fail and say so" >&2
fi

# --- Docker ---------------------------------------------------------------------------
if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then
  say "Docker engine reachable: $(docker version --format '{{.Server.Version}}' 2>/dev/null || echo unknown)"
  export MEGHA_DOCKER=1
  # The docker compose test builds its base image with debootstrap (no registry needed).
  if ! command -v debootstrap >/dev/null 2>&1 && ! docker image inspect megha/debian:bookworm >/dev/null 2>&1; then
    if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
      say "installing debootstrap from Debian's packages"
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
    else
      echo "warning: debootstrap is missing; the docker compose test will fail and say so" >&2
    fi
  fi
  # The base images (a debootstrap of bookworm, RabbitMQ on it: ~4 minutes of download
  # and unpacking) need no binary of ours, so they are made now, beside the build that
  # follows (CPU-bound), instead of inside the docker compose test. The test reuses them;
  # if this fails, the test makes them again and fails loudly if it cannot.
  images_log="${TMPDIR:-/tmp}/megha-test-images.$$.log"
  say "making the docker compose base images in the background (log: $images_log)"
  scripts/docker-local-images.sh >"$images_log" 2>&1 &
  images_pid=$!
else
  say "no Docker engine reachable: the docker compose end-to-end test will report itself skipped"
  export MEGHA_DOCKER=0
fi

# --- checks and tests -----------------------------------------------------------------
# A one-shot build gains nothing from incremental compilation, which would add ~0.7 GB
# to target/ (debug info is already limited in Cargo.toml's dev profile).
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
target_dir="${CARGO_TARGET_DIR:-target}"
say "disk before the build: $(df -h --output=avail "$(dirname "$target_dir")" 2>/dev/null | tail -1 | tr -d ' ') free"
if [ "${SKIP_LINT:-0}" != 1 ]; then
  say "cargo fmt --check"
  cargo fmt --all -- --check
  say "the cores have no I/O dependency"
  scripts/check-core-purity.sh
  say "no import cycle between the files of any crate"
  scripts/check-module-cycles.sh
  say "cargo clippy --all-targets -- -D warnings"
  cargo clippy --workspace --all-targets -- -D warnings
fi
say "cargo test --workspace"
cargo build --workspace --bins
say "binaries built"
if [ -n "${images_pid:-}" ]; then
  if wait "$images_pid"; then
    say "docker compose base images ready"
  else
    echo "warning: making the base images failed (the docker compose test will try again):" >&2
    tail -20 "$images_log" >&2 || true
  fi
fi
cargo test --workspace
say "fuzzing the GM's HTTP API against its OpenAPI document (schemathesis)"
BIN="$target_dir/debug" scripts/api-fuzz.sh
say "target/ holds $(du -sh "$target_dir" 2>/dev/null | cut -f1)"
say "done"
