#!/usr/bin/env bash
# bench_remote.sh MILC [--smoke] — issue #19's figures, measured side by side
# in one run against a redis-server this script starts on loopback:
#  1. bench_remote: a remote hit (remote_get: fetch + MAC + size checks) against
#     plain pipelined GETs of the same chunks from the same server;
#  2. `milc build --model gpt2 --chunk 4 --mode 2` into an empty cache, cold
#     (generate, compile, store) against pulled from the remote (fetch, check,
#     store), 5 rounds alternated, medians.  Both end with the three chunks in
#     the local cache, ready to load; the cold build's stores wait for the
#     disk, the pulled ones do not (CACHE_PUT_REFETCHABLE, cache/README.md).
# --smoke: small sizes, so ctest keeps it working.
set -euo pipefail
MILC=$(realpath "$1")
SMOKE=${2:-}
BENCH=$(dirname "$MILC")/../cache/bench_remote
WORK=$(mktemp -d "${TMPDIR:-/tmp}/bench_remote.XXXXXX")
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
redis-server --port "$PORT" --bind 127.0.0.1 --save '' --appendonly no --daemonize no --dir "$WORK" \
  --logfile "$WORK/redis.log" &
RPID=$!
trap 'kill -9 $RPID 2>/dev/null || true; wait $RPID 2>/dev/null || true; rm -rf "$WORK"' EXIT
for _ in $(seq 100); do redis-cli -p "$PORT" ping 2>/dev/null | grep -q PONG && break; sleep 0.05; done
head -c 32 /dev/urandom > "$WORK/key"; chmod 600 "$WORK/key"
R=(--remote "redis://127.0.0.1:$PORT" --remote-key-file "$WORK/key")

if [ -n "$SMOKE" ]; then "$BENCH" --port "$PORT" --smoke; else "$BENCH" --port "$PORT"; fi

if [ -n "$SMOKE" ]; then REQ=(build --model tiny --chunk 1 --mode 2); ROUNDS=1
else REQ=(build --model gpt2 --chunk 4 --mode 2); ROUNDS=5; fi
# ms CMD...: wall ms of a --json build; its summed store and lookup ms go to
# $WORK/parts (a cold build stores, a pulled one looks up: fetch, check, put).
ms() {
  local t0=$(date +%s%N)
  "$@" --json > "$WORK/out.json"
  echo $(( ($(date +%s%N) - t0) / 1000000 ))
  python3 -c "import json,sys; b=json.load(open(sys.argv[1]))['builds']
print(round(sum(x['ms']['store'] for x in b)), round(sum(x['ms']['lookup'] for x in b)))" \
    "$WORK/out.json" >> "$WORK/parts"
}
"$MILC" --cache-dir "$WORK/producer" "${R[@]}" "${REQ[@]}" > /dev/null   # build once, write back
cold=(); pulled=()
for i in $(seq "$ROUNDS"); do
  rm -rf "$WORK/c"; cold+=("$(ms "$MILC" --cache-dir "$WORK/c" "${REQ[@]}")")
  rm -rf "$WORK/c"; pulled+=("$(ms "$MILC" --cache-dir "$WORK/c" "${R[@]}" "${REQ[@]}")")
  "$MILC" --cache-dir "$WORK/c" --json "${REQ[@]}" | grep -q '"outcome":"direct_hit"'
done
med() { printf '%s\n' "$@" | sort -n | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
c=$(med "${cold[@]}"); p=$(med "${pulled[@]}")
st=$(med $(awk 'NR % 2 == 1 {print $1}' "$WORK/parts"))   # the cold builds' stores (fsynced LMDB puts)
lk=$(med $(awk 'NR % 2 == 0 {print $2}' "$WORK/parts"))   # the pulled builds' lookups (fetch, MACs, put)
echo "${REQ[*]}: cold ${cold[*]} ms, pulled from the remote ${pulled[*]} ms (medians $c, $p)"
awk -v c="$c" -v p="$p" 'BEGIN { printf "issue #19: cold build / remote pull = %.2f (goal >= 5)\n", c / p }'
awk -v c="$c" -v p="$p" -v s="$st" -v l="$lk" 'BEGIN { printf "  parts: cold = %d ms stores (waiting for the disk) + %d ms the rest; pulled = %d ms lookups (fetch, MACs, put without a sync) + %d ms the rest (process, template, exit)\n", s, c - s, l, p - l }'
