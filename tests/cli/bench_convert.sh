#!/bin/sh
# bench_convert.sh MILC — a GPT-2 4-layer chunk (real shapes, random weights)
# converted text -> .mlpackage and .mlpackage -> text, against `cp` of its
# weight file, side by side, best of 5 each.  The goal: each conversion takes
# at most twice the copy (weights are copied, never re-encoded).  Prints one
# line per step and the ratios.
set -e
tool=${1:?usage: bench_convert.sh MILC}
dir=$(mktemp -d /tmp/milc-bench-convert.XXXXXX)
trap 'rm -rf "$dir"' EXIT
"$tool" emit --model gpt2 --layers 4 --weights random:0 -o "$dir/chunk" -q
now() { date +%s.%N; }
best() { echo "$1 $2 $3" | awk '{d=$2-$1; print (d<$3)?d:$3}'; }
b_cp=999; b_to=999; b_from=999
for i in 1 2 3 4 5; do
    rm -rf "$dir/copy.bin" "$dir/p.mlpackage" "$dir/back"
    t0=$(now); cp "$dir/chunk/weights/weight.bin" "$dir/copy.bin"; t1=$(now)
    "$tool" -q convert "$dir/chunk" -o "$dir/p.mlpackage"; t2=$(now)
    "$tool" -q convert "$dir/p.mlpackage" -o "$dir/back"; t3=$(now)
    b_cp=$(best "$t0" "$t1" "$b_cp"); b_to=$(best "$t1" "$t2" "$b_to"); b_from=$(best "$t2" "$t3" "$b_from")
done
cmp -s "$dir/back/model.mil" "$dir/chunk/model.mil" || { echo "round trip changed the program" >&2; exit 1; }
bytes=$(stat -c %s "$dir/chunk/weights/weight.bin")
echo "$bytes $b_cp $b_to $b_from" | awk '{
    printf "weights              %.1f MB\n", $1/1e6;
    printf "cp weights           %.4f s\n", $2;
    printf "text -> mlpackage    %.4f s\n", $3;
    printf "mlpackage -> text    %.4f s\n", $4;
    printf "text -> mlpackage / cp    %.2f\n", $3/$2;
    printf "mlpackage -> text / cp    %.2f\n", $4/$2 }'
