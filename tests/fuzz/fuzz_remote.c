/* fuzz_remote.c — libFuzzer target: a remote entry's manifest as a pull reads
 * it.  Each input is checked as is (its MAC fails: refused) and re-sealed
 * (the MAC recomputed under the target's own secret), so mutations reach
 * the field checks behind the MAC; an accepted manifest must account for
 * every byte. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "milc/remote.h"

static const uint8_t secret[REMOTE_SECRET_BYTES] = {'f', 'u', 'z', 'z'};

static void check_one(const uint8_t *buf, size_t size) {
    char err[600] = "";
    int rc = remote_manifest_check(secret, buf, size, err, sizeof err);
    if (rc != 0 && (rc != CACHE_ECORRUPT || !err[0])) abort();
    if (rc == 0 && (size < 128 || memcmp(buf, "MILCRM01", 8) != 0)) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (sodium_init() < 0) abort();
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf) return 0;
    memcpy(buf, data, size);
    check_one(buf, size);
    if (size >= 16) {
        crypto_generichash(buf + size - 16, 16, buf, size - 16, secret, sizeof secret);
        check_one(buf, size);
    }
    free(buf);
    return 0;
}
