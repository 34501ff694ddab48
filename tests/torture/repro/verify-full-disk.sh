#!/usr/bin/env bash
# Reproducer (route: cache/src/cache.c): on a full disk `milc cache verify`
# exits 3 "cannot reserve N bytes of disk for data.mdb: No space left on
# device": verify runs in a write transaction (cache_write_txn reserves disk
# before it begins), so the one command meant to inspect a cache cannot run
# when it is most needed.  Expected: verify (without --repair) reads only
# and succeeds.  A cached `milc build` hit on the same full disk works.
# Needs root for the tmpfs.  Usage: verify-full-disk.sh MILC
set -u
M=${1:?MILC}; D=$(mktemp -d); trap 'umount "$D" 2>/dev/null; rm -rf "$D"' EXIT
mount -t tmpfs -o size=20m tmpfs "$D" || { echo "cannot mount"; exit 0; }
"$M" --cache-dir "$D/c" -q build --template gpt2 --layers 2 --model_layers 2 --dim 64 --heads 2 --ffn 128 --seq 16
dd if=/dev/zero of="$D/fill" bs=64k 2>/dev/null
"$M" --cache-dir "$D/c" cache verify; echo "verify exit $? (want 0)"
