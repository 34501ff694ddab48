/* key.c — key records (tag + length + bytes items) and their XXH3-128 keys.
 * The CLI decides what goes into a record; this file only makes the encoding
 * unambiguous and the hash canonical. */
#include <stdarg.h>

#define XXH_STATIC_LINKING_ONLY /* XXH3_state_t on the stack */
#include <xxhash.h>

#include "internal.h"

void ckey_init(CacheKeyBuilder *b) { memset(b, 0, sizeof *b); }

void ckey_free(CacheKeyBuilder *b) {
    free(b->buf);
    memset(b, 0, sizeof *b);
}

int ckey_add(CacheKeyBuilder *b, uint32_t tag, const void *bytes, size_t len) {
    if (b->err) return b->err;
    size_t need = b->len + 12 + len;
    if (need < b->len) return b->err = CACHE_ENOMEM;
    if (need > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < need) cap *= 2;
        uint8_t *nb = realloc(b->buf, cap);
        if (!nb) return b->err = CACHE_ENOMEM;
        b->buf = nb, b->cap = cap;
    }
    st32(b->buf + b->len, tag);
    st64(b->buf + b->len + 4, len);
    if (len) memcpy(b->buf + b->len + 12, bytes, len);
    b->len = need;
    return 0;
}

int ckey_add_u64(CacheKeyBuilder *b, uint32_t tag, uint64_t v) {
    uint8_t le[8];
    st64(le, v);
    return ckey_add(b, tag, le, 8);
}

int ckey_add_str(CacheKeyBuilder *b, uint32_t tag, const char *s) {
    return ckey_add(b, tag, s ? s : "", s ? strlen(s) : 0);
}

int ckey_finish(CacheKeyBuilder *b, CacheKey *key) {
    if (b->err) return b->err;
    cache_key_of(b->buf, b->len, key);
    return 0;
}

void cache_key_of(const void *record, size_t len, CacheKey *key) {
    /* The canonical (big-endian) form, so the hex equals `xxhsum -H2`. */
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, XXH3_128bits(record ? record : "", len));
    memcpy(key->b, c.digest, 16);
}

void cache_key_hex(const CacheKey *k, char out[33]) {
    static const char hexd[] = "0123456789abcdef";
    for (int i = 0; i < 16; i++) out[2 * i] = hexd[k->b[i] >> 4], out[2 * i + 1] = hexd[k->b[i] & 15];
    out[32] = 0;
}

static int hexval(char ch) {
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
    return -1;
}

int cache_key_parse(const char *hex, CacheKey *k) {
    if (!hex || strlen(hex) != 32) return CACHE_EINVAL;
    for (int i = 0; i < 16; i++) {
        int hi = hexval(hex[2 * i]), lo = hexval(hex[2 * i + 1]);
        if (hi < 0 || lo < 0) return CACHE_EINVAL;
        k->b[i] = (uint8_t)(hi << 4 | lo);
    }
    return 0;
}

int ckey_record_next(const void *rec, size_t len, size_t *pos, uint32_t *tag, const uint8_t **bytes,
                     uint64_t *item_len) {
    const uint8_t *p = rec;
    if (*pos == len) return 0;
    if (*pos > len || len - *pos < 12) return CACHE_EINVAL;
    uint64_t n = ld64(p + *pos + 4);
    if (n > len - *pos - 12) return CACHE_EINVAL;
    *tag = ld32(p + *pos);
    *bytes = p + *pos + 12;
    *item_len = n;
    *pos += 12 + (size_t)n;
    return 1;
}

void cache_fmt(char *buf, size_t len, const char *fmt, ...) {
    if (!buf || !len) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, len, fmt, ap);
    va_end(ap);
}

const char *cache_strerror(int rc) {
    switch (rc) {
    case CACHE_OK: return "success";
    case CACHE_ENOTFOUND: return "not found";
    case CACHE_EMISMATCH: return "key record mismatch";
    case CACHE_ECORRUPT: return "corrupt";
    case CACHE_EIO: return "I/O error";
    case CACHE_ENOMEM: return "out of memory";
    case CACHE_EINVAL: return "invalid argument";
    case CACHE_EBUSY: return "cache in use";
    case CACHE_EFULL: return "cache map full";
    case CACHE_EBUNDLE: return "bad bundle";
    case CACHE_ELMDB: return "LMDB error";
    case CACHE_ENOTSUP: return "not supported by this store";
    default: return "unknown error";
    }
}
