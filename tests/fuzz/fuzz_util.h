/* fuzz_util.h — what several fuzz targets share: a fuzz input parsed as MIL
 * text, and a loaded model run once on zeros. */
#ifndef MILC_FUZZ_UTIL_H
#define MILC_FUZZ_UTIL_H

#include "milc/mil.h"
#include "milc/rt.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct FuzzParse {
    Arena a;
    DiagSink d;
    IrProgram *p; /* NULL: it did not parse */
} FuzzParse;

/* data as a MIL file, at most 20 errors recorded; fuzz_parse_free after. */
static inline void fuzz_parse(FuzzParse *fp, const uint8_t *data, size_t size) {
    arena_init(&fp->a);
    diag_init(&fp->d);
    fp->d.max_errors = 20;
    fp->p = mil_parse(&fp->a, &fp->d, "fuzz.mil", (const char *)data, size);
}

/* The diagnostics rendered (every message formats), then everything freed. */
static inline void fuzz_parse_free(FuzzParse *fp) {
    free(diag_render(&fp->d));
    arena_free(&fp->a);
    diag_free(&fp->d);
}

/* One rt_run of m on zeroed inputs (skipped past 16 inputs and outputs, or a
 * tensor over 16 MiB): an error is an answer, a crash is not. */
static inline void fuzz_run_model(RtModel *m, int flags) {
    RtTensor t[16];
    int ni = rt_model_ninputs(m), no = rt_model_noutputs(m);
    if (ni + no > 16) return;
    for (int i = 0; i < ni + no; i++) {
        RtIoInfo io;
        if (i < ni)
            rt_model_input(m, i, &io);
        else
            rt_model_output(m, i - ni, &io);
        size_t n = 1;
        for (int d = 0; d < io.rank; d++) n *= (size_t)io.dims[d];
        t[i] = (RtTensor){.dtype = io.dtype, .rank = io.rank, .size = n * rt_dtype_size(io.dtype)};
        memcpy(t[i].dims, io.dims, sizeof t[i].dims);
        t[i].data = t[i].size <= (16u << 20) ? calloc(1, t[i].size ? t[i].size : 1) : NULL;
    }
    bool ok = true;
    for (int i = 0; i < ni + no; i++) ok = ok && t[i].data;
    if (ok) rt_run(m, t, ni, t + ni, no, flags, NULL);
    for (int i = 0; i < ni + no; i++) free(t[i].data);
}

#endif
