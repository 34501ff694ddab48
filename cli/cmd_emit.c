/* cmd_emit.c — `milc emit`: generate a chunk's model.mil and weight file. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "genopts.h"

static const OptSpec emit_opts[] = {
    GEN_COMMON_OPTS,
    {"output", 'o', OPT_VALUE, "DIR", "write DIR/model.mil, DIR/weights/weight.bin, DIR/manifest.json"},
    {"mode", 0, OPT_VALUE, "N", "record compile mode N (0, 1, 2) in buildInfo"},
    {"help", 'h', OPT_FLAG, NULL, "this help, with the template's parameters"},
    {0},
};

static void emit_usage(FILE *f) {
    fputs("usage: milc emit [--template NAME | --model PRESET] [--weights SRC] [--PARAM VALUE ...] -o DIR\n"
          "\n"
          "Generate one transformer chunk from a template: DIR/model.mil (canonical\n"
          "model.mil text), DIR/weights/weight.bin (MILBlob v2) and DIR/manifest.json\n"
          "(parameters, inputs and outputs with shapes).  The same template,\n"
          "parameters and weights always give byte-identical files.\n\noptions:\n", f);
    print_options(f, emit_opts);
}

static void emit_help(FILE *f) { emit_usage(f); }

static int emit_run(Cli *cli, int argc, char **argv) {
    Args a;
    if (!args_parse("emit", emit_opts, argc - 1, argv + 1, true, &a)) return EXIT_USAGE;
    int rc = EXIT_USAGE;
    if (args_flag(&a, "help")) {
        emit_usage(stdout);
        cli_template_help(cli, stdout, &a);
        rc = EXIT_OK;
        goto out;
    }
    const char *dir = args_get(&a, "output");
    if (!dir) { cli_usage_error("emit", "missing -o DIR"); goto out; }
    if (a.npos) { cli_usage_error("emit", "unexpected argument '%s'", a.pos[0]); goto out; }
    long mode = -1;
    if (args_get(&a, "mode") && !args_int("emit", "mode", args_get(&a, "mode"), 0, 2, &mode)) goto out;
    TemplatePath tp;
    if (tpath_init(&tp, cli) != 0) { cli_error("out of memory"); rc = EXIT_SYSTEM; goto out; }
    DiagSink d;
    diag_init(&d);
    long long t0 = cli_now_ns();
    GenConfig *c = cli_gen_config(&tp.sp, &a, &d);
    int ok = c && gen_emit(c,
                            &(GenOptions){.weights = args_get(&a, "weights"), .compile_mode = (int)mode,
                                          .max_memory = cli->max_memory},
                            dir, &d) == 0;
    rc = cli_report(cli, &d);
    if (ok && rc == EXIT_OK) {
        double ms = (double)(cli_now_ns() - t0) / 1e6;
        if (cli->json) printf("{\"dir\":\"%s\",\"ms\":%.3f}\n", dir, ms);
        else if (cli->verbosity >= 0) fprintf(stderr, "wrote %s/model.mil, %s/weights/weight.bin (%.1f ms)\n", dir, dir, ms);
    } else if (rc == EXIT_OK) {
        rc = EXIT_SYSTEM;
    }
    gen_config_free(c);
    diag_free(&d);
    tpath_free(&tp);
out:
    args_free(&a);
    return rc;
}

const Command cmd_emit = {"emit", "generate a chunk's MIL program and weights", emit_run, emit_help, true, false};
