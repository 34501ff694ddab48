/* note.h — the request note's bytes (request.c): what a repeated request
 * finds in the cache.  Read back as untrusted input. */
#ifndef MILC_LIB_NOTE_H
#define MILC_LIB_NOTE_H

#include <stddef.h>
#include <stdint.h>

#include "milc/cache.h"
#include "milc/jobs.h"

enum { NOTE_MAX_JOBS = 100000, NOTE_LABEL_MAX = 256, NOTE_MAX_LAYER = 1000000 };

typedef struct NoteJob {
    int mode;                   /* RT_MODE_* */
    char label[NOTE_LABEL_MAX]; /* NUL-terminated, may be empty */
    CacheKey key;               /* the artifact's */
} NoteJob;

/* "MRQ1", u32 LE count, then per job: u8 mode, u16 LE label length, the
 * label, the 16-byte key.  With splits (a --chunk request's, which `build
 * --chunk auto` reports without reading a template), "MRQ2" and after the
 * jobs: u32 LE count (>= 1), per split u8 chosen, u16 LE label length, the
 * label, u32 LE chunk count, per chunk u64 LE first layer, layers (>= 1),
 * weight bytes.  splits may be NULL (or hold none): MRQ1.  A malloc'd
 * buffer and its length, or NULL. */
uint8_t *note_encode(const NoteJob *jobs, int n, const JobList *splits, size_t *len);
/* The jobs of a note (*out malloc'd) and their count (>= 1), or -1 when the
 * bytes are not exactly one well-formed note.  splits, if not NULL, gets the
 * note's splits (none for MRQ1; the caller jobs_frees it). */
int note_decode(const uint8_t *p, size_t n, NoteJob **out, JobList *splits);

#endif
