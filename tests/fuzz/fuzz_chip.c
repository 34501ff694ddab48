/* fuzz_chip.c — libFuzzer target: a chip file of the ANE estimate
 * (data/ane/NAME.json) is untrusted input.  est_chip_parse on arbitrary bytes
 * must fail with a message or accept parameters within their documented
 * ranges, and a projection with accepted parameters must be finite. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "milc/assert.h"
#include "milc/estimate.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *buf = malloc(size ? size : 1); /* exact size: ASan sees overreads */
    if (!buf) return 0;
    memcpy(buf, data, size);
    EstChip c;
    char err[256] = "";
    if (est_chip_parse(buf, size, "fuzz.json", &c, err, sizeof err) != 0) {
        MILC_ASSERT(err[0] != 0);
        free(buf);
        return 0;
    }
    MILC_ASSERT(c.nutil >= 1 && c.nutil <= EST_MAX_UTIL_POINTS && c.min_seq >= 1 && c.fp16_tflops > 0);
    /* A GPT-2-sized plan at every mode and both paths: every figure finite. */
    EstModel m = {.layers = 12,
                  .layer_weight_bytes = 14e6,
                  .layer_flops_per_pos = 14e6,
                  .layer_attn_flops_per_pos_ctx = 3072,
                  .layer_ops = 37,
                  .io_bytes_per_pos = 3072,
                  .layer_kv_bytes_per_ctx = 3072};
    for (int mode = 0; mode <= 2; mode++)
        for (int path = 0; path < 2; path++) {
            EstPlan p;
            EstResult r;
            MILC_ASSERT(est_plan_depth(&m, 4, mode, &p) == 0);
            est_project(&c, &p,
                        &(EstScenario){.prompt_tokens = 128,
                                       .prefill_chunk = 128,
                                       .ctx = 1024,
                                       .path = path,
                                       .compile_factor = c.mode0_compile_factor},
                        &r);
            MILC_ASSERT(isfinite(r.decode_ms) && r.decode_ms >= 0 && isfinite(r.cold_ms) && isfinite(r.prefill_ms));
        }
    free(buf);
    return 0;
}
