# The broker image for machines without an image registry: Debian's rabbitmq-server on
# the local base made by scripts/docker-local-images.sh. Speaks AMQP on 5672 and lets
# the guest user in from other containers (loopback_users = none).
ARG BASE_IMAGE=megha/debian:bookworm
FROM ${BASE_IMAGE}
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends rabbitmq-server \
 && rm -rf /var/lib/apt/lists/* \
 && printf 'loopback_users = none\nlisteners.tcp.default = 5672\n' > /etc/rabbitmq/rabbitmq.conf \
 && chown -R rabbitmq:rabbitmq /var/lib/rabbitmq
ENV RABBITMQ_NODENAME=rabbit@localhost
EXPOSE 5672
USER rabbitmq
CMD ["rabbitmq-server"]
