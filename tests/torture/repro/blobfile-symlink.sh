#!/usr/bin/env bash
# Reproducer (route: compiler/mil check.c, compiler/backend weight loading):
# a BLOBFILE path "@model_path/weights/weight.bin" is resolved textually, so a
# symlinked weights/ directory or weight.bin pointing outside the model
# directory is followed: `milc check` and `milc compile` read (and embed into
# the artifact) a file outside the model.  Expected: exit 1, "BLOBFILE ...
# resolves outside the model directory" (realpath + prefix check, as
# compiler/gen/template.c does for blocks), or a documented decision that
# symlinked weights are allowed.  Usage: blobfile-symlink.sh MILC
set -u
M=${1:?MILC}; W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
"$M" emit --template gpt2 --layers 1 --model_layers 1 --dim 16 --heads 2 --ffn 32 --seq 16 -o "$W/good" > /dev/null 2>&1
mkdir -p "$W/outside" "$W/model"; cp "$W/good/weights/weight.bin" "$W/outside/"; cp "$W/good/model.mil" "$W/model/"
ln -s "$W/outside" "$W/model/weights"
"$M" check "$W/model/model.mil"; echo "check exit $? (want 1)"
"$M" compile "$W/model/model.mil" -o "$W/x.milc"; echo "compile exit $? (want 1)"
