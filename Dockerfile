# One image with the six binaries (global-master, local-master, worker and its task
# helper megha-task-exec, loadgen, megha) and
# the sample traces; docker-compose.yml picks the role with `command`.
#
# With internet, as is:            docker build -t megha/scheduler .
# Without a registry (see scripts/docker-local-images.sh): build from the local Debian
# base and copy binaries built on the host instead of compiling here:
#   docker build -t megha/scheduler \
#     --build-arg BUILDER_IMAGE=megha/debian:bookworm \
#     --build-arg RUNTIME_IMAGE=megha/debian:bookworm \
#     --build-arg PREBUILT=docker/prebuilt .
#
# Build arguments:
#   BUILDER_IMAGE  image of the build stage (default rust:1-bookworm; with PREBUILT any
#                  Debian image will do: nothing is compiled)
#   RUNTIME_IMAGE  image the services run on (default debian:bookworm-slim)
#   PREBUILT       a directory of the build context holding the binaries built on
#                  the host (for a bookworm glibc); empty = `cargo build --release` here

ARG BUILDER_IMAGE=rust:1-bookworm
ARG RUNTIME_IMAGE=debian:bookworm-slim

FROM ${BUILDER_IMAGE} AS build
# Marks the (classic builder's) intermediate images of this stage, so they can be found:
#   docker image prune -f --filter label=io.megha.stage=build
LABEL io.megha.stage=build
ARG PREBUILT=
WORKDIR /src
COPY . .
RUN set -eu; \
    mkdir -p /out; \
    if [ -n "$PREBUILT" ]; then \
      for b in global-master local-master worker megha-task-exec loadgen megha; do \
        if [ ! -x "$PREBUILT/$b" ]; then \
          echo "PREBUILT=$PREBUILT has no $b (scripts/docker-local-images.sh --binaries DIR)" >&2; exit 1; \
        fi; \
        install -m 0755 "$PREBUILT/$b" "/out/$b"; \
      done; \
    else \
      apt-get update; \
      DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends cmake libclang-dev; \
      cargo build --release --locked --bins; \
      for b in global-master local-master worker megha-task-exec loadgen megha; do \
        install -s -m 0755 "target/release/$b" "/out/$b"; \
      done; \
    fi

FROM ${RUNTIME_IMAGE}
# Workers run `exec` tasks: the runtime image must carry a small toolbox (sh and
# coreutils; Debian's essential set, in debian:bookworm-slim and debootstrap minbase).
RUN set -eu; for t in sh bash env echo cat sleep true false ls mkdir rm; do \
      command -v "$t" >/dev/null || { echo "runtime image lacks $t: exec tasks need sh and coreutils" >&2; exit 1; }; \
    done
# /shared: the mount point of the workers' shared scratch volume (compose), where a
# job's stages pass files; a fresh named volume takes this mode (1777, like /tmp).
RUN mkdir -p /shared && chmod 1777 /shared
COPY --from=build /out/ /usr/local/bin/
COPY docker/healthcheck.sh /usr/local/bin/megha-healthcheck
# The compose `secrets` service (docker/make-secrets.sh) makes the per-role cluster
# credentials with make-role-credentials.sh.
COPY scripts/make-role-credentials.sh /usr/local/bin/megha-make-role-credentials
COPY docker/make-secrets.sh /usr/local/bin/megha-make-secrets
COPY data/traces /opt/megha/data/traces
WORKDIR /opt/megha
ENV RUST_LOG=info
