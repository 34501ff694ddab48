/* fuzz_manifest.c — libFuzzer target: arbitrary bytes as a prewarm manifest,
 * parsed line by line as `milc prewarm` does.  Must never crash or leak; a
 * failed line must come with an error diagnostic at its line. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "milc/manifest.h"
#include "milc/assert.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = malloc(size + 1);
    MILC_ASSERT(text != NULL);
    memcpy(text, data, size);
    text[size] = 0;
    DiagSink d;
    diag_init(&d);
    const char *file = diag_add_source(&d, "fuzz.manifest", text, size);
    int line = 0;
    for (char *p = text, *next; p && *p; p = next) {
        line++;
        next = strchr(p, '\n');
        if (next) *next++ = 0;
        ManifestLine ln;
        int before = d.errors;
        int rc = manifest_parse_line(p, (SrcLoc){file, line, 1}, &ln, &d);
        MILC_ASSERT(rc == 0 || d.errors > before);
        for (int i = 0; i < ln.nextra; i++) MILC_ASSERT(ln.extra[i].name && ln.extra[i].value);
        manifest_line_free(&ln);
    }
    free(diag_render(&d));
    diag_free(&d);
    free(text);
    return 0;
}
