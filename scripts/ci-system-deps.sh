#!/usr/bin/env bash
# System packages the test suite and the deploy-file checks need beyond Node: Debian's Chromium for the
# dashboard's browser tests (playwright-core drives it; no browser is downloaded by npm), HAProxy for the
# fleet test (test/fleet/fleet.test.ts: deploy/haproxy.cfg in front of two instances) and for
# `haproxy -c`, nginx for `nginx -t` on deploy/nginx.conf, systemd for `systemd-analyze verify` on
# deploy/wristband.service, and Prometheus's promtool for `promtool check metrics` and the alert rules
# (scripts/check-deploy.sh runs the last four); Redis Sentinel for the failover test
# (src/reliability/redis-sentinel.test.ts) and PgBouncer for the pooler test
# (src/reliability/pgbouncer.test.ts); nginx and Caddy also for the gateway recipes (test/gateways runs
# deploy/gateways/ as shipped; scripts/check-deploy.sh runs `nginx -t` and `caddy validate` on them);
# buildah, podman, runc and mmdebstrap to build the container image from Containerfile on a Debian root file
# system and run it (scripts/image-test.sh).
set -euo pipefail
missing=()
command -v chromium >/dev/null || missing+=(chromium)
command -v haproxy >/dev/null || missing+=(haproxy)
command -v nginx >/dev/null || missing+=(nginx)
command -v caddy >/dev/null || missing+=(caddy)
command -v systemd-analyze >/dev/null || missing+=(systemd)
command -v promtool >/dev/null || missing+=(prometheus)
command -v redis-sentinel >/dev/null || missing+=(redis-sentinel)
command -v pgbouncer >/dev/null || [ -x /usr/sbin/pgbouncer ] || missing+=(pgbouncer)
command -v buildah >/dev/null || missing+=(buildah)
command -v podman >/dev/null || missing+=(podman)
command -v runc >/dev/null || missing+=(runc)
command -v mmdebstrap >/dev/null || missing+=(mmdebstrap)
if [ ${#missing[@]} -gt 0 ]; then
  apt-get update && apt-get install -y --no-install-recommends "${missing[@]}"
fi
