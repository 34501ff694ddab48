/* fuzz_blob.c — libFuzzer target: milblob_parse on arbitrary bytes must never
 * read out of bounds, and a file it accepts must hold records it can digest
 * and find by offset. */
#include "milc/assert.h"
#include "milc/blob.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* A private copy sized exactly, so ASan catches a read one past the end. */
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf) return 0;
    memcpy(buf, data, size);
    DiagSink d;
    diag_init(&d);
    MilBlobFile f;
    if (milblob_parse(&f, "fuzz.bin", buf, size, &d) == 0) {
        MILC_ASSERT(d.errors == 0);
        uint8_t h[16];
        milblob_file_digest(&f, h);
        for (uint32_t i = 0; i < f.count; i++) {
            const MilBlobRecord *r = milblob_find(&f, f.records[i].offset);
            MILC_ASSERT(r == &f.records[i]);
            MILC_ASSERT(r->data_offset + r->size <= size);
        }
        milblob_close(&f);
    } else {
        MILC_ASSERT(d.errors == 1);
    }
    diag_free(&d);
    free(buf);
    return 0;
}
