/* fuzz_artifact.c — libFuzzer target: arbitrary bytes as a file-form
 * artifact.  Splitting and loading must never read out of bounds; an
 * artifact that loads must run (both programs) on inputs shaped as the
 * model describes them, without a sanitizer report.  Checksums are off so
 * the validators, not the hash, meet the mutations. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "milc/rt.h"

static void run_model(RtModel *m, int flags) {
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* A real artifact comes from a mapping or LMDB: give it their alignment. */
    uint8_t *buf = aligned_alloc(64, (size + 63) & ~(size_t)63);
    if (!buf) return 0;
    memcpy(buf, data, size);
    RtSection secs[64];
    int n;
    if (rt_artifact_split(buf, size, secs, 64, &n, NULL, 0) == RT_OK) {
        RtArtifactInfo info;
        rt_artifact_info(&secs[0], &info, NULL, 0);
        rt_artifact_verify(secs, n, NULL, 0);
        RtModel *m;
        RtLoadOptions lo = {.nthreads = 1, .max_arena = 64u << 20};
        if (rt_model_load(&m, secs, n, &lo, NULL, 0) == RT_OK) {
            run_model(m, 0);
            if (rt_model_mode(m) == RT_MODE_BOTH) run_model(m, RT_RUN_NONBONDED);
            rt_model_free(m);
        }
    }
    free(buf);
    return 0;
}
