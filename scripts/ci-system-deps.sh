#!/usr/bin/env bash
# System packages the test suite needs beyond Node: Debian's Chromium for the dashboard's browser tests
# (playwright-core drives it; no browser is downloaded by npm), and HAProxy for the fleet test
# (test/fleet/fleet.test.ts: deploy/haproxy.cfg in front of two instances during a rolling restart).
set -euo pipefail
missing=()
command -v chromium >/dev/null || missing+=(chromium)
command -v haproxy >/dev/null || missing+=(haproxy)
if [ ${#missing[@]} -gt 0 ]; then
  apt-get update && apt-get install -y --no-install-recommends "${missing[@]}"
fi
