# The storage seam against a real redis-server: tests/cache/test_store (the
# same conformance checks as for the LMDB cache, and a copy from the shared
# tier into a local cache) with $MILC_TEST_REDIS_PORT set.
source "$SRC/tests/remote/redis.sh"
redis_start
BIN=$(dirname "$MILC")/../tests/cache/test_store
expect_rc 0 env MILC_TEST_REDIS_PORT="$REDIS_PORT" "$BIN"
case "$ERR" in *skipped*) fail "test_store skipped the Redis store: $ERR" ;; *) ok ;; esac
