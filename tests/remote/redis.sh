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
# A new 32-byte team key in file $1, readable by its owner only.
new_key() { head -c 32 /dev/urandom > "$1"; chmod 600 "$1"; }

# frozen_server_check DIR ARGS...: with the server stopped (SIGSTOP), a build
# given ARGS into a fresh cache DIR ends within 5 s, local-only, with one
# warning naming the timeout; the server runs again after.
frozen_server_check() {
  local dir=$1 t0 ms
  shift
  kill -STOP "$REDIS_PID"
  t0=$(date +%s%N)
  MILC_REMOTE_TIMEOUT_MS=300 expect_rc 0 "$MILC" --cache-dir "$(fresh "$dir")" "$@"
  ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  expect_eq "$(nwarn "$ERR")" 1
  expect_in "$ERR" "no answer within 300 ms"
  if [ "$ms" -lt 5000 ]; then ok; else fail "a frozen server held the build $ms ms"; fi
  kill -CONT "$REDIS_PID"
}
