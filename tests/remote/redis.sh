# redis.sh — start and stop throwaway redis-server processes for the remote
# tests: loopback only, a free port, no persistence, killed when the test
# script exits.  Sourced by the test scripts.
REDIS_PIDS=()
redis_cleanup() {
  local p
  for p in "${REDIS_PIDS[@]}"; do kill -CONT "$p" 2>/dev/null || true; kill -9 "$p" 2>/dev/null || true; done
}
trap redis_cleanup EXIT

free_port() { "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# redis_start [PORT] [redis-server options...]: sets REDIS_PORT and REDIS_PID.
redis_start() {
  local port=${1:-$(free_port)}; shift || true
  redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --daemonize no \
    --dir "$WORK" --logfile "$WORK/redis-$port.log" "$@" &
  REDIS_PID=$!
  REDIS_PORT=$port
  REDIS_PIDS+=("$REDIS_PID")
  local i
  for i in $(seq 100); do
    if redis-cli -p "$port" ${REDIS_AUTH:+-a "$REDIS_AUTH" --no-auth-warning} ping 2>/dev/null | grep -q PONG; then return 0; fi
    sleep 0.05
  done
  echo "redis-server did not start on port $port" >&2
  return 1
}

redis_stop() { kill -9 "$1" 2>/dev/null || true; wait "$1" 2>/dev/null || true; }

rcli() { redis-cli -p "$REDIS_PORT" ${REDIS_AUTH:+-a "$REDIS_AUTH" --no-auth-warning} "$@"; }

# The first build's FIELD of a --json build's output; the remote warnings in
# a stderr; an empty path under $WORK.
field() { printf '%s' "$1" | "$PY" -c "import json,sys; print(json.load(sys.stdin)['builds'][0]['$2'])"; }
nwarn() { printf '%s\n' "$1" | grep -c 'warning: remote cache' || true; }
fresh() { rm -rf "$WORK/$1"; echo "$WORK/$1"; }
