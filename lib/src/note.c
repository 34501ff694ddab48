/* note.c — the request note's bytes; see note.h. */
#include <stdlib.h>
#include <string.h>

#include "note.h"
#include "milc/plan.h"

static const char magic[4] = {'M', 'R', 'Q', '1'};

uint8_t *note_encode(const NoteJob *jobs, int n, size_t *len) {
    if (n < 1 || n > NOTE_MAX_JOBS) return NULL;
    size_t cap = 8;
    for (int i = 0; i < n; i++) cap += 3 + strnlen(jobs[i].label, NOTE_LABEL_MAX - 1) + 16;
    uint8_t *buf = malloc(cap), *p = buf;
    if (!buf) return NULL;
    memcpy(p, magic, 4);
    for (int k = 0; k < 4; k++) p[4 + k] = (uint8_t)((uint32_t)n >> (8 * k));
    p += 8;
    for (int i = 0; i < n; i++) {
        size_t l = strnlen(jobs[i].label, NOTE_LABEL_MAX - 1);
        *p++ = (uint8_t)jobs[i].mode;
        *p++ = (uint8_t)l, *p++ = (uint8_t)(l >> 8);
        memcpy(p, jobs[i].label, l);
        memcpy(p + l, jobs[i].key.b, 16);
        p += l + 16;
    }
    *len = (size_t)(p - buf);
    return buf;
}

int note_decode(const uint8_t *p, size_t n, NoteJob **out) {
    *out = NULL;
    if (n < 8 || memcmp(p, magic, 4) != 0) return -1;
    uint32_t nj = (uint32_t)p[4] | (uint32_t)p[5] << 8 | (uint32_t)p[6] << 16 | (uint32_t)p[7] << 24;
    /* Each job takes at least 19 bytes: a count the bytes cannot hold is
     * refused before anything is allocated for it. */
    if (nj == 0 || nj > NOTE_MAX_JOBS || nj > (n - 8) / 19) return -1;
    NoteJob *v = calloc(nj, sizeof *v);
    if (!v) return -1;
    size_t at = 8;
    for (uint32_t i = 0; i < nj; i++) {
        if (n - at < 3) goto bad;
        unsigned mode = p[at], l = (unsigned)p[at + 1] | (unsigned)p[at + 2] << 8;
        at += 3;
        if (!rt_mode((int)mode) || l >= NOTE_LABEL_MAX || n - at < (size_t)l + 16 || memchr(p + at, 0, l)) goto bad;
        v[i].mode = (int)mode;
        memcpy(v[i].label, p + at, l);
        memcpy(v[i].key.b, p + at + l, 16);
        at += l + 16;
    }
    if (at != n) goto bad;
    *out = v;
    return (int)nj;
bad:
    free(v);
    return -1;
}
