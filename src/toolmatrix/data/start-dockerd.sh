#!/usr/bin/env bash
# Start a Docker daemon the way it works on these sandboxed CI machines (DESIGN.md): vfs storage, no iptables,
# no default bridge (containers run with --network host). Installs nothing: docker.io must be there
# (apt-get install -y docker.io). Does nothing when a daemon already answers.
#   usage: start-dockerd.sh [LOG_FILE]   (default: ${TOOLMATRIX_CACHE:-~/.cache/toolmatrix}/dockerd.log)
#   env:   DOCKERD_WAIT_S (default 60): how long to wait for `docker info` to answer
set -euo pipefail
cache="${TOOLMATRIX_CACHE:-$HOME/.cache/toolmatrix}"
log="${1:-$cache/dockerd.log}"
wait_s="${DOCKERD_WAIT_S:-60}"

if docker info >/dev/null 2>&1; then
  echo "docker daemon already answers"
  exit 0
fi
if ! command -v dockerd >/dev/null; then
  echo "start-dockerd.sh: dockerd not found (apt-get install -y docker.io)" >&2
  exit 1
fi
mkdir -p "$(dirname "$log")"
# setsid + nohup: the daemon outlives this script and the shell that ran it.
setsid nohup dockerd --storage-driver=vfs --iptables=false --bridge=none >>"$log" 2>&1 </dev/null &
pid=$!
for _ in $(seq "$wait_s"); do
  if docker info >/dev/null 2>&1; then
    echo "docker daemon started (pid $pid, log $log)"
    exit 0
  fi
  if ! kill -0 "$pid" 2>/dev/null; then
    echo "start-dockerd.sh: dockerd exited; last lines of $log:" >&2
    tail -n 20 "$log" >&2
    exit 1
  fi
  sleep 1
done
echo "start-dockerd.sh: docker info did not answer within ${wait_s}s; last lines of $log:" >&2
tail -n 20 "$log" >&2
exit 1
