#!/bin/sh
# bench_emit.sh MILC — `milc emit --model gpt2` (all 12 layers, random weights)
# and cp its weight file, side by side, best of 3 each.  The goal: emit takes
# at most twice the copy.  Prints one line per step and the ratio.
set -e
tool=${1:?usage: bench_emit.sh MILC}
dir=$(mktemp -d /tmp/milc-bench-emit.XXXXXX)
trap 'rm -rf "$dir"' EXIT
now() { date +%s.%N; }
best_emit=999; best_cp=999
for i in 1 2 3; do
    rm -rf "$dir/out" "$dir/copy.bin"
    t0=$(now); "$tool" emit --model gpt2 --weights random:0 -o "$dir/out" -q; t1=$(now)
    cp "$dir/out/weights/weight.bin" "$dir/copy.bin"; t2=$(now)
    best_emit=$(echo "$t0 $t1 $best_emit" | awk '{d=$2-$1; print (d<$3)?d:$3}')
    best_cp=$(echo "$t1 $t2 $best_cp" | awk '{d=$2-$1; print (d<$3)?d:$3}')
done
bytes=$(stat -c %s "$dir/out/weights/weight.bin")
echo "$bytes $best_emit $best_cp" | awk '{
    printf "weights      %.1f MB\n", $1/1e6;
    printf "emit gpt2    %.3f s  (%.0f MB/s)\n", $2, $1/1e6/$2;
    printf "cp weights   %.3f s  (%.0f MB/s)\n", $3, $1/1e6/$3;
    printf "emit / cp    %.2f\n", $2/$3 }'
