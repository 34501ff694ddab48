#!/usr/bin/env bash
# kill.sh MILC — SIGKILL `milc build`, `milc prewarm`, `milc cache gc`
# (compaction) and `milc cache import` at random instants.
# After every kill `milc cache verify` must find no bad entry, and rerunning
# the killed command must complete.  Iterations: $MILC_TORTURE_KILLS
# (default 50, about 30 s; use 200+ for a local soak).
. "$(dirname "$0")/lib.sh"
N=${MILC_TORTURE_KILLS:-50}
C="$WORK/cache"
killed=0 finished=0
declare -A kinds
for i in $(seq 1 "$N"); do
  dim=$(( (1 + i % 3) * 64 )); ffn=$((dim * 4)); mode=$((i % 3))
  small="--template gpt2 --layers 2 --model_layers 2 --dim $dim --heads 2 --ffn $ffn --seq 16"
  if [ $((i % 10)) = 5 ]; then
    # gc compacts: it rewrites the whole file under a lock.
    cmd=("$MILC" --cache-dir "$C" -q cache gc)
  elif [ $((i % 10)) = 7 ] && [ -f "$WORK/bundle" ]; then
    cmd=("$MILC" --cache-dir "$C" -q cache import "$WORK/bundle")
  elif [ $((i % 2)) = 0 ]; then
    cmd=("$MILC" --cache-dir "$C" -q build $small --weights random:$i --mode $mode)
  else
    printf -- '%s --weights random:%d --mode 0,2 --seq 16,32\n# a comment\n%s --weights random:%d --mode 1\n' \
      "$small" "$i" "$small" "$((i + 100000))" > "$WORK/manifest"
    cmd=("$MILC" --cache-dir "$C" -q prewarm "$WORK/manifest" -j 2)
  fi
  # Its own process group, so a kill can take the prewarm workers with it.
  setsid "${cmd[@]}" > "$WORK/kill.out" 2> "$WORK/kill.err" &
  pid=$!
  # Spread the kill over each command's usual run time (measured: gc and
  # import take a few ms, a build tens, a prewarm of 6 programs ~100).
  case ${cmd[4]} in cache) span=25 ;; build) span=70 ;; *) span=120 ;; esac
  sleep "0.$(printf '%03d' "$(rand $span)")"
  if kill -0 "$pid" 2> /dev/null; then
    # Half the prewarm kills hit only the parent: orphaned workers run on.
    if [ $((i % 4)) = 1 ]; then kill -KILL "$pid"; else kill -KILL -- "-$pid" 2> /dev/null || kill -KILL "$pid"; fi
    kind=${cmd[4]}; [ "$kind" = cache ] && kind="cache-${cmd[5]}"
    killed=$((killed + 1)); kinds[$kind]=$((${kinds[$kind]:-0} + 1))
  else
    finished=$((finished + 1))
  fi
  wait "$pid" 2> /dev/null
  verify_clean "$C" "after kill $i (${cmd[*]:3:2})"
  m "${cmd[@]:1}"
  if [ "$RC" = 0 ]; then ok; else fail "rerun after kill $i: exit $RC: $ERR"; fi
  # A bundle of the cache so far, for the import kills.
  [ "$i" = 4 ] && "$MILC" --cache-dir "$C" cache export "$WORK/bundle" > /dev/null 2>&1
done
# Orphaned workers may still be finishing; the cache must end clean too.
sleep 0.5
verify_clean "$C" "at the end"
echo "kill.sh: $N iterations, $killed killed mid-run ($(for k in "${!kinds[@]}"; do printf '%s %s, ' "${kinds[$k]}" "$k"; done | sed 's/, $//')), $finished finished before the kill"
finish
