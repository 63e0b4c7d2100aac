#!/usr/bin/env bash
# The production path of README "Production", on a fresh clone of the current commit: install, drop the
# dev dependencies, start `node bin/wristband.js serve`, wait for /ready, SIGTERM it, expect exit 0 and
# nothing left running; then install @wristband/verifier from the tarball `npm pack` makes. `npm run
# test:install`; CI runs it. Needs the npm registry (or its cache).
set -euo pipefail
src="$(cd "$(dirname "$0")/.." && pwd)"
source "$src/scripts/lib.sh"
work="$(mktemp -d)"
pid=""
cleanup() {
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid"; fi
  rm -rf "$work"
}
trap cleanup EXIT

git clone -q "$src" "$work/wristband"
git -C "$work/wristband" checkout -q "$(git -C "$src" rev-parse HEAD)"
cd "$work/wristband"

echo "== the three documented commands"
npm ci --no-audit --no-fund
# The service requires Node >= 22. The development install brings its own Node 24 (devDependency
# `node`); a production host has a supported Node of its own. Stand in for that host's Node with a
# copy of the dev binary, taken before `npm prune` removes it, so the machine's Node (20 here) is not used.
mkdir "$work/bin"
cp -L node_modules/.bin/node "$work/bin/node"
export PATH="$work/bin:$PATH"
echo "serving with Node $(node --version)"
# (the caller's package, built while the compiler is still there)
npm pack ./packages/verifier --pack-destination "$work" >/dev/null
npm prune --omit=dev --no-audit --no-fund
if [ -e node_modules/typescript ] || [ -e node_modules/tsx ]; then
  echo "!! dev dependencies are still installed after npm prune --omit=dev"
  exit 1
fi
port="$(free_port node)"
secret="$(node -e 'console.log(require("crypto").randomBytes(32).toString("base64url"))')"
edge_key="$(node -e 'console.log(require("crypto").generateKeyPairSync("ed25519").privateKey.export({format:"pem",type:"pkcs8"}).toString())')"
# Production refuses to start without an edge key and without SMTP/SMS (or mail as files, explicitly).
NODE_ENV=production JWT_SECRET="$secret" EDGE_SIGNING_KEY="$edge_key" MAIL_TRANSPORT=outbox \
  DATA_DIR="$work/data" DATABASE_URL="sqlite:$work/data/wristband.db" HOST=127.0.0.1 PORT="$port" \
  SHUTDOWN_DRAIN_SECONDS=1 LOG_LEVEL=warn node bin/wristband.js serve &
pid=$!
wait_ready "$port" "$pid" "production install"
curl -fsS "http://127.0.0.1:$port/ready"
echo
stop_gracefully "$pid" "production install"
pid=""
if curl -fsS "http://127.0.0.1:$port/health" >/dev/null 2>&1; then
  echo "!! something still answers on port $port after SIGTERM"
  exit 1
fi
echo "== @wristband/verifier from its tarball, in a project of its own"
mkdir "$work/consumer"
cd "$work/consumer"
echo '{"name":"consumer","private":true,"type":"module"}' >package.json
npm install --no-audit --no-fund "$work"/wristband-verifier-*.tgz
node -e 'import("@wristband/verifier").then((m) => { if (typeof m.createVerifier !== "function") process.exit(1) })'

echo "production install path: OK (built, pruned to production dependencies, served, stopped with exit 0)"
