/* half_dump.c — runs milc/half.h's conversions for check_half.py, which
 * compares them with numpy:  half_dump h2f  → all 65536 halves as fp32 bits;
 * half_dump f2h < fp32 bits → fp16 bits.  Built twice: F16C and portable.
 * Both go through the bulk converters, and the scalar ones are checked equal. */
#include "milc/half.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    if (strcmp(argv[1], "h2f") == 0) {
        static uint16_t h[65536];
        static float f[65536];
        for (unsigned i = 0; i < 65536; i++) h[i] = (uint16_t)i;
        half_to_float_n(h, f, 65536);
        for (unsigned i = 0; i < 65536; i++) {
            float s = half_to_float(h[i]);
            if (memcmp(&s, &f[i], 4) != 0) return fprintf(stderr, "scalar/bulk differ at %04x\n", i), 1;
        }
        return fwrite(f, 4, 65536, stdout) == 65536 ? 0 : 3;
    }
    if (strcmp(argv[1], "f2h") == 0) {
        size_t cap = 1 << 20, n = 0;
        float *f = malloc(cap * 4);
        size_t k;
        while ((k = fread(f + n, 4, cap - n, stdin)) > 0) {
            n += k;
            if (n == cap) f = realloc(f, (cap *= 2) * 4);
        }
        uint16_t *h = malloc(n * 2 + 2);
        float_to_half_n(f, h, n);
        for (size_t i = 0; i < n; i++)
            if (float_to_half(f[i]) != h[i]) return fprintf(stderr, "scalar/bulk differ at %zu\n", i), 1;
        int rc = fwrite(h, 2, n, stdout) == n ? 0 : 3;
        free(f);
        free(h);
        return rc;
    }
    return 2;
}
