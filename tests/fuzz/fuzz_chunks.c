/* fuzz_chunks.c — libFuzzer target: the chunk replies a pull reads from the
 * server (remote_redis.c parses them itself, straight into their place).
 * The first input byte picks the entry: 200 bytes in chunks of 64 (the tags
 * checked on their own thread) or of 256 (one chunk, checked inline); the
 * rest is what the server sends.  Whatever it is, the reader returns a code
 * with a reason, and accepts only the entry's own bytes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "milc/remote.h"

static const uint8_t secret[REMOTE_SECRET_BYTES] = {'c', 'h', 'u', 'n', 'k'};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (sodium_init() < 0) abort();
    if (size < 1) return 0;
    uint8_t payload[200];
    for (int i = 0; i < 200; i++) payload[i] = (uint8_t)(i * 7 + 3);
    char err[600] = "";
    int rc = remote_chunks_check(secret, data[0] & 1 ? 256 : 64, payload, sizeof payload, data + 1, size - 1, err,
                                 sizeof err);
    if (rc == CACHE_ENOMEM) return 0; /* over the input bound */
    if (rc != 0 && !err[0]) abort();
    if (rc == CACHE_EINVAL) abort(); /* accepted bytes that differ, or read past the end */
    return 0;
}
