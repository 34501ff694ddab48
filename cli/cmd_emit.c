/* cmd_emit.c — `milc emit`: generate a chunk's model.mil and weight file. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "json.h"
#include "genopts.h"
#include "program.h"

static const OptSpec emit_opts[] = {
    GEN_COMMON_OPTS,
    {"output", 'o', OPT_VALUE, "DIR", "write DIR/model.mil, DIR/weights/weight.bin, DIR/manifest.json"},
    {"mode", 0, OPT_VALUE, "N", "record compile mode N in buildInfo:" RT_MODE_TABLE(RT_MODE_HELP_)},
    {"format", 0, OPT_VALUE, "mil|mlpackage", "mil (default): the files above; mlpackage: DIR is a .mlpackage"},
    {"help", 'h', OPT_FLAG, NULL, "this help, with the template's parameters"},
    {0},
};

static void emit_usage(FILE *f) {
    fputs("usage: milc emit [--template NAME | --model PRESET] [--weights SRC] [--PARAM VALUE ...] -o DIR\n"
          "\n"
          "Generate one transformer chunk from a template: DIR/model.mil (canonical\n"
          "model.mil text), DIR/weights/weight.bin (MILBlob v2) and DIR/manifest.json\n"
          "(parameters, inputs and outputs with shapes).  The same template,\n"
          "parameters and weights always give byte-identical files.\n\noptions:\n",
          f);
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
    if (!dir) {
        cli_usage_error("emit", "missing -o DIR");
        goto out;
    }
    if (a.npos) {
        cli_usage_error("emit", "unexpected argument '%s'", a.pos[0]);
        goto out;
    }
    long mode = -1;
    if (args_get(&a, "mode") && !args_int("emit", "mode", args_get(&a, "mode"), 0, RT_NMODES - 1, &mode)) goto out;
    TemplatePath tp;
    if (tpath_init(&tp, cli->template_dirs) != 0) {
        cli_error("out of memory");
        rc = EXIT_SYSTEM;
        goto out;
    }
    DiagSink d;
    diag_init(&d);
    long long t0 = cli_now_ns();
    GenConfig *c = cli_gen_config(&tp.sp, &a, &d);
    const char *format = args_get(&a, "format");
    bool pkg = format && strcmp(format, "mlpackage") == 0;
    if (format && !pkg && strcmp(format, "mil") != 0) {
        cli_usage_error("emit", "--format must be mil or mlpackage");
        gen_config_free(c);
        diag_free(&d);
        tpath_free(&tp);
        goto out;
    }
    /* A package is made from the chunk emitted into a scratch folder beside it. */
    char scratch[4200];
    snprintf(scratch, sizeof scratch, "%s.emit-XXXXXX", dir);
    if (pkg && !mkdtemp(scratch)) {
        cli_error("cannot create a folder beside '%s'", dir);
        pkg = false, c = (gen_config_free(c), NULL);
    }
    int ok =
        c && gen_emit(c,
                      &(GenOptions){
                          .weights = args_get(&a, "weights"), .compile_mode = (int)mode, .max_memory = cli->max_memory},
                      pkg ? scratch : dir, &d) == 0;
    rc = cli_report(cli, &d);
    if (ok && rc == EXIT_OK && pkg) {
        Arena arena;
        arena_init(&arena);
        PkgProgram pp;
        diag_clear(&d); /* reported above; d keeps the emitted program's names */
        rc = cli_load_program(cli, scratch, NULL, MIL_TARGET_CPU, false, &arena, &pp, &d);
        if (rc == EXIT_OK) rc = cli_write_program(cli, &pp, PKG_OUT_MLPACKAGE, dir);
        arena_free(&arena);
        cli_rm_tree(scratch);
        ok = rc == EXIT_OK;
        if (!ok) goto done;
    } else if (pkg)
        cli_rm_tree(scratch);
    if (ok && rc == EXIT_OK) {
        double ms = (double)(cli_now_ns() - t0) / 1e6;
        if (pkg)
            (void)ms;
        else if (cli->json)
            cli_json_print(stdout, cli_json_obj("dir", cli_json_str(dir), "ms", cli_json_real(ms, 3), NULL));
        else if (cli->verbosity >= 0)
            fprintf(stderr, "wrote %s/model.mil, %s/weights/weight.bin (%.1f ms)\n", dir, dir, ms);
    } else if (rc == EXIT_OK) {
        rc = EXIT_SYSTEM;
    }
done:
    gen_config_free(c);
    diag_free(&d);
    tpath_free(&tp);
out:
    args_free(&a);
    return rc;
}

const Command cmd_emit = {"emit", "generate a chunk's MIL program and weights", emit_run, emit_help, true, false};
