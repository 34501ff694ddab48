# The remote tier under load and failure: 8 concurrent pushers and pullers,
# a server killed in the middle of pulls, pushers killed in the middle of
# pushes, and a server whose maxmemory evicts chunks.  Whatever happens, every
# command exits 0 (or as documented), no partial or unauthenticated entry is
# ever stored, and every local cache verifies clean.
source "$SRC/tests/remote/redis.sh"
[ -n "${TRACE:-}" ] && set -x
redis_start
P=$REDIS_PORT
KEY=$WORK/team.key
new_key "$KEY"
R=(--remote "redis://127.0.0.1:$P" --remote-key-file "$KEY")
verify_clean() { expect_rc 0 "$MILC" --cache-dir "$1" cache verify; expect_in "$OUT" "0 bad entries"; }

# ---- 8 at once: 4 pushers and 4 read-only pullers of the same 3 programs ----
export MILC_REMOTE_CHUNK=65536
# at_once NAME RO ARGS...: 8 milc processes at once, the i-th on cache
# $WORK/NAME$i, read-only from the RO-th on; out$i, err$i, rc$i hold the results.
at_once() {
  local name=$1 ro_from=$2 i pids=()
  shift 2
  for i in 1 2 3 4 5 6 7 8; do
    local ro=(); [ "$i" -ge "$ro_from" ] && ro=(--remote-readonly)
    ( "$MILC" --cache-dir "$WORK/$name$i" "${R[@]}" "${ro[@]}" "$@" > "$WORK/out$i" 2> "$WORK/err$i"; echo $? > "$WORK/rc$i" ) &
    pids+=($!)
  done
  wait "${pids[@]}"
}
at_once p 5 build --model tiny --seq 16,32,48
for i in 1 2 3 4 5 6 7 8; do
  expect_eq "$(cat "$WORK/rc$i")" 0
  expect_not_in "$(cat "$WORK/err$i")" "warning"
  verify_clean "$WORK/p$i"
done
expect_rc 0 "$MILC" "${R[@]}" --json cache stat --remote
# three entries, and no chunk left behind by the pushers that lost the race
want=$("$MILC" --cache-dir "$WORK/p1" --json cache ls | "$PY" -c "import json,sys; print(sum((e['bytes'] + 65535) // 65536 for e in json.load(sys.stdin)))")
expect_json "$OUT" "j['remote']['entries'] == 3 and j['remote']['chunks'] == $want"
at_once q 9 cache pull
for i in 1 2 3 4 5 6 7 8; do
  expect_eq "$(cat "$WORK/rc$i")" 0
  expect_in "$(cat "$WORK/out$i")" "pulled 3"
  verify_clean "$WORK/q$i"
done

# ---- the server killed in the middle of pulls (1 MiB chunks, 27 MB) ----
unset MILC_REMOTE_CHUNK
expect_rc 0 "$MILC" --cache-dir "$WORK/big" "${R[@]}" build --layers 2 --json
for delay in 0.01 0.03 0.06 0.1 0.2; do
  c=$(fresh k)
  "$MILC" --cache-dir "$c" "${R[@]}" build --layers 2 --json > "$WORK/kout" 2> "$WORK/kerr" &
  bp=$!
  sleep "$delay"; redis_stop "$REDIS_PID"
  brc=0; wait "$bp" || brc=$?
  expect_eq "$brc" 0
  n=$(grep -c 'warning: remote cache' "$WORK/kerr" || true)
  if [ "$n" -le 1 ]; then ok; else fail "$n warnings for one dead server"; fi
  verify_clean "$c"
  redis_start "$P"
  expect_rc 0 "$MILC" --cache-dir "$WORK/big" "${R[@]}" cache push
done

# ---- pushers killed in the middle of pushes: nothing half-published ----
for delay in 0.3 0.6 0.9 1.2; do
  "$MILC" --cache-dir "$(fresh kp)" "${R[@]}" build --layers 2 --seq 32 > /dev/null 2>&1 &
  bp=$!
  sleep "$delay"; kill -9 "$bp" 2>/dev/null || true; wait "$bp" 2>/dev/null || true
  # every published entry pulls whole and authentic
  expect_rc 0 "$MILC" --cache-dir "$(fresh kq)" "${R[@]}" cache pull
  verify_clean "$WORK/kq"
done
# a killed push's staged chunks expire rather than stay
stray=$(rcli --scan --pattern 'milc:c:*' | head -400 | while read -r k; do rcli ttl "$k"; done | grep -cv '^-1$' || true)
total=$(rcli --scan --pattern 'milc:c:*' | wc -l)
persisted=$(rcli --scan --pattern 'milc:c:*' | while read -r k; do rcli ttl "$k"; done | grep -c '^-1$' || true)
entries=$("$MILC" "${R[@]}" --json cache stat --remote | "$PY" -c "import json,sys; print(json.load(sys.stdin)['remote']['entries'])")
expect_eq "$((persisted + stray))" "$total"
if [ "$persisted" -le $((entries * 28)) ]; then ok; else fail "$persisted permanent chunks for $entries entries"; fi

# ---- maxmemory evicting chunks: entries go whole or not at all ----
redis_start "" --maxmemory 6mb --maxmemory-policy allkeys-random
M=(--remote "redis://127.0.0.1:$REDIS_PORT" --remote-key-file "$KEY")
export MILC_REMOTE_CHUNK=65536
expect_rc 0 "$MILC" --cache-dir "$(fresh mm)" "${M[@]}" build --model tiny --seq $(seq -s, 16 16 320) --json
expect_rc 0 "$MILC" "${M[@]}" --json cache stat --remote
expect_json "$OUT" "j['remote']['evicted_keys'] > 0"
keys=$("$MILC" --cache-dir "$WORK/mm" --json cache ls | "$PY" -c "import json,sys; print(' '.join(e['key'] for e in json.load(sys.stdin)))")
whole=0; gone=0
for k in $keys; do
  run "$MILC" --cache-dir "$(fresh mq)" "${M[@]}" cache pull "$k"
  case "$RC" in 0) whole=$((whole + 1)); verify_clean "$WORK/mq";; 1) gone=$((gone + 1)); ok;; *) fail "pull of $k exited $RC: $ERR";; esac
done
echo "maxmemory: $whole entries whole, $gone evicted in part or whole"
if [ "$gone" -gt 0 ]; then ok; else fail "maxmemory evicted nothing: the test did not test"; fi
# a build against it is never wrong, only slower
expect_rc 0 "$MILC" --cache-dir "$(fresh mb)" "${M[@]}" build --model tiny --seq $(seq -s, 16 16 160) --json
verify_clean "$WORK/mb"
