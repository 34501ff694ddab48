#!/usr/bin/env bash
# Reproducers (route: cache/src/cache.c; found by tests/fuzz/fuzz_cachefile):
# damaged data.mdb files that pass cache_open's meta-page checks and then
# kill milc inside LMDB, which trusts its file:
#  - lmdb-fpe/data.mdb: meta page 1 (the newer, txnid 1) has page size 0 and
#    map size 18577349536645120: mdb_env_open divides by the page size, and
#    EVERY command (cache ls, verify, build, run) dies by SIGFPE (exit 136).
#    Fix: at open, take the meta with the larger txnid, as LMDB does, and
#    require its page size == the OS page size and a sane map size (and the
#    other meta's txnid to differ by one), else CACHE_ECORRUPT.
#  - lmdb-abort/data.mdb: pages mutated behind valid metas: `cache verify`,
#    `cache gc` and `build` abort in mdb_put (flushing pending statistics):
#    "mdb.c:7616: Assertion 'mx != NULL' failed in mdb_cursor_init()"
#    (exit 134); `cache ls`/`stat` pass.  A named database's record claims
#    sorted duplicates: check each sub-database's flags at open, and/or
#    install mdb_env_set_assert to report the damage before LMDB aborts.
# Expected for both: exit 3, "cache file … is damaged; run `milc cache
# clear`" (which does cure both today).  Usage: lmdb-damage.sh MILC
set -u
M=${1:?MILC}; W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
here=$(cd "$(dirname "$0")" && pwd)
for f in "$here"/lmdb-*/data.mdb; do
  for cmd in "cache ls" "cache verify" "cache gc" "build --template gpt2 --layers 1 --model_layers 1 --dim 16 --heads 2 --ffn 32 --seq 16"; do
    rm -rf "$W/c"; mkdir "$W/c"; cp "$f" "$W/c/"
    # shellcheck disable=SC2086
    "$M" --cache-dir "$W/c" $cmd > /dev/null 2> "$W/err"; rc=$?
    echo "$(basename "$(dirname "$f")"): milc $cmd: exit $rc (want <= 3) $(tail -1 "$W/err")"
  done
done
