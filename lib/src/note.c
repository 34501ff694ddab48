/* note.c — the request note's bytes; see note.h. */
#include <stdlib.h>
#include <string.h>

#include "note.h"
#include "milc/plan.h"

static const char magic1[4] = {'M', 'R', 'Q', '1'}, magic2[4] = {'M', 'R', 'Q', '2'};

enum { SPLIT_CHUNK = 24 }; /* first, layers, weight bytes: u64 LE each */

static uint8_t *put_le(uint8_t *p, uint64_t v, int bytes) {
    for (int k = 0; k < bytes; k++) p[k] = (uint8_t)(v >> (8 * k));
    return p + bytes;
}

static uint64_t get_le(const uint8_t *p, int bytes) {
    uint64_t v = 0;
    for (int k = 0; k < bytes; k++) v |= (uint64_t)p[k] << (8 * k);
    return v;
}

uint8_t *note_encode(const NoteJob *jobs, int n, const JobList *splits, size_t *len) {
    int ns = splits ? splits->nsplits : 0;
    if (n < 1 || n > NOTE_MAX_JOBS || ns > NOTE_MAX_JOBS) return NULL;
    size_t cap = 8 + (ns ? 4 : 0);
    for (int i = 0; i < n; i++) cap += 3 + strnlen(jobs[i].label, NOTE_LABEL_MAX - 1) + 16;
    for (int i = 0; i < ns; i++) {
        if (splits->splits[i].n < 0 || splits->splits[i].n > NOTE_MAX_JOBS) return NULL;
        cap += 7 + strnlen(splits->splits[i].label, NOTE_LABEL_MAX - 1) + (size_t)splits->splits[i].n * SPLIT_CHUNK;
    }
    uint8_t *buf = malloc(cap), *p = buf;
    if (!buf) return NULL;
    memcpy(p, ns ? magic2 : magic1, 4);
    p = put_le(p + 4, (uint32_t)n, 4);
    for (int i = 0; i < n; i++) {
        size_t l = strnlen(jobs[i].label, NOTE_LABEL_MAX - 1);
        *p++ = (uint8_t)jobs[i].mode;
        p = put_le(p, l, 2);
        memcpy(p, jobs[i].label, l);
        memcpy(p + l, jobs[i].key.b, 16);
        p += l + 16;
    }
    if (ns) p = put_le(p, (uint32_t)ns, 4);
    for (int i = 0; i < ns; i++) {
        const JobSplit *sp = &splits->splits[i];
        size_t l = strnlen(sp->label, NOTE_LABEL_MAX - 1);
        *p++ = sp->chosen;
        p = put_le(p, l, 2);
        memcpy(p, sp->label, l);
        p = put_le(p + l, (uint32_t)sp->n, 4);
        for (int k = 0; k < sp->n; k++) {
            p = put_le(p, (uint64_t)sp->v[k].first, 8);
            p = put_le(p, (uint64_t)sp->v[k].layers, 8);
            p = put_le(p, sp->v[k].weight_bytes, 8);
        }
    }
    *len = (size_t)(p - buf);
    return buf;
}

/* The splits after the jobs (MRQ2) into out: at least one, each chunk a
 * layer range of at least one layer.  The offset after them, or 0. */
static size_t decode_splits(const uint8_t *p, size_t n, size_t at, JobList *out) {
    if (n - at < 4) return 0;
    uint32_t ns = (uint32_t)get_le(p + at, 4);
    at += 4;
    if (ns == 0 || ns > NOTE_MAX_JOBS || ns > (n - at) / 7) return 0;
    if (!(out->splits = calloc(ns, sizeof *out->splits))) return 0;
    for (uint32_t i = 0; i < ns; i++) {
        JobSplit *sp = &out->splits[out->nsplits++];
        if (n - at < 3) return 0;
        unsigned chosen = p[at], l = (unsigned)get_le(p + at + 1, 2);
        at += 3;
        if (chosen > 1 || l >= NOTE_LABEL_MAX || n - at < (size_t)l + 4 || memchr(p + at, 0, l)) return 0;
        sp->chosen = chosen;
        memcpy(sp->label, p + at, l);
        uint32_t nc = (uint32_t)get_le(p + at + l, 4);
        at += l + 4;
        if (nc > NOTE_MAX_JOBS || nc > (n - at) / SPLIT_CHUNK) return 0;
        if (nc && !(sp->v = calloc(nc, sizeof *sp->v))) return 0;
        for (uint32_t k = 0; k < nc; k++, at += SPLIT_CHUNK) {
            uint64_t first = get_le(p + at, 8), layers = get_le(p + at + 8, 8);
            if (first > NOTE_MAX_LAYER || layers < 1 || layers > NOTE_MAX_LAYER) return 0;
            sp->v[k] = (JobChunk){(long)first, (long)layers, get_le(p + at + 16, 8)};
        }
        sp->n = (int)nc;
    }
    return at;
}

int note_decode(const uint8_t *p, size_t n, NoteJob **out, JobList *splits) {
    *out = NULL;
    JobList none = {0}, *sl = splits ? splits : &none;
    memset(sl, 0, sizeof *sl);
    if (n < 8 || (memcmp(p, magic1, 4) != 0 && memcmp(p, magic2, 4) != 0)) return -1;
    bool has_splits = memcmp(p, magic2, 4) == 0;
    uint32_t nj = (uint32_t)get_le(p + 4, 4);
    /* Each job takes at least 19 bytes: a count the bytes cannot hold is
     * refused before anything is allocated for it. */
    if (nj == 0 || nj > NOTE_MAX_JOBS || nj > (n - 8) / 19) return -1;
    NoteJob *v = calloc(nj, sizeof *v);
    if (!v) return -1;
    size_t at = 8;
    for (uint32_t i = 0; i < nj; i++) {
        if (n - at < 3) goto bad;
        unsigned mode = p[at], l = (unsigned)get_le(p + at + 1, 2);
        at += 3;
        if (!rt_mode((int)mode) || l >= NOTE_LABEL_MAX || n - at < (size_t)l + 16 || memchr(p + at, 0, l)) goto bad;
        v[i].mode = (int)mode;
        memcpy(v[i].label, p + at, l);
        memcpy(v[i].key.b, p + at + l, 16);
        at += l + 16;
    }
    if (has_splits && !(at = decode_splits(p, n, at, sl))) goto bad;
    if (at != n) goto bad;
    if (sl == &none) jobs_free(&none);
    *out = v;
    return (int)nj;
bad:
    jobs_free(sl);
    free(v);
    return -1;
}
