#!/usr/bin/env bash
# Builds the container image from Containerfile and runs it the way deploy/kubernetes/ does
# (docs/operations.md, "The container image"): Debian's buildah builds it on a Debian 12 root file system
# made by mmdebstrap from Debian's packages (no registry of images is reachable here; elsewhere BASE is
# debian:bookworm-slim), then Debian's podman runs it with a read-only root file system, the secrets as
# files, DATA_DIR on a volume and the host's network, and this script checks:
#   - /ready answers 200 and the image's HEALTHCHECK passes (podman healthcheck run);
#   - the process runs as the image's user 10001, not root, and cannot write the root file system;
#   - the image holds production dependencies only (no TypeScript, no test runner) and the release's Node;
#   - SIGTERM (podman stop) drains and the container exits 0, its last log line `stopped`.
# Everything lives in a folder of its own (its own container storage too), removed at the end; with
# IMAGE_TEST_DIR=<folder> it is kept there, and a second run reuses the image built in it.
# A missing tool is skipped with a loud note (scripts/ci-system-deps.sh installs them).
#   bash scripts/image-test.sh            (5 to 9 minutes on the shared machine: 2 for the base, the rest for the build)
set -euo pipefail
cd "$(dirname "$0")/.."
for tool in buildah podman runc mmdebstrap curl; do
  if ! command -v "$tool" >/dev/null; then
    echo "!! $tool is not installed: the container image NOT BUILT (apt-get install buildah podman runc mmdebstrap)"
    exit 0
  fi
done
source scripts/lib.sh

work="${IMAGE_TEST_DIR:-$(mktemp -d /var/tmp/wristband-image.XXXXXX)}"
mkdir -p "$work"
# No systemd here (nor in most CI containers): cgroups by hand, events to a file, the health check run
# on demand (podman's timer for it is a systemd unit); runc, since crun refuses this machine's hybrid
# cgroups; limits no higher than this process has (the runtime may not raise them: podman's default
# of 1,048,576 open files is refused here).
store=(--root "$work/storage" --runroot "$work/run" --storage-driver vfs)
bh() { buildah "${store[@]}" "$@"; }
# Without systemd podman still logs that it cannot add a timer for the health check: that line is dropped.
pm() {
  podman "${store[@]}" --cgroup-manager cgroupfs --events-backend file --runtime runc "$@" \
    2> >(grep -v 'unable to get systemd connection' >&2)
}
limits=(--ulimit nofile=4096:4096 --ulimit nproc=4096:4096)
name="wristband-image-test-$$"
cleanup() {
  pm rm -f -t 0 "$name" >/dev/null 2>&1 || true
  bh rm --all >/dev/null 2>&1 || true
  [ -n "${IMAGE_TEST_DIR:-}" ] || rm -rf "$work"
}
trap cleanup EXIT
export BUILDAH_ISOLATION=chroot

image=localhost/wristband:test
if [ -n "${IMAGE_TEST_DIR:-}" ] && bh inspect --type image "$image" >/dev/null 2>&1; then
  echo "== reusing $image of $work"
else
echo "== base: Debian 12 (minbase) from Debian's packages"
mmdebstrap --quiet --variant=minbase bookworm "$work/rootfs.tar"
base="$(bh from scratch)"
bh add "$base" "$work/rootfs.tar" / >/dev/null
bh commit --quiet "$base" localhost/wristband-base:bookworm >/dev/null
rm "$work/rootfs.tar"

echo "== build (Containerfile)"
# Behind a proxy that re-signs TLS, npm in the build needs its CA: the system's bundle, as a build secret.
secret=()
if [ -f /etc/ssl/certs/ca-certificates.crt ]; then secret=(--secret id=ca,src=/etc/ssl/certs/ca-certificates.crt); fi
started=$SECONDS
bh build --quiet --format docker "${secret[@]}" \
  --build-arg BASE=localhost/wristband-base:bookworm -t localhost/wristband:test . >"$work/build.log" 2>&1 || {
  tail -40 "$work/build.log"
  echo "!! the image did not build"
  exit 1
}
echo "built in $((SECONDS - started)) s"
fi

user="$(pm image inspect --format '{{.Config.User}}' "$image")"
[ "$user" = "10001:10001" ] || { echo "!! the image's user is '$user', not 10001:10001"; exit 1; }
pm image inspect --format '{{json .Config.Healthcheck}}' "$image" | grep -q '/ready' ||
  { echo "!! the image has no HEALTHCHECK on /ready"; exit 1; }
in_image() { pm run --rm "${limits[@]}" --no-healthcheck --network none --entrypoint "$1" "$image" "${@:2}"; }
node_version="$(in_image /opt/node/bin/node --version)"
expected="v$(sed -n 's/^ARG NODE_VERSION=//p' Containerfile)"
[ "$node_version" = "$expected" ] || { echo "!! Node $node_version in the image, $expected in Containerfile"; exit 1; }
if in_image /bin/sh -c 'ls /opt/wristband/node_modules/typescript /opt/wristband/node_modules/tsx' >/dev/null 2>&1; then
  echo "!! dev dependencies in the image"
  exit 1
fi
echo "ok: user 10001, HEALTHCHECK on /ready, Node $node_version, production dependencies only"

echo "== run: read-only root, secrets as files, SIGTERM"
rm -rf "$work/secrets" && mkdir -m 0755 "$work/secrets"
node -e 'process.stdout.write(require("crypto").randomBytes(32).toString("base64url"))' >"$work/secrets/jwt-secret"
node -e 'process.stdout.write(require("crypto").generateKeyPairSync("ed25519").privateKey.export({format:"pem",type:"pkcs8"}))' \
  >"$work/secrets/edge-signing-key"
chmod 0444 "$work/secrets/"*
# DATA_DIR: a volume the image's user owns, as Kubernetes' fsGroup or a named volume gives it.
rm -rf "$work/data" && mkdir -m 0700 "$work/data" && chown 10001:10001 "$work/data"
port="$(free_port node)"
pm run -d --name "$name" --read-only --network host "${limits[@]}" --health-interval disable \
  --tmpfs /tmp -v "$work/data:/var/lib/wristband" \
  -v "$work/secrets:/run/secrets/wristband:ro" \
  -e HOST=127.0.0.1 -e PORT="$port" -e PUBLIC_BASE_URL="http://127.0.0.1:$port" \
  -e SHUTDOWN_DRAIN_SECONDS=1 -e MAIL_TRANSPORT=outbox \
  -e DATABASE_URL=sqlite:/var/lib/wristband/wristband.db \
  -e JWT_SECRET_FILE=/run/secrets/wristband/jwt-secret \
  -e EDGE_SIGNING_KEY_FILE=/run/secrets/wristband/edge-signing-key \
  "$image" >/dev/null
for _ in $(seq 1 120); do
  if curl -fsS "http://127.0.0.1:$port/ready" >/dev/null 2>&1; then break; fi
  if [ "$(pm inspect --format '{{.State.Running}}' "$name")" != true ]; then
    pm logs "$name" | tail -20
    echo "!! the container stopped before it was ready"
    exit 1
  fi
  sleep 0.5
done
curl -fsS "http://127.0.0.1:$port/ready"
echo
pm healthcheck run "$name" || { echo "!! the HEALTHCHECK failed"; exit 1; }
uid="$(pm exec "$name" /opt/node/bin/node -e 'console.log(process.getuid())')"
[ "$uid" = 10001 ] || { echo "!! the service runs as uid $uid"; exit 1; }
if pm exec "$name" /opt/node/bin/node -e 'require("fs").writeFileSync("/opt/wristband/x", "")' 2>/dev/null; then
  echo "!! the root file system is writable"
  exit 1
fi
echo "ok: /ready 200, HEALTHCHECK passes, uid 10001, root file system read-only"
pm stop -t 30 "$name" >/dev/null
status="$(pm inspect --format '{{.State.ExitCode}}' "$name")"
# Standard output and error are interleaved by podman: the `stopped` line is among the last few.
last="$(pm logs "$name" 2>&1 | tail -5)"
[ "$status" = 0 ] || { pm logs "$name" | tail -20; echo "!! exit status $status after SIGTERM"; exit 1; }
grep -q '"msg":"stopped"' <<<"$last" || { echo "!! no stopped line at the end of the log: $last"; exit 1; }
echo "ok: SIGTERM drained and exited 0"
echo "container image: OK (built, run read-only as 10001, ready, healthy, stopped with exit 0)"
