/* put_text_entry.c — store one small entry whose description is argv[2]
 * byte for byte in the cache at argv[1]: what a hostile bundle can carry,
 * for the CLI's output tests (tests/cli/test_cache_text.sh). */
#include <stdio.h>
#include <string.h>

#include "milc/cache.h"

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: put_text_entry CACHE_DIR DESCRIPTION\n");
        return 2;
    }
    char err[512];
    Cache *c;
    if (cache_open(&c, argv[1], NULL, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    CacheKeyBuilder b;
    CacheKey key;
    ckey_init(&b);
    ckey_add_str(&b, 0x54455854u /* TEXT */, argv[2]);
    ckey_finish(&b, &key);
    static const char bytes[64] = "section";
    CacheSection s = {bytes, sizeof bytes};
    CacheEntryMeta m = {.description = argv[2], .backend = "cpu", .mode = 0};
    int rc = cache_put(c, &key, b.buf, b.len, &m, &s, 1);
    if (rc) fprintf(stderr, "put: %s\n", cache_errmsg(c));
    ckey_free(&b);
    cache_close(c);
    return rc ? 1 : 0;
}
