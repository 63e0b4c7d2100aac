#!/usr/bin/env bash
# Builds the previous release (default: 0.1.0, commit 5e56323) into a folder of its own, for the
# rollback test (src/ops/rollback.test.ts): a clone of this repository at that commit, its locked
# dependencies installed without install scripts (no native build: the test runs it on PostgreSQL,
# so better-sqlite3's binary is never loaded) and its TypeScript compiled. Built once per commit and
# kept (the folder is the cache); prints the folder.
set -euo pipefail
commit="${1:-5e56323}"
root="$(cd "$(dirname "$0")/.." && pwd)"
dir="${WRISTBAND_PREVIOUS_DIR:-${TMPDIR:-/tmp}/wristband-release-$commit}"
if [ -f "$dir/.built" ]; then
  echo "$dir"
  exit 0
fi
rm -rf "$dir"
git clone --quiet --no-checkout "$root" "$dir" >&2
git -C "$dir" checkout --quiet "$commit" >&2
(cd "$dir" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >&2 && npx tsc -p tsconfig.build.json >&2)
touch "$dir/.built"
echo "$dir"
