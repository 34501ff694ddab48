/* libFuzzer target for the MIL front end: parse; if that succeeds, check for
 * both targets, print, reparse and reprint — the reprint must equal the print
 * byte for byte (canonical text is a fixed point).  BLOBFILE paths resolve
 * under a model dir that does not exist, so no file is ever read. */
#include "milc/mil.h"
#include "fuzz_util.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    FuzzParse fp;
    fuzz_parse(&fp, data, size);
    IrProgram *p = fp.p;
    if (p) {
        MilCheckOptions o = {.target = MIL_TARGET_CPU, .model_path = "/nonexistent-milc-fuzz"};
        mil_check(p, &o, &fp.d);
        o.target = MIL_TARGET_ANE;
        mil_check(p, &o, &fp.d);
        size_t len;
        char *text = mil_print(p, &len);
        Arena a2;
        arena_init(&a2);
        DiagSink d2;
        diag_init(&d2);
        IrProgram *q = mil_parse(&a2, &d2, "reprint.mil", text, len);
        if (!q) abort(); /* printed text must parse */
        size_t len2;
        char *text2 = mil_print(q, &len2);
        if (len2 != len || memcmp(text, text2, len) != 0) abort();
        free(text2);
        free(text);
        arena_free(&a2);
        diag_free(&d2);
    }
    fuzz_parse_free(&fp);
    return 0;
}
