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
#include "fuzz_util.h"

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
            fuzz_run_model(m, 0);
            if (rt_model_mode(m) == RT_MODE_BOTH) fuzz_run_model(m, RT_RUN_NONBONDED);
            rt_model_free(m);
        }
    }
    free(buf);
    return 0;
}
