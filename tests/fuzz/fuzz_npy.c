/* fuzz_npy.c — libFuzzer target: npy_read on arbitrary bytes must never read
 * out of bounds; an accepted array must lie exactly inside the buffer, and
 * the header numpy.save would write for it must parse back to the same array
 * (so reader and writer agree on every shape the reader lets through). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "milc/assert.h"
#include "milc/npy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint8_t *buf = malloc(size ? size : 1); /* exact size: ASan sees overreads */
    if (!buf) return 0;
    memcpy(buf, data, size);
    NpyArray a;
    char err[256];
    int rc = npy_read(buf, size, &a, err, sizeof err);
    if (rc == NPY_OK) {
        MILC_ASSERT(a.rank >= 0 && a.rank <= NPY_MAX_RANK);
        size_t item = npy_dtype_size(a.dtype);
        MILC_ASSERT(item > 0 && a.nbytes == a.count * item);
        MILC_ASSERT((const uint8_t *)a.data >= buf && a.nbytes <= size);
        MILC_ASSERT((const uint8_t *)a.data + a.nbytes == buf + size);
        size_t count = 1;
        for (int i = 0; i < a.rank; i++) count *= (size_t)a.dims[i];
        MILC_ASSERT(count == a.count);
        volatile uint8_t sink = 0;
        if (a.nbytes) sink ^= ((const uint8_t *)a.data)[a.nbytes - 1];
        (void)sink;

        long hl = npy_header(a.dtype, a.rank, a.dims, NULL, 0);
        MILC_ASSERT(hl > 0 && hl % 64 == 0);
        if (a.nbytes <= (1u << 20)) {
            uint8_t *img = malloc((size_t)hl + a.nbytes);
            MILC_ASSERT(img != NULL);
            MILC_ASSERT(npy_header(a.dtype, a.rank, a.dims, (char *)img, (size_t)hl) == hl);
            memcpy(img + hl, a.data, a.nbytes);
            NpyArray b;
            MILC_ASSERT(npy_read(img, (size_t)hl + a.nbytes, &b, err, sizeof err) == NPY_OK);
            MILC_ASSERT(b.dtype == a.dtype && b.rank == a.rank && b.count == a.count);
            MILC_ASSERT(memcmp(b.dims, a.dims, sizeof a.dims[0] * (size_t)a.rank) == 0);
            MILC_ASSERT(memcmp(b.data, a.data, a.nbytes) == 0);
            free(img);
        }
    } else {
        MILC_ASSERT(rc == NPY_EFORMAT || rc == NPY_EUNSUPPORTED);
        MILC_ASSERT(err[0] != 0 && memchr(err, 0, sizeof err) != NULL);
    }
    free(buf);
    return 0;
}
