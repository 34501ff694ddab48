/* fuzz_bundle.c — libFuzzer target: cache_bundle_check on arbitrary bytes
 * must never read out of bounds, and must accept only what it can account
 * for: an accepted buffer has a valid header and trailer.  Each input is
 * checked twice: as is, and re-sealed (version set to the current one,
 * trailer magic and whole-file hash rewritten), so mutations reach the entry parser behind the hash. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "milc/cache.h"

static void check_one(uint8_t *buf, size_t size) {
    char err[256] = "";
    int n = cache_bundle_check(buf, size, err, sizeof err);
    if (n >= 0) {
        if (size < 48 || memcmp(buf, "MILCBNDL", 8) != 0 || memcmp(buf + size - 32, "MILCEND1", 8) != 0) abort();
    } else if (n != CACHE_EBUNDLE && n != CACHE_ENOMEM) {
        abort();
    } else if (n == CACHE_EBUNDLE && strncmp(err, "bad bundle: ", 12) != 0) {
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* A private copy sized exactly, so ASan catches a read one past the end. */
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf) return 0;
    memcpy(buf, data, size);
    check_one(buf, size);
    if (size >= 48) {
        /* Re-versioned too: seeds written in an older format (version 1,
         * cache/README.md) still reach the entry parser. */
        buf[8] = 2, buf[9] = buf[10] = buf[11] = 0;
        memcpy(buf + size - 32, "MILCEND1", 8);
        CacheKey h;
        cache_key_of(buf, size - 32, &h);
        memcpy(buf + size - 16, h.b, 16);
        check_one(buf, size);
    }
    free(buf);
    return 0;
}
