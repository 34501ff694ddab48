/* fuzz_note.c — libFuzzer target: arbitrary bytes as a request note (what a
 * repeated `milc build` reads back from the cache).  Must never crash or
 * over-read; what decodes must encode to exactly the same bytes (the format
 * has one spelling per note, so a decoder that accepts a second one, or drops
 * a byte, is caught). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "milc/assert.h"
#include "note.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    NoteJob *jobs;
    JobList splits;
    int n = note_decode(data, size, &jobs, &splits);
    MILC_ASSERT(n == -1 ? jobs == NULL && splits.nsplits == 0 : n >= 1 && jobs != NULL);
    if (n < 0) return 0;
    for (int i = 0; i < n; i++)
        MILC_ASSERT(jobs[i].mode >= 0 && jobs[i].mode <= 2 && memchr(jobs[i].label, 0, NOTE_LABEL_MAX));
    for (int i = 0; i < splits.nsplits; i++) {
        const JobSplit *sp = &splits.splits[i];
        MILC_ASSERT(memchr(sp->label, 0, NOTE_LABEL_MAX) && sp->n >= 0);
        for (int k = 0; k < sp->n; k++) MILC_ASSERT(sp->v[k].first >= 0 && sp->v[k].layers >= 1);
    }
    size_t len = 0;
    uint8_t *again = note_encode(jobs, n, &splits, &len);
    MILC_ASSERT(again != NULL && len == size && memcmp(again, data, size) == 0);
    free(again);
    free(jobs);
    jobs_free(&splits);
    return 0;
}
