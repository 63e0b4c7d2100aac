#!/usr/bin/env bash
# The deploy files checked by their own tools: `systemd-analyze verify` and `systemd-analyze security`
# (exposure at most 3.0) on the systemd unit, `nginx -t` on the nginx example (inside a minimal
# nginx.conf, with a throw-away certificate in place of the example's), `haproxy -c` on the HAProxy
# configuration, `nginx -t` and `caddy validate` on the gateway recipes of deploy/gateways/
# (test/gateways runs them too), `promtool check rules` and `promtool test rules` on the alert rules of
# deploy/prometheus/ (src/metrics/deploy-queries.test.ts runs them too, and checks every metric their
# queries and the Grafana dashboard's read against a real scrape). A tool that is missing is
# skipped with a loud note (scripts/ci-system-deps.sh installs them from Debian's packages).
# `promtool check metrics` runs in the test suite (src/metrics/promtool.test.ts), on a real scrape.
set -euo pipefail
cd "$(dirname "$0")/.."
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
failed=0
skipped() { echo "!! $1 is not installed: $2 NOT CHECKED (apt-get install $3)"; }

if command -v systemd-analyze >/dev/null; then
  # verify checks that ExecStart's program exists: the copy points it at this machine's node (the
  # unit's /opt/node is an installation step, docs/operations.md).
  sed -e "s#^ExecStart=/opt/node/bin/node #ExecStart=$(command -v node) #" deploy/wristband.service \
    >"$work/wristband.service"
  # verify exits 0 on keys it ignores (a setting in the wrong section): any message is a failure.
  if out="$(systemd-analyze verify "$work/wristband.service" 2>&1)" && [ -z "$out" ]; then
    echo "ok: systemd-analyze verify deploy/wristband.service"
  else
    echo "!! systemd-analyze verify deploy/wristband.service:"
    echo "$out"
    failed=1
  fi
  # The sandbox: exposure at most 3.0 ("OK"), judged on the file alone (--offline, systemd >= 250),
  # not on a unit loaded into this machine's systemd.
  if out="$(systemd-analyze security --offline=yes --threshold=30 "$work/wristband.service" 2>&1)"; then
    echo "ok: systemd-analyze security deploy/wristband.service: $(grep -o 'exposure level.*' <<<"$out")"
  else
    echo "!! systemd-analyze security deploy/wristband.service (threshold 3.0):"
    echo "$out"
    failed=1
  fi
else
  skipped systemd-analyze deploy/wristband.service systemd
fi

if command -v nginx >/dev/null && command -v openssl >/dev/null; then
  openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=auth.example.com \
    -keyout "$work/key.pem" -out "$work/cert.pem" 2>/dev/null
  sed -e "s#/etc/ssl/certs/auth.example.com.pem#$work/cert.pem#" \
    -e "s#/etc/ssl/private/auth.example.com.key#$work/key.pem#" deploy/nginx.conf >"$work/site.conf"
  cat >"$work/nginx.conf" <<CONF
pid $work/nginx.pid;
error_log $work/error.log;
events {}
http {
    access_log off;
    include $work/site.conf;
}
CONF
  if out="$(nginx -t -q -c "$work/nginx.conf" -p "$work/" 2>&1)"; then
    echo "ok: nginx -t deploy/nginx.conf ($(nginx -v 2>&1))"
    [ -z "$out" ] || echo "$out"
  else
    echo "!! nginx -t deploy/nginx.conf:"
    echo "$out"
    failed=1
  fi
else
  skipped "nginx (or openssl)" deploy/nginx.conf "nginx openssl"
fi

if command -v nginx >/dev/null; then
  # The recipe's includes are read beside the main nginx.conf, as in /etc/nginx/.
  mkdir "$work/gateway"
  cp deploy/gateways/nginx.conf deploy/gateways/wristband-check.conf deploy/gateways/wristband-claims.conf \
    "$work/gateway/"
  cat >"$work/gateway/main.conf" <<CONF
pid $work/gateway/nginx.pid;
error_log $work/gateway/error.log;
events {}
http {
    access_log off;
    include nginx.conf;
}
CONF
  if out="$(nginx -t -q -c "$work/gateway/main.conf" -p "$work/gateway/" 2>&1)"; then
    echo "ok: nginx -t deploy/gateways/nginx.conf"
    [ -z "$out" ] || echo "$out"
  else
    echo "!! nginx -t deploy/gateways/nginx.conf:"
    echo "$out"
    failed=1
  fi
else
  skipped nginx deploy/gateways/nginx.conf nginx
fi

if command -v caddy >/dev/null; then
  # HOME and XDG_* point into the work folder: validating writes nothing of Caddy's elsewhere.
  if out="$(HOME="$work" XDG_DATA_HOME="$work" XDG_CONFIG_HOME="$work" WRISTBAND_VERIFY_KEY=wb_check \
    caddy validate --config deploy/gateways/Caddyfile --adapter caddyfile 2>&1)"; then
    echo "ok: caddy validate deploy/gateways/Caddyfile ($(caddy version | cut -d' ' -f1))"
  else
    echo "!! caddy validate deploy/gateways/Caddyfile:"
    echo "$out"
    failed=1
  fi
else
  skipped caddy deploy/gateways/Caddyfile caddy
fi

if command -v haproxy >/dev/null; then
  if out="$(haproxy -c -f deploy/haproxy.cfg 2>&1)"; then
    echo "ok: haproxy -c deploy/haproxy.cfg"
  else
    echo "!! haproxy -c deploy/haproxy.cfg:"
    echo "$out"
    failed=1
  fi
else
  skipped haproxy deploy/haproxy.cfg haproxy
fi

if command -v promtool >/dev/null; then
  if out="$(promtool check rules deploy/prometheus/alerts.yml 2>&1)"; then
    echo "ok: promtool check rules deploy/prometheus/alerts.yml ($(grep -o '[0-9]* rules found' <<<"$out"))"
  else
    echo "!! promtool check rules deploy/prometheus/alerts.yml:"
    echo "$out"
    failed=1
  fi
  # The test file names alerts.yml relative to itself.
  if out="$(cd deploy/prometheus && promtool test rules alerts.test.yml 2>&1)"; then
    echo "ok: promtool test rules deploy/prometheus/alerts.test.yml"
  else
    echo "!! promtool test rules deploy/prometheus/alerts.test.yml:"
    echo "$out"
    failed=1
  fi
else
  skipped promtool deploy/prometheus/alerts.yml prometheus
fi

exit "$failed"
