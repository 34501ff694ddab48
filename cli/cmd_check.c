/* cmd_check.c — `milc check` and `milc fmt`: the front end on a file. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "milc/arena.h"
#include "milc/mil.h"
#include "program.h"

static const OptSpec check_opts[] = {
    {"model-path", 0, OPT_VALUE, "DIR", "directory @model_path stands for (default: the file's)"},
    {"target", 0, OPT_VALUE, "cpu|ane", "also check the target's limits (default cpu)"},
    {"Werror", 0, OPT_FLAG, NULL, "treat warnings as errors"},
    {0},
};

static void check_help(FILE *f) {
    fputs("usage: milc check (FILE.mil | PKG.mlpackage | DIR) [--model-path DIR] [--target cpu|ane] [--Werror]\n"
          "\n"
          "Parse and type-check a MIL program (a model.mil file, a folder holding one\n"
          "such as a .mlmodelc, or a .mlpackage): op signatures, shapes,\n"
          "dtypes, names, and every BLOBFILE weight against its record in the weight\n"
          "file.  --target ane adds the Apple Neural Engine's known limits.\n"
          "Exit 0 when valid; diagnostics and exit 1 when not.\n\noptions:\n", f);
    print_options(f, check_opts);
}

static int check_run(Cli *cli, int argc, char **argv) {
    Args a;
    if (!args_parse("check", check_opts, argc - 1, argv + 1, false, &a)) return EXIT_USAGE;
    int rc = EXIT_USAGE;
    MilTarget target = MIL_TARGET_CPU;
    const char *t = args_get(&a, "target");
    if (t && strcmp(t, "ane") == 0) target = MIL_TARGET_ANE;
    else if (t && strcmp(t, "cpu") != 0) { cli_usage_error("check", "--target must be cpu or ane, not '%s'", t); goto out; }
    if (a.npos != 1) { cli_usage_error("check", "expected one FILE.mil, package or folder"); goto out; }
    Arena arena;
    arena_init(&arena);
    PkgProgram pp;
    rc = cli_load_program(cli, a.pos[0], args_get(&a, "model-path"), target, args_flag(&a, "Werror"), &arena, &pp);
    if (rc == EXIT_OK && cli->json) printf("{\"file\":\"%s\",\"valid\":true}\n", a.pos[0]);
    else if (rc == EXIT_OK && cli->verbosity > 0) fprintf(stderr, "%s: ok\n", a.pos[0]);
    arena_free(&arena);
out:
    args_free(&a);
    return rc;
}

const Command cmd_check = {"check", "parse and type-check a MIL program", check_run, check_help, false};

static const OptSpec fmt_opts[] = {
    {"output", 'o', OPT_VALUE, "FILE", "write here instead of stdout"},
    {"model-path", 0, OPT_VALUE, "DIR", "directory @model_path stands for (default: the file's)"},
    {"check", 0, OPT_FLAG, NULL, "exit 1 if the file is not already canonical"},
    {0},
};

static void fmt_help(FILE *f) {
    fputs("usage: milc fmt (FILE.mil | PKG.mlpackage | DIR) [-o OUT] [--check]\n"
          "\n"
          "Print a MIL program in canonical model.mil form: arguments and attributes in\n"
          "alphabetical order, floats as hex floats, fixed indentation.  The output is\n"
          "byte-for-byte stable: formatting it again changes nothing.\n\noptions:\n", f);
    print_options(f, fmt_opts);
}

static int fmt_run(Cli *cli, int argc, char **argv) {
    Args a;
    if (!args_parse("fmt", fmt_opts, argc - 1, argv + 1, false, &a)) return EXIT_USAGE;
    int rc = EXIT_USAGE;
    if (a.npos != 1) { cli_usage_error("fmt", "expected one FILE.mil, package or folder"); goto out; }
    Arena arena;
    arena_init(&arena);
    PkgProgram pp;
    rc = cli_load_program(cli, a.pos[0], args_get(&a, "model-path"), MIL_TARGET_CPU, false, &arena, &pp);
    if (rc == EXIT_OK && args_flag(&a, "check") && pp.kind != PKG_KIND_MIL) {
        cli_usage_error("fmt", "--check compares a model.mil file with its canonical form; '%s' is a package or folder", a.pos[0]);
        rc = EXIT_USAGE;
    }
    if (rc == EXIT_OK) {
        IrProgram *p = pp.prog;
        size_t len;
        char *text = mil_print(p, &len);
        const char *o = args_get(&a, "output");
        if (!text) { cli_error("out of memory"); rc = EXIT_SYSTEM; }
        else if (args_flag(&a, "check")) {
            size_t olen;
            char *orig = cli_read_file(a.pos[0], &olen);
            if (!orig) rc = EXIT_SYSTEM;
            else if (olen != len || memcmp(orig, text, len) != 0) {
                fprintf(stderr, "%s: not in canonical form\n", a.pos[0]);
                rc = EXIT_INPUT;
            }
            free(orig);
        } else if (o) rc = cli_write_file(o, text, len) == 0 ? EXIT_OK : EXIT_SYSTEM;
        else fwrite(text, 1, len, stdout);
        free(text);
    }
    arena_free(&arena);
out:
    args_free(&a);
    return rc;
}

const Command cmd_fmt = {"fmt", "print a MIL program in canonical form", fmt_run, fmt_help, false};
