#!/usr/bin/env bash
# bench_remote.sh MILC [--smoke] — issue #19's figures, measured side by side
# in one run against a redis-server this script starts, listening on TCP
# loopback and on a Unix socket:
#  1. bench_remote, over each: a remote hit (remote_get: fetch + MAC + size
#     checks) against plain pipelined GETs of the same chunks from the same
#     server;
#  2. `milc build --model gpt2 --chunk 4 --mode 2` into an empty cache, cold
#     (generate, compile, store) against pulled from the remote over TCP and
#     over the socket (fetch, check, store), 5 rounds alternated, medians.
#     All end with the three chunks in the local cache, ready to load; the
#     cold build's stores wait for the disk, the pulled ones do not
#     (CACHE_PUT_REFETCHABLE, cache/README.md);
#  3. the ceiling of that ratio: in each round, plain pipelined GETs of every
#     chunk the pulls fetch (the same bytes, the same server, nothing checked
#     or stored), so cold ÷ raw GETs is what a pull could reach at best.
# --smoke: small sizes, so ctest keeps it working.
set -euo pipefail
MILC=$(realpath "$1")
SMOKE=${2:-}
BENCH=$(dirname "$MILC")/../cache/bench_remote
WORK=$(mktemp -d "${TMPDIR:-/tmp}/bench_remote.XXXXXX")
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
SOCK=$WORK/redis.sock
redis-server --port "$PORT" --bind 127.0.0.1 --unixsocket "$SOCK" --unixsocketperm 700 --save '' --appendonly no \
  --daemonize no --dir "$WORK" --logfile "$WORK/redis.log" &
RPID=$!
trap 'kill -9 $RPID 2>/dev/null || true; wait $RPID 2>/dev/null || true; rm -rf "$WORK"' EXIT
for _ in $(seq 100); do redis-cli -p "$PORT" ping 2>/dev/null | grep -q PONG && [ -S "$SOCK" ] && break; sleep 0.05; done
head -c 32 /dev/urandom > "$WORK/key"; chmod 600 "$WORK/key"
R=(--remote "redis://127.0.0.1:$PORT" --remote-key-file "$WORK/key")
U=(--remote "unix://$SOCK" --remote-key-file "$WORK/key")
echo "load: $(uptime)"

if [ -n "$SMOKE" ]; then B=(--smoke); else B=(); fi
"$BENCH" --port "$PORT" "${B[@]}"
"$BENCH" --socket "$SOCK" "${B[@]}"

if [ -n "$SMOKE" ]; then REQ=(build --model tiny --chunk 1 --mode 2); ROUNDS=1
else REQ=(build --model gpt2 --chunk 4 --mode 2); ROUNDS=5; fi
# srv_ms: redis-server's CPU time so far (user + system, ms; 10 ms ticks).
srv_ms() { awk -v hz="$(getconf CLK_TCK)" '{print ($14 + $15) * 1000 / hz}' "/proc/$RPID/stat"; }
# ms CMD...: wall ms of a --json build; its summed store and lookup ms, its
# CPU ms and the server's CPU ms meanwhile go to $WORK/parts (a cold build
# stores, a pulled one looks up: fetch, check, put).
ms() {
  local t0=$(date +%s%N) s0=$(srv_ms)
  /usr/bin/time -f "%U %S" -o "$WORK/cpu" "$@" --json > "$WORK/out.json"
  echo $(( ($(date +%s%N) - t0) / 1000000 ))
  python3 -c "import json,sys; b=json.load(open(sys.argv[1]))['builds']; u, s = open(sys.argv[2]).read().split()[-2:]
print(round(sum(x['ms']['store'] for x in b)), round(sum(x['ms']['lookup'] for x in b)), round((float(u) + float(s)) * 1000), round(float(sys.argv[4]) - float(sys.argv[3])))" \
    "$WORK/out.json" "$WORK/cpu" "$s0" "$(srv_ms)" >> "$WORK/parts"
}
# raw: ms of plain GETs of every chunk on the server (the bytes a pull moves).
raw() { "$BENCH" "$@" --raw-all | awk '$1 == "raw-all" {print $3; print $2 > "/dev/stderr"}' 2> "$WORK/rawbytes"; }
"$MILC" --cache-dir "$WORK/producer" "${R[@]}" "${REQ[@]}" > /dev/null   # build once, write back
cold=(); pulled=(); upulled=(); rawt=(); rawu=()
for i in $(seq "$ROUNDS"); do
  rm -rf "$WORK/c"; cold+=("$(ms "$MILC" --cache-dir "$WORK/c" "${REQ[@]}")")
  rm -rf "$WORK/c"; pulled+=("$(ms "$MILC" --cache-dir "$WORK/c" "${R[@]}" "${REQ[@]}")")
  "$MILC" --cache-dir "$WORK/c" --json "${REQ[@]}" | grep -q '"outcome":"direct_hit"'
  rm -rf "$WORK/c"; upulled+=("$(ms "$MILC" --cache-dir "$WORK/c" "${U[@]}" "${REQ[@]}")")
  "$MILC" --cache-dir "$WORK/c" --json "${REQ[@]}" | grep -q '"outcome":"direct_hit"'
  rawt+=("$(raw --port "$PORT")"); rawu+=("$(raw --socket "$SOCK")")
done
med() { printf '%s\n' "$@" | sort -n | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
c=$(med "${cold[@]}"); p=$(med "${pulled[@]}"); u=$(med "${upulled[@]}")
rt=$(med "${rawt[@]}"); ru=$(med "${rawu[@]}"); mb=$(awk '{printf "%.0f", $1 / 1e6}' "$WORK/rawbytes")
st=$(med $(awk 'NR % 3 == 1 {print $1}' "$WORK/parts"))   # the cold builds' stores (fsynced LMDB puts)
lk=$(med $(awk 'NR % 3 == 2 {print $2}' "$WORK/parts"))   # the TCP pulls' lookups (fetch, MACs, put)
lu=$(med $(awk 'NR % 3 == 0 {print $2}' "$WORK/parts"))   # the socket pulls' lookups
echo "${REQ[*]}: cold ${cold[*]} ms; pulled over TCP ${pulled[*]} ms; over the Unix socket ${upulled[*]} ms (medians $c, $p, $u)"
echo "raw pipelined GETs of the same $mb MB of chunks: TCP ${rawt[*]} ms, socket ${rawu[*]} ms (medians $rt, $ru)"
awk -v c="$c" -v p="$p" -v u="$u" 'BEGIN { printf "issue #19: cold build / remote pull = %.2f over TCP, %.2f over the Unix socket (goal >= 5)\n", c / p, c / u }'
awk -v c="$c" -v t="$rt" -v u="$ru" 'BEGIN { printf "  ceiling: cold build / raw GETs of the same bytes = %.2f over TCP, %.2f over the socket\n", c / (t > 0 ? t : 1), c / (u > 0 ? u : 1) }'
awk -v c="$c" -v p="$p" -v u="$u" -v s="$st" -v l="$lk" -v m="$lu" -v t="$rt" -v r="$ru" 'BEGIN { printf "  parts: cold = %d ms stores (waiting for the disk) + %d ms the rest; pulled = lookups (fetch, MACs, put without a sync; raw GETs alone %d / %d ms) %d ms TCP, %d ms socket + the rest (process, template, exit) %d / %d ms\n", s, c - s, t, r, l, m, p - l, u - m }'
# CPU time, steadier than wall under load: milc's own, plus redis-server's
# while a pull ran (it does half the copying).  It leaves out the cold
# build's waits for the disk, so its ratio is the lower one.
cc=$(med $(awk 'NR % 3 == 1 {print $3}' "$WORK/parts"))
pc=$(med $(awk 'NR % 3 == 2 {print $3 + $4}' "$WORK/parts")); uc=$(med $(awk 'NR % 3 == 0 {print $3 + $4}' "$WORK/parts"))
ps=$(med $(awk 'NR % 3 == 2 {print $4}' "$WORK/parts")); us=$(med $(awk 'NR % 3 == 0 {print $4}' "$WORK/parts"))
awk -v c="$cc" -v p="$pc" -v u="$uc" -v a="$ps" -v b="$us" 'BEGIN { printf "  CPU time (medians): cold %d ms; pulled, milc + redis-server, %d ms TCP (server %d), %d ms socket (server %d): cold / pulled = %.2f TCP, %.2f socket\n", c, p, a, u, b, c / (p > 0 ? p : 1), c / (u > 0 ? u : 1) }'
echo "load: $(uptime)"
