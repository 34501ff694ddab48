#!/usr/bin/env bash
# Reproducer (route: cli/pipeline.c, cli emit): when writing weight.bin fails
# (disk full), `milc build` exits 1 ("invalid input") instead of 3 (I/O): the
# pipeline maps every gen_generate failure to EXIT_INPUT.  The message itself
# was missing too (a gen bug, fixed in compiler/gen/weights.c).  Needs root
# for the tmpfs.  Usage: full-disk-exit-code.sh MILC
set -u
M=${1:?MILC}; D=$(mktemp -d); trap 'umount "$D" 2>/dev/null; rm -rf "$D"' EXIT
mount -t tmpfs -o size=20m tmpfs "$D" || { echo "cannot mount"; exit 0; }
"$M" --cache-dir "$D/c" build --template gpt2 --layers 2 --model_layers 2 --dim 768 --heads 12 --ffn 3072 --seq 16
echo "build exit $? (want 3: I/O failure)"
