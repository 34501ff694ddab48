/* fuzz_blob.c — libFuzzer target: milblob_parse on arbitrary bytes must never
 * read out of bounds, and a file it accepts must hold records it can digest
 * and find by offset.  The records-only reader (pread) must judge the same
 * bytes, as a file, the same way and find the same records. */
#include "milc/assert.h"
#include "milc/blob.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The input as a file, rewritten in place each run. */
static const char *as_file(const uint8_t *data, size_t size) {
    static char path[64];
    static int fd = -1;
    if (fd < 0) {
        snprintf(path, sizeof path, "/tmp/fuzz_blob.XXXXXX");
        fd = mkstemp(path);
        MILC_ASSERT(fd >= 0);
    }
    MILC_ASSERT(ftruncate(fd, 0) == 0);
    MILC_ASSERT(size == 0 || pwrite(fd, data, size, 0) == (ssize_t)size);
    return path;
}

static void same_as_records(const MilBlobFile *f, int rc, const uint8_t *data, size_t size) {
    DiagSink d;
    diag_init(&d);
    MilBlobFile g;
    int grc = milblob_open_records(&g, as_file(data, size), &d);
    MILC_ASSERT(grc == rc);
    MILC_ASSERT(d.errors == (grc ? 1 : 0));
    if (grc == 0) {
        MILC_ASSERT(g.count == f->count);
        for (uint32_t i = 0; i < g.count; i++)
            MILC_ASSERT(g.records[i].offset == f->records[i].offset && g.records[i].size == f->records[i].size &&
                        g.records[i].dtype == f->records[i].dtype && g.records[i].data == NULL);
        milblob_close(&g);
    }
    diag_free(&d);
}

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
        same_as_records(&f, 0, data, size);
        milblob_close(&f);
    } else {
        MILC_ASSERT(d.errors == 1);
        same_as_records(&f, -1, data, size);
    }
    diag_free(&d);
    free(buf);
    return 0;
}
