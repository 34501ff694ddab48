/* fuzz_template.c — libFuzzer target: a template file of arbitrary bytes
 * (and, after a line "--block--", a block file it may include as
 * "blocks/f") is loaded, resolved with its defaults and generated without
 * weights.  Must never crash, hang or leak, whatever the XML, expressions or
 * MIL inside; a failure must come with an error diagnostic. */
#include "milc/assert.h"
#include "milc/gen.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[64];

static void put(const char *name, const uint8_t *data, size_t size) {
    char path[128];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    MILC_ASSERT(f != NULL);
    if (size) MILC_ASSERT(fwrite(data, 1, size, f) == size);
    fclose(f);
}

static void cleanup(void) {
    char path[128];
    snprintf(path, sizeof path, "%s/t.xml", dir);
    remove(path);
    snprintf(path, sizeof path, "%s/blocks/f.xml", dir);
    remove(path);
    snprintf(path, sizeof path, "%s/blocks", dir);
    remove(path);
    remove(dir);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!dir[0]) {
        atexit(cleanup);
        snprintf(dir, sizeof dir, "/tmp/milc-fuzz-template-XXXXXX");
        MILC_ASSERT(mkdtemp(dir) != NULL);
        char blocks[96];
        snprintf(blocks, sizeof blocks, "%s/blocks", dir);
        mkdir(blocks, 0777);
    }
    static const char sep[] = "\n--block--\n";
    const uint8_t *cut = NULL;
    for (size_t i = 0; i + sizeof sep - 1 <= size && !cut; i++)
        if (!memcmp(data + i, sep, sizeof sep - 1)) cut = data + i;
    size_t tlen = cut ? (size_t)(cut - data) : size;
    put("t.xml", data, tlen);
    if (cut)
        put("blocks/f.xml", cut + sizeof sep - 1, size - tlen - (sizeof sep - 1));
    else
        put("blocks/f.xml", (const uint8_t *)"<block/>", 8);

    const char *dirs[] = {dir};
    GenSearchPath sp = {dirs, 1, NULL};
    DiagSink d;
    diag_init(&d);
    GenConfig *c = gen_config_open(&sp, "t", &d);
    if (c && gen_config_resolve(c, &d) == 0) {
        char *canon = gen_config_canonical(c);
        MILC_ASSERT(canon != NULL);
        free(canon);
        GenResult r;
        if (gen_generate(c, &(GenOptions){.compile_mode = -1}, NULL, &r, &d) == 0) {
            MILC_ASSERT(r.mil != NULL && r.noutputs > 0);
            gen_result_free(&r);
        } else {
            MILC_ASSERT(d.errors > 0);
        }
    } else {
        MILC_ASSERT(d.errors > 0);
    }
    char *s = diag_render(&d);
    free(s);
    gen_config_free(c);
    diag_free(&d);
    return 0;
}
