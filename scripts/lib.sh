# Shared by the scripts that run the service as a process (node-smoke.sh, production-install-test.sh):
#   source "$(dirname "$0")/lib.sh"

# free_port NODE: prints a TCP port on 127.0.0.1 that nothing listens on at this moment.
free_port() {
  "$1" -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'
}

# wait_ready PORT PID WHO: waits until /ready answers 200 (60 s at most); fails when the process exits first.
wait_ready() {
  local port=$1 pid=$2 who=$3
  for _ in $(seq 1 300); do
    if curl -fsS "http://127.0.0.1:$port/ready" >/dev/null 2>&1; then return 0; fi
    kill -0 "$pid" 2>/dev/null || { echo "!! $who: the service exited before it was ready"; return 1; }
    sleep 0.2
  done
  echo "!! $who: not ready after 60 s"
  return 1
}

# stop_gracefully PID WHO: SIGTERM; the process must exit 0.
stop_gracefully() {
  local pid=$1 who=$2 code=0
  kill -TERM "$pid"
  wait "$pid" || code=$?
  [ "$code" = 0 ] || { echo "!! $who: exited with $code after SIGTERM"; return 1; }
}
