#!/usr/bin/env bash
# Prints the Secret `megha-secrets` with fresh random credentials, as the compose
# `secrets` service makes them: a cluster secret (roles authenticate each other with
# it), an API tokens file with one admin (its token also under admin-token), and the
# broker password of the RabbitMQ user `megha`.
#
#   k8s/make-secrets.sh | kubectl apply -f -          # once, before k8s/
#   kubectl get secret megha-secrets -o jsonpath='{.data.admin-token}' | base64 -d
#
# Re-running it replaces every credential: restart every pod afterwards (RabbitMQ
# keeps the first password it was started with on its volume; change it there with
# rabbitmqctl change_password megha NEW).
set -euo pipefail
rand() { head -c "$1" /dev/urandom | base64 | tr -d '\n=/+'; }
b64() { printf '%s' "$1" | base64 | tr -d '\n'; }
secret=$(rand 32)
admin=$(rand 32)
amqp=$(rand 24)
tokens=$(printf '[[users]]\nname = "admin"\ntoken = "%s"\nadmin = true\n' "$admin")
cat <<YAML
apiVersion: v1
kind: Secret
metadata:
  name: megha-secrets
  labels: {app.kubernetes.io/part-of: megha}
type: Opaque
data:
  cluster-secret: $(b64 "$secret")
  admin-token: $(b64 "$admin")
  tokens.toml: $(b64 "$tokens")
  amqp-password: $(b64 "$amqp")
YAML
