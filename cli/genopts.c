/* genopts.c — what emit, build and bench share: choosing a template or preset,
 * turning the template's own parameters into command-line options, and the
 * template search path. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "genopts.h"
#include "milc/pipeline.h"

const char *cli_config_name(const Args *a) {
    const char *m = args_get(a, "model");
    if (m) return m;
    const char *t = args_get(a, "template");
    return t ? t : "gpt2";
}

GenConfig *cli_gen_config(const GenSearchPath *sp, const Args *a, DiagSink *d) {
    GenConfig *c = gen_config_open(sp, cli_config_name(a), d);
    if (!c) return NULL;
    for (int i = 0; i < a->nextra; i++)
        if (gen_config_set(c, a->extra[i].name, a->extra[i].value, d) != 0) {
            gen_config_free(c);
            return NULL;
        }
    if (gen_config_resolve(c, d) != 0) {
        gen_config_free(c);
        return NULL;
    }
    return c;
}

void cli_template_help(const Cli *cli, FILE *f, const Args *a) {
    TemplatePath tp;
    if (tpath_init(&tp, cli->template_dirs) != 0) return;
    DiagSink d;
    diag_init(&d);
    GenConfig *c = gen_config_open(&tp.sp, cli_config_name(a), &d);
    if (c) {
        char *desc = gen_template_describe(gen_config_template(c));
        if (desc) {
            fprintf(f, "\ntemplate '%s' (each parameter is an option: --NAME VALUE):\n%s", cli_config_name(a), desc);
            free(desc);
        }
        gen_config_free(c);
    } else {
        char *s = diag_render(&d);
        if (s) {
            fputs(s, stderr);
            free(s);
        }
    }
    diag_free(&d);
    tpath_free(&tp);
}

bool verify_flags_ok(const char *cmd, const Args *a) {
    int n = args_flag(a, "verify") + args_flag(a, "verify-once") + args_flag(a, "no-verify");
    if (n > 1) cli_usage_error(cmd, "--verify, --verify-once and --no-verify exclude each other");
    return n <= 1;
}

int verify_policy(const Args *a) {
    if (args_flag(a, "no-verify")) return BUILD_VERIFY_NONE;
    return args_flag(a, "verify") ? BUILD_VERIFY_FULL : BUILD_VERIFY_ONCE;
}

const char *verify_flag(int policy) {
    return policy == BUILD_VERIFY_NONE ? "--no-verify" : policy == BUILD_VERIFY_FULL ? "--verify" : NULL;
}
