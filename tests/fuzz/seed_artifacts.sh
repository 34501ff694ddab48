#!/usr/bin/env bash
# Compile small artifacts to seed fuzz_artifact: GPT-2 and Llama chunks of
# one tiny layer, prefill and decode, in every compile mode, plus a program
# of literals.  Made from the built milc on every run, so they always have
# the current artifact format and none is committed.
#   tests/fuzz/seed_artifacts.sh MILC OUTDIR
set -euo pipefail
milc=${1:?usage: seed_artifacts.sh MILC OUTDIR}
out=${2:?usage: seed_artifacts.sh MILC OUTDIR}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for spec in "gpt2 prefill 0" "gpt2 decode 2" "gpt2 prefill 1" "llama prefill 1" "llama decode 0" "llama decode 2" \
            "gpt2 decode 0 state" "llama decode 2 state"; do
  set -- $spec
  d="$work/$1-$2${4:+-$4}"
  extra=()
  [ "$1" = llama ] && extra=(--kv_heads 1)
  [ -n "${4:-}" ] && extra+=(--kv state) # the cache as states: state buffers and records, RT_OP_UPDATE
  [ -d "$d" ] || "$milc" -q --cache-dir "$work/cache" emit --template "$1" --layers 1 --dim 16 --heads 2 --ffn 32 \
      --seq 4 --min_seq 1 --ctx 8 --phase "$2" "${extra[@]}" -o "$d" > /dev/null
  "$milc" -q compile "$d/model.mil" --model-path "$d" --mode "$3" -o "$out/$1-$2-$3${4:+-$4}.milc" > /dev/null
done
for m in 0 1 2; do
  "$milc" -q compile "$here/../mil/golden/literals.mil" --mode "$m" -o "$out/literals-$m.milc" > /dev/null
done
