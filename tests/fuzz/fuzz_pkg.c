/* libFuzzer target for the package reader: the input is read both as a
 * Manifest.json and as a model.mlmodel spec.  A spec that reads is checked,
 * printed, written back as a spec and read again: the second reading must
 * print the same text byte for byte (the reader and writer are inverse on
 * everything the reader accepts), and the text must parse to the same print.
 * BLOBFILE paths resolve under a model dir that does not exist, so no file is
 * ever read. */
#include "milc/mil.h"
#include "milc/pkg.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static char *print_spec(Arena *a, const void *spec, size_t len, size_t *out_len) {
    DiagSink d;
    diag_init(&d);
    d.max_errors = 20;
    IrProgram *p = pkg_read_spec(a, &d, "fuzz.mlmodel", spec, len);
    char *text = NULL;
    if (p) {
        MilCheckOptions o = {.target = MIL_TARGET_CPU, .model_path = "/nonexistent-milc-fuzz"};
        mil_check(p, &o, &d);
        o.target = MIL_TARGET_ANE;
        mil_check(p, &o, &d);
        text = mil_print(p, out_len);
    }
    free(diag_render(&d));
    diag_free(&d);
    return text;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    Arena a;
    arena_init(&a);
    DiagSink d;
    diag_init(&d);
    pkg_manifest_root(&a, &d, "Manifest.json", (const char *)data, size);
    diag_free(&d);
    size_t len;
    char *text = print_spec(&a, data, size, &len);
    if (text) {
        /* spec -> IR -> spec -> IR prints the same */
        Arena a2;
        arena_init(&a2);
        DiagSink d2;
        diag_init(&d2);
        IrProgram *p = mil_parse(&a2, &d2, "reprint.mil", text, len);
        if (!p) abort(); /* printed text must parse */
        size_t len2;
        char *text2 = mil_print(p, &len2);
        if (len2 != len || memcmp(text, text2, len) != 0) abort();
        void *spec;
        size_t slen;
        if (pkg_encode_spec(p, &spec, &slen, &d2) == 0) {
            size_t len3;
            char *text3 = print_spec(&a2, spec, slen, &len3);
            if (!text3 || len3 != len || memcmp(text, text3, len) != 0) abort();
            free(text3);
            free(spec);
        }
        free(text2);
        arena_free(&a2);
        diag_free(&d2);
    }
    free(text);
    arena_free(&a);
    return 0;
}
