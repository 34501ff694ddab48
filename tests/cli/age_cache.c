/* age_cache.c — make a cache look as if another milc had written it, for the
 * drift tests: every entry and direct key is stored again under a key record
 * whose FIELD item (default MVER, the milc version) says VALUE (so under
 * another key), and the originals are removed.
 * milc_age_cache DIR VALUE [FIELD] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "milc/cache.h"

static uint32_t g_tag = 0x4d564552u; /* MVER */

typedef struct {
    CacheKey old[256], new_[256];
    int n;
} Map;

static int reversion(const uint8_t *rec, size_t len, const char *ver, CacheKeyBuilder *b, CacheKey *k) {
    size_t pos = 0;
    uint32_t tag;
    const uint8_t *p;
    uint64_t n;
    ckey_init(b);
    while (ckey_record_next(rec, len, &pos, &tag, &p, &n) == 1)
        ckey_add(b, tag, tag == g_tag ? (const void *)ver : p, tag == g_tag ? strlen(ver) : n);
    return ckey_finish(b, k);
}

static Cache *g_c;
static const char *g_ver;
static Map g_map;

static int collect(void *ctx, const CacheEntryInfo *e) {
    (void)ctx;
    if (g_map.n < 256) g_map.old[g_map.n++] = e->key;
    return 0;
}

static int age_entry(int i) {
    CacheHit *h;
    if (cache_get(g_c, &g_map.old[i], NULL, 0, CACHE_GET_NOTOUCH, &h) != 0) return -1;
    const CacheEntryInfo *e = cache_hit_info(h);
    const CacheSection *s;
    int n;
    CacheKeyBuilder b;
    int rc = cache_hit_sections(h, &s, &n) || reversion(e->record, e->record_len, g_ver, &b, &g_map.new_[i]);
    CacheSection *copy = calloc((size_t)n, sizeof *copy);
    for (int k = 0; !rc && k < n; k++) {
        void *d = malloc(s[k].size + 1);
        memcpy(d, s[k].data, s[k].size);
        copy[k] = (CacheSection){d, s[k].size};
    }
    CacheEntryMeta m = {
        .description = e->description, .backend = e->backend, .mode = e->mode, .compile_ns = e->compile_ns};
    char desc[4096];
    snprintf(desc, sizeof desc, "%s", e->description);
    m.description = desc;
    cache_hit_release(h);
    if (!rc) rc = cache_put(g_c, &g_map.new_[i], b.buf, b.len, &m, copy, n) || cache_rm(g_c, &g_map.old[i]);
    for (int k = 0; k < n; k++) free((void *)copy[k].data);
    free(copy);
    ckey_free(&b);
    return rc;
}

typedef struct {
    CacheKey dkey[256];
    uint8_t *rec[256];
    size_t len[256];
    CacheKey akey[256];
    int n;
} Directs;
static Directs g_d;

static int collect_direct(void *ctx, const CacheKey *dk, const uint8_t *rec, size_t len, const CacheKey *ak) {
    (void)ctx;
    if (g_d.n == 256) return 0;
    g_d.dkey[g_d.n] = *dk, g_d.akey[g_d.n] = *ak, g_d.len[g_d.n] = len;
    g_d.rec[g_d.n] = malloc(len + 1);
    memcpy(g_d.rec[g_d.n++], rec, len);
    return 0;
}

int main(int argc, char **argv) {
    char err[512];
    if (argc != 3 && !(argc == 4 && strlen(argv[3]) == 4)) {
        fprintf(stderr, "usage: milc_age_cache DIR VALUE [FIELD]\n");
        return 2;
    }
    if (argc == 4) {
        const unsigned char *t = (const unsigned char *)argv[3];
        g_tag = (uint32_t)t[0] << 24 | (uint32_t)t[1] << 16 | (uint32_t)t[2] << 8 | t[3];
    }
    g_ver = argv[2];
    if (cache_open(&g_c, argv[1], NULL, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return 3;
    }
    if (cache_ls(g_c, collect, NULL) != 0 || cache_direct_ls(g_c, collect_direct, NULL) != 0) return 3;
    for (int i = 0; i < g_map.n; i++)
        if (age_entry(i) != 0) {
            fprintf(stderr, "aging entry %d failed: %s\n", i, cache_errmsg(g_c));
            return 3;
        }
    for (int i = 0; i < g_d.n; i++) {
        CacheKeyBuilder b;
        CacheKey dk, ak = g_d.akey[i];
        for (int k = 0; k < g_map.n; k++)
            if (!memcmp(g_map.old[k].b, ak.b, 16)) ak = g_map.new_[k];
        if (reversion(g_d.rec[i], g_d.len[i], g_ver, &b, &dk) != 0 ||
            cache_direct_put(g_c, &dk, b.buf, b.len, &ak) != 0)
            return 3;
        ckey_free(&b);
        free(g_d.rec[i]);
    }
    cache_close(g_c);
    printf("aged %d entries and %d direct keys to version %s\n", g_map.n, g_d.n, g_ver);
    return 0;
}
