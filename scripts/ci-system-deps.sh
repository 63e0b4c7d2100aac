#!/usr/bin/env bash
# System packages the test suite needs beyond Node: Debian's Chromium for the dashboard's browser tests
# (playwright-core drives it; no browser is downloaded by npm).
set -euo pipefail
command -v chromium >/dev/null || (apt-get update && apt-get install -y --no-install-recommends chromium)
