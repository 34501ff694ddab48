/* fuzz_safetensors.c — libFuzzer target: safetensors_parse on arbitrary bytes
 * must never read out of bounds, and every tensor of a file it accepts must
 * be findable by name and lie inside the file. */
#include "milc/assert.h"
#include "milc/safetensors.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint8_t *buf = malloc(size ? size : 1); /* exact size: ASan sees overreads */
    if (!buf) return 0;
    memcpy(buf, data, size);
    DiagSink d;
    diag_init(&d);
    SafetensorsFile f;
    if (safetensors_parse(&f, "fuzz.safetensors", buf, size, &d) == 0) {
        MILC_ASSERT(d.errors == 0);
        for (size_t i = 0; i < f.count; i++) {
            const SafetensorsTensor *t = &f.tensors[i];
            MILC_ASSERT(safetensors_find(&f, t->name) == t);
            MILC_ASSERT(t->offset <= size && t->nbytes <= size - t->offset);
            MILC_ASSERT((const uint8_t *)t->data == buf + t->offset);
            volatile uint8_t sink = 0;
            if (t->nbytes) sink ^= ((const uint8_t *)t->data)[t->nbytes - 1];
            (void)sink;
        }
        for (size_t i = 0; i < f.meta_count; i++)
            MILC_ASSERT(safetensors_metadata(&f, f.meta[2 * i]) == f.meta[2 * i + 1]);
        safetensors_close(&f);
    } else {
        MILC_ASSERT(d.errors == 1);
    }
    diag_free(&d);
    free(buf);
    return 0;
}
