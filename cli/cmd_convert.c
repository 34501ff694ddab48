/* cmd_convert.c — `milc convert`: a program from one container into another
 * (.mlpackage <-> model.mil folder), weights copied as they are. */
#include <stdlib.h>
#include <string.h>

#include "program.h"
#include "json.h"

static const OptSpec convert_opts[] = {
    {"output", 'o', OPT_VALUE, "DST", "write here: a .mlpackage, or a folder with model.mil"},
    {"format", 0, OPT_VALUE, "mlpackage|mil", "the kind of DST (default: by its name, .mlpackage or a folder)"},
    {"model-path", 0, OPT_VALUE, "DIR", "with a model.mil file: the directory @model_path stands for"},
    {0},
};

static void convert_help(FILE *f) {
    fputs("usage: milc convert SRC -o DST [--format mlpackage|mil] [--model-path DIR]\n"
          "\n"
          "Read a MIL program from a model.mil file (its weights under --model-path,\n"
          "default its folder), a folder holding model.mil (a .mlmodelc), or a\n"
          ".mlpackage; check it; and write it as a .mlpackage (Manifest.json, the\n"
          "Core ML Model spec, weights) or a model.mil folder.  Weight files are\n"
          "copied byte for byte.  The same input gives the same bytes.  On an error\n"
          "nothing is written; an existing DST is replaced only on success.\n\noptions:\n",
          f);
    print_options(f, convert_opts);
}

/* The output kind: --format, else by DST's name. */
static bool out_format(const char *dst, const char *fmt, PkgFormat *out) {
    size_t n = strlen(dst);
    while (n > 1 && dst[n - 1] == '/') n--;
    if (!fmt)
        *out = n > 10 && strncmp(dst + n - 10, ".mlpackage", 10) == 0 ? PKG_OUT_MLPACKAGE : PKG_OUT_MIL_DIR;
    else if (strcmp(fmt, "mlpackage") == 0)
        *out = PKG_OUT_MLPACKAGE;
    else if (strcmp(fmt, "mil") == 0)
        *out = PKG_OUT_MIL_DIR;
    else
        return false;
    return true;
}

int cli_write_program(Cli *cli, const PkgProgram *pp, PkgFormat fmt, const char *dst) {
    DiagSink d;
    diag_init(&d);
    long long t0 = cli_now_ns();
    int r = pkg_write(pp->prog, pp->model_dir, fmt, dst, &d);
    int rc = cli_report(cli, &d);
    if (r != 0)
        rc = d.system_errors ? EXIT_SYSTEM : EXIT_INPUT;
    else if (cli->json)
        cli_json_print(stdout,
                       cli_json_obj("output", cli_json_str(dst), "ms", cli_json_real(cli_ms_since(t0), 3), NULL));
    else if (cli->verbosity >= 0)
        fprintf(stderr, "wrote %s (%.1f ms)\n", dst, cli_ms_since(t0));
    diag_free(&d);
    return rc;
}

static int convert_run(Cli *cli, int argc, char **argv) {
    Args a;
    if (!args_parse("convert", convert_opts, argc - 1, argv + 1, false, &a)) return EXIT_USAGE;
    int rc = EXIT_USAGE;
    const char *dst = args_get(&a, "output");
    PkgFormat fmt;
    if (a.npos != 1)
        cli_usage_error("convert", "expected one SRC");
    else if (!dst)
        cli_usage_error("convert", "missing -o DST");
    else if (!out_format(dst, args_get(&a, "format"), &fmt))
        cli_usage_error("convert", "--format must be mlpackage or mil");
    else {
        Arena arena;
        arena_init(&arena);
        DiagSink d;
        diag_init(&d);
        PkgProgram pp;
        rc = cli_load_program(cli, a.pos[0], args_get(&a, "model-path"), MIL_TARGET_CPU, false, &arena, &pp, &d);
        if (rc == EXIT_OK) rc = cli_write_program(cli, &pp, fmt, dst);
        arena_free(&arena);
        diag_free(&d);
    }
    args_free(&a);
    return rc;
}

const Command cmd_convert = {
    "convert", "convert a MIL program between .mlpackage and model.mil", convert_run, convert_help, false, false};
