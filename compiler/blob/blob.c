/* blob.c — the MILBlob v2 weight file: a validating reader (a file read into memory, or memory)
 * and a buffered streaming writer that renames a temp file into place.
 * Every field of a file being read is untrusted; see milc/blob.h for the layout. */
#include "milc/blob.h"
#include "milc/osfile.h"
#include "milc/ossys.h"
#include "readfile.h"
#include "milc/assert.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

enum { HEADER_SIZE = 64, RECORD_SIZE = 64 };

static const struct {
    const char *name;
    unsigned bits;
} dtype_table[] = {
    [MILBLOB_FP16] = {"fp16", 16},      [MILBLOB_FP32] = {"fp32", 32},      [MILBLOB_UINT8] = {"uint8", 8},
    [MILBLOB_INT8] = {"int8", 8},       [MILBLOB_BF16] = {"bf16", 16},      [MILBLOB_INT16] = {"int16", 16},
    [MILBLOB_UINT16] = {"uint16", 16},  [MILBLOB_INT4] = {"int4", 4},       [MILBLOB_UINT1] = {"uint1", 1},
    [MILBLOB_UINT2] = {"uint2", 2},     [MILBLOB_UINT4] = {"uint4", 4},     [MILBLOB_UINT3] = {"uint3", 3},
    [MILBLOB_UINT6] = {"uint6", 6},     [MILBLOB_INT32] = {"int32", 32},    [MILBLOB_UINT32] = {"uint32", 32},
    [MILBLOB_FP8E4M3] = {"fp8e4m3", 8}, [MILBLOB_FP8E5M2] = {"fp8e5m2", 8},
};
enum { DTYPE_TABLE_LEN = sizeof dtype_table / sizeof dtype_table[0] };

unsigned milblob_dtype_bits(uint32_t dtype) { return dtype < DTYPE_TABLE_LEN ? dtype_table[dtype].bits : 0; }

const char *milblob_dtype_name(uint32_t dtype) { return dtype < DTYPE_TABLE_LEN ? dtype_table[dtype].name : NULL; }

static uint32_t load_u32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t load_u64(const uint8_t *p) { return load_u32(p) | (uint64_t)load_u32(p + 4) << 32; }

static void store_u32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static void store_u64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t round_up64(uint64_t x) { return (x + (MILBLOB_ALIGN - 1)) & ~(uint64_t)(MILBLOB_ALIGN - 1); }

/* Index of the first nonzero byte of p[0..n), or n. */
static size_t first_nonzero(const uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (p[i]) return i;
    return n;
}

/* ---------------------------------------------------------------- reader */

/* Why the size check is per dtype: a record whose size is not a whole number
 * of elements cannot match any MIL tensor type, and a later consumer that
 * divides by the element size would silently drop the tail. */
static bool check_size(const MilBlobRecord *r, char *why, size_t whylen) {
    unsigned bits = milblob_dtype_bits(r->dtype);
    const char *name = milblob_dtype_name(r->dtype);
    if (bits % 8 == 0) {
        if (r->padding_bits != 0) {
            snprintf(why, whylen, "padding_bits %" PRIu64 " must be 0 for %s", r->padding_bits, name);
            return false;
        }
        if (r->size % (bits / 8) != 0) {
            snprintf(why, whylen, "size %" PRIu64 " is not a whole number of %s elements (%u bytes each)", r->size,
                     name, bits / 8);
            return false;
        }
        return true;
    }
    /* Sub-byte types pack elements into bytes; padding_bits says how many
     * bits of the last byte are unused.  size <= file size, so size * 8 fits. */
    if (r->padding_bits >= 8 || (r->size == 0 && r->padding_bits != 0)) {
        snprintf(why, whylen, "padding_bits %" PRIu64 " invalid for %s (want 0..7, 0 when empty)", r->padding_bits,
                 name);
        return false;
    }
    if ((r->size * 8 - r->padding_bits) % bits != 0) {
        snprintf(why, whylen,
                 "size %" PRIu64 " bytes less padding_bits %" PRIu64
                 " is not a whole number of %s elements (%u bits each)",
                 r->size, r->padding_bits, name, bits);
        return false;
    }
    return true;
}

/* Where the parser gets bytes: the whole file in memory, or a descriptor
 * read by pread a record at a time (milblob_open_records: no data read). */
typedef struct Bytes {
    const uint8_t *mem; /* or NULL: read fd */
    int fd;
    uint8_t tmp[RECORD_SIZE];
} Bytes;

/* n <= RECORD_SIZE bytes at off (inside the file); NULL on a read error,
 * with why set. */
static const uint8_t *bytes_at(Bytes *b, uint64_t off, size_t n, char *why, size_t whylen) {
    if (b->mem) return b->mem + off;
    size_t got = 0;
    while (got < n) {
        ssize_t k = pread(b->fd, b->tmp + got, n - got, (off_t)(off + got));
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) {
            snprintf(why, whylen, "offset %" PRIu64 ": %s", off + got,
                     k < 0 ? strerror(errno) : "the file shrank while it was read");
            return NULL;
        }
        got += (size_t)k;
    }
    return b->tmp;
}

static int parse(MilBlobFile *f, const char *name, Bytes *src, size_t size, DiagSink *d) {
    memset(f, 0, sizeof *f);
    SrcLoc loc = {name, 0, 0};
    char why[192];
    if (size == 0) {
        diag_error(d, loc, "empty file (a weight file starts with a 64-byte header)");
        return -1;
    }
    if (size < HEADER_SIZE) {
        diag_error(d, loc, "offset 0: truncated header: %zu bytes (want 64)", size);
        return -1;
    }
    const uint8_t *p = bytes_at(src, 0, HEADER_SIZE, why, sizeof why);
    if (!p) {
        diag_syserror(d, loc, "%s", why);
        return -1;
    }
    uint32_t count = load_u32(p), version = load_u32(p + 4);
    if (version != MILBLOB_VERSION) {
        diag_error(d, loc, "offset 4: unsupported version %" PRIu32 " (want 2)", version);
        return -1;
    }
    size_t nz = first_nonzero(p + 8, HEADER_SIZE - 8);
    if (nz != HEADER_SIZE - 8) {
        diag_error(d, loc, "offset %zu: nonzero reserved byte 0x%02x in header", nz + 8, p[8 + nz]);
        return -1;
    }
    /* Every blob needs at least its 64-byte record, which bounds count before
     * we allocate for it. */
    if (count > (size - HEADER_SIZE) / RECORD_SIZE) {
        diag_error(d, loc, "offset 0: header count %" PRIu32 " cannot fit in a %zu-byte file", count, size);
        return -1;
    }
    MilBlobRecord *recs = count ? calloc(count, sizeof *recs) : NULL;
    if (count && !recs) {
        diag_error(d, loc, "out of memory for %" PRIu32 " blob records", count);
        return -1;
    }

    uint64_t at = HEADER_SIZE; /* where the next record must start */
    uint32_t i;
    for (i = 0; i < count; i++) {
        uint64_t m = at;
        if (m >= size) {
            diag_error(d, loc, "offset %zu: file ends after %" PRIu32 " blobs (header count %" PRIu32 ")", size, i,
                       count);
            goto fail;
        }
        if (size - m < RECORD_SIZE) {
            diag_error(d, loc, "blob %" PRIu32 " at offset %" PRIu64 ": truncated record: file ends at %zu", i, m,
                       size);
            goto fail;
        }
        const uint8_t *rp = bytes_at(src, m, RECORD_SIZE, why, sizeof why);
        if (!rp) {
            diag_syserror(d, loc, "%s", why);
            goto fail;
        }
        MilBlobRecord *r = &recs[i];
        uint32_t sentinel = load_u32(rp);
        r->offset = m;
        r->dtype = load_u32(rp + 4);
        r->size = load_u64(rp + 8);
        r->data_offset = load_u64(rp + 16);
        r->padding_bits = load_u64(rp + 24);
#define BLOB_ERR(fmt, ...) diag_error(d, loc, "blob %" PRIu32 " at offset %" PRIu64 ": " fmt, i, m, __VA_ARGS__)
        if (sentinel != MILBLOB_SENTINEL) {
            BLOB_ERR("bad sentinel 0x%08" PRIx32 " (want 0xdeadbeef)", sentinel);
            goto fail;
        }
        if (milblob_dtype_bits(r->dtype) == 0) {
            BLOB_ERR("unknown dtype %" PRIu32, r->dtype);
            goto fail;
        }
        if (r->data_offset % MILBLOB_ALIGN != 0) {
            BLOB_ERR("misaligned data_offset %" PRIu64 " (not a multiple of 64)", r->data_offset);
            goto fail;
        }
        if (r->data_offset != m + RECORD_SIZE) {
            BLOB_ERR("data_offset %" PRIu64 " does not follow its record (want %" PRIu64 ")", r->data_offset,
                     m + RECORD_SIZE);
            goto fail;
        }
        nz = first_nonzero(rp + 32, RECORD_SIZE - 32);
        if (nz != RECORD_SIZE - 32) {
            BLOB_ERR("nonzero reserved byte 0x%02x at offset %" PRIu64, rp[32 + nz], m + 32 + nz);
            goto fail;
        }
        uint64_t avail = size - r->data_offset; /* data_offset <= size: record fits */
        if (r->size > avail) {
            BLOB_ERR("data of %" PRIu64 " bytes at offset %" PRIu64 " runs past the end of the file (%zu bytes)",
                     r->size, r->data_offset, size);
            goto fail;
        }
        if (!check_size(r, why, sizeof why)) {
            BLOB_ERR("%s", why);
            goto fail;
        }
        r->data = src->mem ? src->mem + r->data_offset : NULL;
        uint64_t end = r->data_offset + r->size;
        /* The gap up to the next record (or the end of the file after the
         * last blob) is padding and must be zero, so no bytes hide there. */
        uint64_t next = round_up64(end);
        uint64_t gap_end = next < size ? next : size;
        const uint8_t *gap = gap_end > end ? bytes_at(src, end, (size_t)(gap_end - end), why, sizeof why) : rp;
        if (!gap) {
            diag_syserror(d, loc, "%s", why);
            goto fail;
        }
        nz = first_nonzero(gap, (size_t)(gap_end - end));
        if (nz != gap_end - end) {
            if (i + 1 == count)
                diag_error(d, loc, "offset %" PRIu64 ": data after the last blob (header count %" PRIu32 ")", end + nz,
                           count);
            else
                BLOB_ERR("nonzero padding byte at offset %" PRIu64, end + nz);
            goto fail;
        }
        at = next;
#undef BLOB_ERR
    }
    if (at < size) {
        diag_error(d, loc, "offset %" PRIu64 ": data after the last blob (header count %" PRIu32 ")", at, count);
        goto fail;
    }
    f->name = name;
    f->bytes = src->mem;
    f->size = size;
    f->count = count;
    f->records = recs;
    return 0;
fail:
    free(recs);
    return -1;
}

int milblob_parse(MilBlobFile *f, const char *name, const void *bytes, size_t size, DiagSink *d) {
    Bytes src = {.mem = bytes, .fd = -1};
    return parse(f, name, &src, size, d);
}

int milblob_open_records(MilBlobFile *f, const char *path, DiagSink *d) {
    memset(f, 0, sizeof *f);
    const char *name = diag_intern(d, path);
    SrcLoc loc = {name, 0, 0};
    int fd, rc;
    if (blob_open_input(path, loc, d, &fd) != 0) return -1;
    struct stat st;
    Bytes src = {.mem = NULL, .fd = fd};
    if (fstat(fd, &st) != 0)
        diag_syserror(d, loc, "cannot stat: %s", strerror(errno)), rc = -1;
    else
        rc = parse(f, name, &src, (size_t)st.st_size, d);
    close(fd);
    return rc;
}

int milblob_open(MilBlobFile *f, const char *path, DiagSink *d) {
    memset(f, 0, sizeof *f);
    const char *name = diag_intern(d, path);
    SrcLoc loc = {name, 0, 0};
    void *buf;
    size_t size;
    if (blob_read_file(path, loc, d, &buf, &size) != 0) return -1;
    if (milblob_parse(f, name, buf, size, d) != 0) {
        free(buf);
        memset(f, 0, sizeof *f);
        return -1;
    }
    f->mapped = true; /* the memory is ours to release */
    return 0;
}

void milblob_close(MilBlobFile *f) {
    if (f->mapped) free((void *)f->bytes);
    free(f->records);
    memset(f, 0, sizeof *f);
}

const MilBlobRecord *milblob_find(const MilBlobFile *f, uint64_t offset) {
    size_t lo = 0, hi = f->count; /* records are in increasing offset order */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        uint64_t o = f->records[mid].offset;
        if (o == offset) return &f->records[mid];
        if (o < offset)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

void milblob_file_digest(const MilBlobFile *f, uint8_t out[16]) {
    XXH3_state_t *st = XXH3_createState();
    MILC_ASSERT(st != NULL);
    XXH3_128bits_reset(st);
    for (uint32_t i = 0; i < f->count; i++) {
        const MilBlobRecord *r = &f->records[i];
        uint8_t tag[20]; /* fixed-width fields, so no two blob lists hash the same bytes */
        store_u32(tag, r->dtype);
        store_u64(tag + 4, r->size);
        store_u64(tag + 12, r->padding_bits);
        XXH3_128bits_update(st, tag, sizeof tag);
        XXH3_128bits_update(st, r->data, (size_t)r->size);
    }
    XXH128_hash_t h = XXH3_128bits_digest(st);
    XXH3_freeState(st);
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, h);
    memcpy(out, c.digest, 16);
}

/* ---------------------------------------------------------------- writer */

/* Bytes are staged in buf and written when it passes FLUSH_AT; blobs larger
 * than the buffer are written straight from the caller's memory, and
 * reservations are handed out of buf itself, so weights are copied at most
 * once on their way to the file.  A streamed blob (milblob_writer_begin and
 * _take) is handed out piece by piece, so the buffer never grows past
 * FLUSH_AT whatever the blob's size: the size of a causal mask is the user's
 * choice (--seq), the writer's memory must not be.
 *
 * The file's digest (milblob_file_digest) is computed as the bytes go by:
 * a piece the caller fills in place is hashed at the next writer call, when
 * it is complete, so nobody has to read the file back to key it.
 *
 * A full buffer is written by a thread of the writer's own (Flusher) while
 * the caller fills the other one: the copy into the page cache is the
 * largest part of writing weights, and the caller's part (reading a
 * checkpoint, converting, making random values) overlaps it.  A file that
 * never fills a buffer is written on the caller's thread, at finish.  A file
 * fsynced at the end has each buffer's writeback started as it goes
 * (os_start_writeback), so the fsync waits for the tail only. */
enum { FLUSH_AT = 4u << 20, GROW_STEP = 4u << 20 };

typedef struct Flusher {
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int fd;
    const uint8_t *job; /* a buffer being written; NULL when idle */
    size_t njob;
    bool writeback; /* the file is fsynced at the end: start the disk on each buffer */
    uint64_t at;    /* file offset of the next byte it writes */
    bool quit;
    int err; /* errno of its first failed write; nothing is written after it */
} Flusher;

struct MilBlobWriter {
    char *path;    /* final name (for messages) */
    OsPublish pub; /* the temp file beside it, published at finish */
    int fd;        /* pub.fd */
    uint8_t *buf;  /* staged bytes, file offset pos - fill */
    size_t cap, fill;
    uint8_t *spare; /* the other buffer, free while the flusher is idle */
    size_t spare_cap;
    Flusher *fl;   /* started at the first full buffer */
    bool no_fl;    /* it could not be started: the caller's thread writes */
    uint64_t pos;  /* logical end of file, staged bytes included */
    uint64_t left; /* bytes the streamed blob still lacks */
    bool mem;      /* the file is made in memory: buf is it, whole (maplen of mapping) */
    size_t maplen;
    /* In memory, bytes past `grown` are faulted in GROW_STEP at a time (one
     * call, not a fault a page), grow told first. */
    size_t grown;
    MilBlobGrowFn grow;
    void *grow_ctx;
    uint32_t count;
    XXH3_state_t *hash;      /* the digest so far */
    const uint8_t *unhashed; /* a piece handed out, hashed once filled */
    size_t nunhashed;
    bool failed;
    char err[256]; /* first sticky error */
};

static void writer_fail(MilBlobWriter *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void writer_fail(MilBlobWriter *w, const char *fmt, ...) {
    if (w->failed) return;
    w->failed = true;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->err, sizeof w->err, fmt, ap);
    va_end(ap);
}

/* The piece handed out last is complete now: hash it before it moves. */
static void writer_settle(MilBlobWriter *w) {
    if (w->nunhashed) XXH3_128bits_update(w->hash, w->unhashed, w->nunhashed);
    w->unhashed = NULL, w->nunhashed = 0;
}

/* 0 or the errno of the failed write */
static int write_fd(int fd, const uint8_t *p, size_t n) {
    while (n > 0) {
        ssize_t k = write(fd, p, n > (1u << 30) ? (1u << 30) : n);
        if (k < 0) {
            if (errno == EINTR) continue;
            return errno;
        }
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

static bool write_all(MilBlobWriter *w, const void *data, size_t n) {
    int e = write_fd(w->fd, data, n);
    if (e) writer_fail(w, "write failed: %s", strerror(e));
    return !e;
}

static void *flusher_main(void *arg) {
    Flusher *f = arg;
    pthread_mutex_lock(&f->mu);
    for (;;) {
        while (!f->job && !f->quit) pthread_cond_wait(&f->cv, &f->mu);
        if (!f->job) break;
        const uint8_t *p = f->job;
        size_t n = f->njob;
        bool skip = f->err != 0, wb = f->writeback;
        uint64_t at = f->at;
        pthread_mutex_unlock(&f->mu);
        int e = skip ? 0 : write_fd(f->fd, p, n);
        if (!e && wb) os_start_writeback(f->fd, at, n);
        pthread_mutex_lock(&f->mu);
        f->at = at + n;
        if (e) f->err = e;
        f->job = NULL;
        pthread_cond_broadcast(&f->cv);
    }
    pthread_mutex_unlock(&f->mu);
    return NULL;
}

/* The flusher and the second buffer, or false: the writer then writes on
 * the caller's thread (no thread, no memory: slower, never wrong). */
static bool flusher_start(MilBlobWriter *w) {
    if (w->fl) return true;
    if (w->no_fl) return false;
    w->no_fl = true; /* until it runs */
    Flusher *f = calloc(1, sizeof *f);
    if (!f || !(w->spare = malloc(FLUSH_AT))) {
        free(f);
        return false;
    }
    w->spare_cap = FLUSH_AT;
    f->fd = w->fd;
    if (pthread_mutex_init(&f->mu, NULL) == 0) {
        if (pthread_cond_init(&f->cv, NULL) == 0) {
            if (pthread_create(&f->th, NULL, flusher_main, f) == 0) {
                w->fl = f, w->no_fl = false;
                return true;
            }
            pthread_cond_destroy(&f->cv);
        }
        pthread_mutex_destroy(&f->mu);
    }
    free(f);
    free(w->spare);
    w->spare = NULL, w->spare_cap = 0;
    return false;
}

/* Wait until the flusher has written what it was given; its error becomes
 * the writer's. */
static bool writer_drain(MilBlobWriter *w) {
    Flusher *f = w->fl;
    if (f) {
        pthread_mutex_lock(&f->mu);
        while (f->job) pthread_cond_wait(&f->cv, &f->mu);
        int e = f->err;
        pthread_mutex_unlock(&f->mu);
        if (e) writer_fail(w, "write failed: %s", strerror(e));
    }
    return !w->failed;
}

static void flusher_stop(MilBlobWriter *w) {
    Flusher *f = w->fl;
    if (!f) return;
    pthread_mutex_lock(&f->mu);
    f->quit = true;
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
    pthread_join(f->th, NULL); /* it finishes the buffer it holds first */
    pthread_cond_destroy(&f->cv);
    pthread_mutex_destroy(&f->mu);
    free(f);
    w->fl = NULL;
}

/* The staged bytes on their way: handed to the flusher, the caller going
 * on in the other buffer. */
static bool writer_flush(MilBlobWriter *w) {
    if (w->failed) return false;
    writer_settle(w);
    if (w->mem || !w->fill) return true; /* in memory, the bytes are where they belong */
    if (!flusher_start(w)) {
        if (!write_all(w, w->buf, w->fill)) return false;
        w->fill = 0;
        return true;
    }
    if (!writer_drain(w)) return false; /* the spare is free once its bytes are out */
    Flusher *f = w->fl;
    pthread_mutex_lock(&f->mu);
    f->job = w->buf, f->njob = w->fill, f->writeback = !w->pub.nosync;
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
    uint8_t *b = w->buf;
    size_t c = w->cap;
    w->buf = w->spare, w->cap = w->spare_cap;
    w->spare = b, w->spare_cap = c;
    w->fill = 0;
    return true;
}

/* Every byte staged so far in the file, on the caller's thread. */
static bool writer_sync(MilBlobWriter *w) {
    if (w->failed || !writer_drain(w)) return false;
    writer_settle(w);
    if (w->mem || !w->fill) return true;
    if (!write_all(w, w->buf, w->fill)) return false;
    w->fill = 0;
    return true;
}

/* Make room for n more staged bytes, flushing and growing as needed. */
static bool writer_room(MilBlobWriter *w, size_t n) {
    if (w->mem && w->fill + n > w->grown) {
        size_t step = w->fill + n - w->grown;
        if (step < GROW_STEP) step = GROW_STEP;
        if (step > w->cap - w->grown) step = w->cap - w->grown;
        if (step && w->grow) w->grow(w->grow_ctx, step);
        os_populate(w->buf + w->grown, step);
        w->grown += step;
    }
    if (w->cap - w->fill >= n) return true;
    if (w->mem) {
        writer_fail(w, "the weights outgrow the %zu bytes laid out for them", w->cap);
        return false;
    }
    if (!writer_flush(w)) return false;
    if (w->cap >= n) return true;
    size_t cap = n > FLUSH_AT ? n : FLUSH_AT;
    uint8_t *nb = realloc(w->buf, cap);
    if (!nb) {
        writer_fail(w, "out of memory staging %zu bytes", cap);
        return false;
    }
    w->buf = nb;
    w->cap = cap;
    return true;
}

MilBlobWriter *milblob_writer_open(const char *path, DiagSink *d) {
    SrcLoc loc = {diag_intern(d, path), 0, 0};
    MilBlobWriter *w = calloc(1, sizeof *w);
    if (!w || !(w->path = strdup(path)) || !(w->hash = XXH3_createState())) {
        diag_syserror(d, loc, "out of memory");
        goto fail;
    }
    XXH3_128bits_reset(w->hash);
    char err[600];
    if (os_publish_begin(&w->pub, path, 0666, err, sizeof err) != 0) {
        diag_syserror(d, loc, "%s", err);
        goto fail;
    }
    w->fd = w->pub.fd;
    w->cap = FLUSH_AT;
    w->buf = malloc(w->cap);
    if (!w->buf) {
        diag_syserror(d, loc, "out of memory");
        os_publish_abort(&w->pub);
        goto fail;
    }
    /* The header's count is patched in at finish. */
    memset(w->buf, 0, HEADER_SIZE);
    store_u32(w->buf + 4, MILBLOB_VERSION);
    w->fill = HEADER_SIZE;
    w->pos = HEADER_SIZE;
    return w;
fail:
    if (w) {
        if (w->hash) XXH3_freeState(w->hash);
        free(w->path);
        free(w);
    }
    return NULL;
}

/* A streamed blob must be complete before anything else is written. */
static bool writer_whole(MilBlobWriter *w) {
    if (w->left && !w->failed)
        writer_fail(w, "blob %" PRIu32 ": %" PRIu64 " bytes of its data were never supplied", w->count - 1, w->left);
    return !w->failed;
}

/* Stage padding and the record for a blob; the caller then supplies size
 * bytes of data.  Returns the record offset or UINT64_MAX. */
static uint64_t writer_record(MilBlobWriter *w, uint32_t dtype, uint64_t size) {
    if (!writer_whole(w)) return UINT64_MAX;
    writer_settle(w);
    unsigned bits = milblob_dtype_bits(dtype);
    if (bits == 0) {
        writer_fail(w, "blob %" PRIu32 ": unknown dtype %" PRIu32, w->count, dtype);
        return UINT64_MAX;
    }
    if (bits % 8 == 0 && size % (bits / 8) != 0) {
        writer_fail(w, "blob %" PRIu32 ": size %" PRIu64 " is not a whole number of %s elements", w->count, size,
                    milblob_dtype_name(dtype));
        return UINT64_MAX;
    }
    if (w->count == UINT32_MAX || size > SIZE_MAX - 2 * RECORD_SIZE) {
        writer_fail(w, "blob %" PRIu32 ": too many or too large blobs", w->count);
        return UINT64_MAX;
    }
    if (w->fill >= FLUSH_AT && !writer_flush(w)) return UINT64_MAX;
    uint64_t m = round_up64(w->pos);
    size_t pad = (size_t)(m - w->pos);
    if (!writer_room(w, pad + RECORD_SIZE)) return UINT64_MAX;
    uint8_t *r = w->buf + w->fill;
    memset(r, 0, pad + RECORD_SIZE);
    r += pad;
    store_u32(r, MILBLOB_SENTINEL);
    store_u32(r + 4, dtype);
    store_u64(r + 8, size);
    store_u64(r + 16, m + RECORD_SIZE);
    w->fill += pad + RECORD_SIZE;
    w->pos = m + RECORD_SIZE + size; /* the data follows in the caller */
    w->count++;
    uint8_t tag[20]; /* as milblob_file_digest: dtype, size, padding_bits (0) */
    store_u32(tag, dtype);
    store_u64(tag + 4, size);
    store_u64(tag + 12, 0);
    XXH3_128bits_update(w->hash, tag, sizeof tag);
    return m;
}

uint64_t milblob_writer_add(MilBlobWriter *w, uint32_t dtype, const void *data, uint64_t size) {
    uint64_t m = writer_record(w, dtype, size);
    if (m == UINT64_MAX) return m;
    if (size == 0) return m; /* data may be NULL */
    XXH3_128bits_update(w->hash, data, (size_t)size);
    if (w->mem ? writer_room(w, (size_t)size) : size <= w->cap - w->fill) {
        memcpy(w->buf + w->fill, data, (size_t)size);
        w->fill += (size_t)size;
    } else if (w->mem || !writer_sync(w) || !write_all(w, data, (size_t)size)) {
        return UINT64_MAX;
    }
    return m;
}

void *milblob_writer_reserve(MilBlobWriter *w, uint32_t dtype, uint64_t size, uint64_t *offset) {
    uint64_t m = writer_record(w, dtype, size);
    *offset = m;
    if (m == UINT64_MAX) return NULL;
    if (!writer_room(w, (size_t)size)) {
        *offset = UINT64_MAX;
        return NULL;
    }
    void *p = w->buf + w->fill;
    w->fill += (size_t)size; /* written by the next flush, after the caller fills it */
    w->unhashed = p, w->nunhashed = (size_t)size;
    return p;
}

uint64_t milblob_writer_begin(MilBlobWriter *w, uint32_t dtype, uint64_t size) {
    uint64_t m = writer_record(w, dtype, size);
    if (m != UINT64_MAX) w->left = size;
    return m;
}

void *milblob_writer_take(MilBlobWriter *w, size_t n) {
    if (w->failed) return NULL;
    if (n > w->left || n > MILBLOB_TAKE_MAX) {
        writer_fail(w, "blob %" PRIu32 ": a piece of %zu bytes is more than the %" PRIu64 " it lacks (or than %u)",
                    w->count - 1, n, w->left, (unsigned)MILBLOB_TAKE_MAX);
        return NULL;
    }
    writer_settle(w);
    if (!writer_room(w, n)) return NULL; /* cap >= FLUSH_AT >= n: a flush, never a growth */
    void *p = w->buf + w->fill;
    w->fill += n;
    w->left -= n;
    w->unhashed = p, w->nunhashed = n;
    return p;
}

void milblob_writer_digest(MilBlobWriter *w, uint8_t out[16]) {
    writer_settle(w);
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, XXH3_128bits_digest(w->hash));
    memcpy(out, c.digest, 16);
}

static void writer_free(MilBlobWriter *w) {
    flusher_stop(w);
    free(w->spare);
    XXH3_freeState(w->hash);
    if (w->mem)
        os_huge_free(w->buf, w->maplen); /* NULL once handed over */
    else
        free(w->buf);
    free(w->path);
    free(w);
}

int milblob_writer_finish(MilBlobWriter *w, DiagSink *d) {
    SrcLoc loc = {diag_intern(d, w->path), 0, 0};
    uint8_t count[4];
    store_u32(count, w->count);
    if (writer_whole(w) && writer_sync(w)) {
        ssize_t k = pwrite(w->fd, count, sizeof count, 0);
        if (k != (ssize_t)sizeof count) writer_fail(w, "write failed: %s", k < 0 ? strerror(errno) : "short write");
    }
    char err[600];
    if (!w->failed && os_publish_commit(&w->pub, err, sizeof err) != 0) writer_fail(w, "%s", err);
    os_publish_abort(&w->pub); /* nothing left after a commit */
    int rc = 0;
    if (w->failed) {
        diag_syserror(d, loc, "%s", w->err);
        rc = -1;
    }
    writer_free(w);
    return rc;
}

void milblob_writer_scratch(MilBlobWriter *w) {
    if (w) w->pub.nosync = 1;
}

void milblob_writer_abort(MilBlobWriter *w) {
    if (!w) return;
    flusher_stop(w); /* its descriptor closes next */
    if (!w->mem) os_publish_abort(&w->pub);
    writer_free(w);
}

void milblob_writer_on_grow(MilBlobWriter *w, MilBlobGrowFn fn, void *ctx) {
    if (w->mem) w->grow = fn, w->grow_ctx = ctx;
}

MilBlobWriter *milblob_writer_open_mem(uint64_t size, DiagSink *d) {
    MilBlobWriter *w = calloc(1, sizeof *w);
    if (!w || !(w->path = strdup("weight.bin")) || !(w->hash = XXH3_createState())) goto nomem;
    XXH3_128bits_reset(w->hash);
    w->mem = true;
    if (size < HEADER_SIZE) size = HEADER_SIZE;
    if (size > SIZE_MAX || !(w->buf = os_page_alloc((size_t)size, &w->maplen))) goto nomem;
    w->cap = (size_t)size;
    store_u32(w->buf + 4, MILBLOB_VERSION); /* zeroed memory: the rest of the header is */
    w->fill = HEADER_SIZE;
    w->pos = HEADER_SIZE;
    return w;
nomem:
    diag_syserror(d, (SrcLoc){0}, "out of memory for %" PRIu64 " bytes of weights", size);
    if (w) {
        if (w->hash) XXH3_freeState(w->hash);
        free(w->path);
        free(w);
    }
    return NULL;
}

int milblob_writer_finish_mem(MilBlobWriter *w, MilBlobImage *out, DiagSink *d) {
    memset(out, 0, sizeof *out);
    if (writer_whole(w) && writer_flush(w)) {
        store_u32(w->buf, w->count);
        out->bytes = w->buf, out->size = w->fill, out->maplen = w->maplen;
        w->buf = NULL;
    } else {
        diag_syserror(d, (SrcLoc){0}, "weights: %s", w->err);
    }
    writer_free(w);
    return out->bytes ? 0 : -1;
}

void milblob_image_free(MilBlobImage *m) {
    if (m->bytes) os_huge_free(m->bytes, m->maplen);
    memset(m, 0, sizeof *m);
}

void milblob_image_discard(const MilBlobImage *m, const void *p, size_t n) {
    const uint8_t *b = m->bytes, *q = p;
    if (b && q >= b && n <= m->size && (size_t)(q - b) <= m->size - n) os_mem_discard((void *)q, n);
}
