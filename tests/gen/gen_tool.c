/* gen_tool.c — a tiny driver of the generator API for tests and the emit
 * benchmark (what `milc emit` does, minus the CLI's polish):
 *   gen_tool [-T DIR]... NAME OUTDIR [--param VALUE]... [--weights SRC] [--mode N] [--raw]
 *   gen_tool [-T DIR]... --list | --show NAME | --canonical NAME [--param VALUE]...
 * The built-in template directory comes first on the path.  Diagnostics go to
 * stderr; exit 1 on invalid input. */
#include "milc/gen.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int finish(DiagSink *d, int rc) {
    char *s = diag_render(d);
    fputs(s, stderr);
    free(s);
    diag_free(d);
    return rc;
}

int main(int argc, char **argv) {
    const char *dirs[16] = {MILC_TEMPLATE_DIR};
    int ndirs = 1, i = 1;
    while (i + 1 < argc && !strcmp(argv[i], "-T") && ndirs < 16) {
        dirs[ndirs++] = argv[i + 1];
        i += 2;
    }
    GenSearchPath sp = {dirs, ndirs, NULL};
    DiagSink d;
    diag_init(&d);
    if (i < argc && !strcmp(argv[i], "--list")) {
        GenEntry *e;
        int n;
        gen_list(&sp, &e, &n, &d);
        for (int k = 0; k < n; k++)
            printf("%-14s %-8s %s\n", e[k].name, e[k].kind == GEN_ENTRY_PRESET ? e[k].template_name : "template",
                   e[k].doc);
        gen_list_free(e, n);
        return finish(&d, 0);
    }
    if (i + 1 < argc && !strcmp(argv[i], "--show")) {
        GenTemplate *t = gen_template_load(&sp, argv[i + 1], &d);
        if (!t) return finish(&d, 1);
        char *s = gen_template_describe(t);
        fputs(s, stdout);
        free(s);
        gen_template_free(t);
        return finish(&d, 0);
    }
    bool canonical = i < argc && !strcmp(argv[i], "--canonical");
    if (canonical) i++;
    if (i + (canonical ? 0 : 1) >= argc) {
        fprintf(stderr, "usage: gen_tool [-T DIR]... NAME OUTDIR [--param VALUE]...\n");
        return 2;
    }
    const char *name = argv[i++], *out = canonical ? NULL : argv[i++];
    GenOptions o = {.compile_mode = -1};
    GenConfig *c = gen_config_open(&sp, name, &d);
    if (!c) return finish(&d, 1);
    for (; i < argc; i++) {
        if (!strcmp(argv[i], "--raw")) {
            o.raw = true;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "%s needs a value\n", argv[i]);
            gen_config_free(c);
            return 2;
        }
        if (!strcmp(argv[i], "--weights"))
            o.weights = argv[++i];
        else if (!strcmp(argv[i], "--mode"))
            o.compile_mode = atoi(argv[++i]);
        else {
            gen_config_set(c, argv[i], argv[i + 1], &d);
            i++;
        }
    }
    int rc = diag_failed(&d) || gen_config_resolve(c, &d) != 0;
    if (!rc && canonical) {
        char *s = gen_config_canonical(c);
        fputs(s, stdout);
        free(s);
    } else if (!rc) {
        rc = gen_emit(c, &o, out, &d) != 0;
    }
    gen_config_free(c);
    return finish(&d, rc);
}
