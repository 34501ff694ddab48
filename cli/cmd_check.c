/* cmd_check.c — `milc check` and `milc fmt`: the front end on a file. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "json.h"
#include "milc/arena.h"
#include "milc/mil.h"
#include "program.h"

static const OptSpec check_opts[] = {
    {"model-path", 0, OPT_VALUE, "DIR", "directory @model_path stands for (default: the file's)"},
    {"target", 0, OPT_VALUE, "cpu|ane", "also check the target's limits (default cpu)"},
    {"Werror", 0, OPT_FLAG, NULL, "treat warnings as errors"},
    {"report", 0, OPT_FLAG, NULL, "with --target ane: list every op, inside the ANE profile or not and why"},
    {0},
};

static void check_help(FILE *f) {
    fputs("usage: milc check (FILE.mil | PKG.mlpackage | DIR) [--model-path DIR] [--target cpu|ane] [--Werror]\n"
          "\n"
          "Parse and type-check a MIL program (a model.mil file, a folder holding one\n"
          "such as a .mlmodelc, or a .mlpackage): op signatures, shapes,\n"
          "dtypes, names, and every BLOBFILE weight against its record in the weight\n"
          "file.  --target ane adds the Apple Neural Engine's known limits; with\n"
          "--report it lists every op (function, index, op, name) as inside the ANE\n"
          "profile or not with the rules it breaks (--json: as data).\n"
          "Exit 0 when valid; diagnostics and exit 1 when not.\n\noptions:\n",
          f);
    print_options(f, check_opts);
}

/* Does diagnostic loc point into op (its name, an argument, an attribute or
 * a result)?  The checker reports each ANE rule at one of those. */
static bool loc_eq(SrcLoc a, SrcLoc b) { return a.file == b.file && a.line == b.line && a.col == b.col; }

static bool loc_in_op(SrcLoc l, const IrOp *op) {
    if (loc_eq(l, op->loc)) return true;
    for (int i = 0; i < op->nargs; i++)
        if (loc_eq(l, op->args[i].loc)) return true;
    for (int i = 0; i < op->nattrs; i++)
        if (loc_eq(l, op->attrs[i].loc)) return true;
    for (int i = 0; i < op->nresults; i++)
        if (loc_eq(l, op->results[i]->loc)) return true;
    return false;
}

static bool is_ane(const Diag *g) { return g->level != DIAG_NOTE && strncmp(g->msg, "ane: ", 5) == 0; }

/* One line (or JSON object) per op: inside the ANE profile, or the rules it
 * breaks; then the rules broken by the functions' inputs and outputs and the
 * program as a whole.  Returns the number of ops outside. */
static int ane_report(const Cli *cli, const char *path, const IrProgram *p, const DiagSink *d) {
    bool *used = calloc((size_t)d->count + 1, 1);
    int total = 0, outside = 0;
    json_t *ops = json_array(), *other = json_array(), *rules = NULL;
    for (int f = 0; f < p->nfuncs; f++) {
        int idx = 0;
        IR_FOR_EACH_OP(op, p->funcs[f]) {
            int nrules = 0;
            for (int k = 0; k < d->count; k++) nrules += is_ane(&d->items[k]) && loc_in_op(d->items[k].loc, op);
            if (cli->json) {
                rules = json_array();
                cli_json_push(ops,
                              cli_json_obj("function", cli_json_str(p->funcs[f]->name), "index", json_integer(idx),
                                           "op", json_string(mil_op_name(op->kind)), "name", cli_json_str(op->name),
                                           "ane", json_boolean(!nrules), "rules", json_incref(rules), NULL));
            } else
                printf("%-8s %4d  %-28s %-24s %s", p->funcs[f]->name, idx, mil_op_name(op->kind), op->name,
                       nrules ? "OUTSIDE" : "ane");
            int n = 0;
            for (int k = 0; k < d->count; k++) {
                if (!is_ane(&d->items[k]) || !loc_in_op(d->items[k].loc, op)) continue;
                used[k] = true;
                if (cli->json)
                    cli_json_push(rules, cli_json_str(d->items[k].msg + 5));
                else
                    printf("%s%s", n++ ? "; " : ": ", d->items[k].msg + 5);
            }
            if (cli->json)
                json_decref(rules);
            else
                printf("\n");
            outside += nrules > 0;
            total++, idx++;
        }
    }
    int n = 0;
    for (int k = 0; k < d->count; k++) {
        if (!is_ane(&d->items[k]) || used[k]) continue;
        if (cli->json)
            n++, cli_json_push(other, cli_json_str(d->items[k].msg + 5));
        else
            printf("program: %s\n", d->items[k].msg + 5);
    }
    if (cli->json)
        cli_json_print(stdout, cli_json_obj("file", cli_json_str(path), "ops", ops, "other", other, "total",
                                            json_integer(total), "outside", json_integer(outside), NULL));
    else {
        json_decref(ops), json_decref(other);
        printf("%s: %d ops, %d inside the ANE profile, %d outside\n", path, total, total - outside, outside);
    }
    free(used);
    return outside + n;
}

/* check --target ane --report: the checker's ANE findings grouped by op. */
static int check_report(Cli *cli, const char *path, const char *model_path) {
    Arena arena;
    arena_init(&arena);
    DiagSink d;
    diag_init(&d);
    PkgProgram pp;
    int rc = EXIT_OK;
    if (pkg_load(&arena, &d, path, model_path, &pp) == 0) {
        mil_check(pp.prog, &(MilCheckOptions){.target = MIL_TARGET_ANE, .model_path = pp.model_dir}, &d);
        bool other = false;
        for (int k = 0; k < d.count; k++) other |= d.items[k].level == DIAG_ERROR && !is_ane(&d.items[k]);
        if (!other)
            rc = ane_report(cli, path, pp.prog, &d) ? EXIT_INPUT : EXIT_OK;
        else
            rc = -1;
    } else
        rc = -1;
    if (rc < 0) { /* not a valid program at all: the usual diagnostics */
        cli_report(cli, &d);
        rc = d.system_errors ? EXIT_SYSTEM : EXIT_INPUT;
    }
    diag_free(&d);
    arena_free(&arena);
    return rc;
}

static int check_run(Cli *cli, int argc, char **argv) {
    Args a;
    if (!args_parse("check", check_opts, argc - 1, argv + 1, false, &a)) return EXIT_USAGE;
    int rc = EXIT_USAGE;
    MilTarget target = MIL_TARGET_CPU;
    const char *t = args_get(&a, "target");
    if (t && strcmp(t, "ane") == 0)
        target = MIL_TARGET_ANE;
    else if (t && strcmp(t, "cpu") != 0) {
        cli_usage_error("check", "--target must be cpu or ane, not '%s'", t);
        goto out;
    }
    if (a.npos != 1) {
        cli_usage_error("check", "expected one FILE.mil, package or folder");
        goto out;
    }
    if (args_flag(&a, "report")) {
        if (target != MIL_TARGET_ANE)
            cli_usage_error("check", "--report goes with --target ane");
        else
            rc = check_report(cli, a.pos[0], args_get(&a, "model-path"));
        goto out;
    }
    Arena arena;
    arena_init(&arena);
    DiagSink d;
    diag_init(&d);
    PkgProgram pp;
    rc = cli_load_program(cli, a.pos[0], args_get(&a, "model-path"), target, args_flag(&a, "Werror"), &arena, &pp,
                          &d);
    if (rc == EXIT_OK && cli->json)
        cli_json_print(stdout, cli_json_obj("file", cli_json_str(a.pos[0]), "valid", json_true(), NULL));
    else if (rc == EXIT_OK && cli->verbosity > 0)
        fprintf(stderr, "%s: ok\n", a.pos[0]);
    arena_free(&arena);
    diag_free(&d);
out:
    args_free(&a);
    return rc;
}

const Command cmd_check = {"check", "parse and type-check a MIL program", check_run, check_help, false, false};

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
          "byte-for-byte stable: formatting it again changes nothing.\n\noptions:\n",
          f);
    print_options(f, fmt_opts);
}

static int fmt_run(Cli *cli, int argc, char **argv) {
    Args a;
    if (!args_parse("fmt", fmt_opts, argc - 1, argv + 1, false, &a)) return EXIT_USAGE;
    int rc = EXIT_USAGE;
    if (a.npos != 1) {
        cli_usage_error("fmt", "expected one FILE.mil, package or folder");
        goto out;
    }
    Arena arena;
    arena_init(&arena);
    DiagSink d;
    diag_init(&d);
    PkgProgram pp;
    rc = cli_load_program(cli, a.pos[0], args_get(&a, "model-path"), MIL_TARGET_CPU, false, &arena, &pp, &d);
    if (rc == EXIT_OK && args_flag(&a, "check") && pp.kind != PKG_KIND_MIL) {
        cli_usage_error("fmt", "--check compares a model.mil file with its canonical form; '%s' is a package or folder",
                        a.pos[0]);
        rc = EXIT_USAGE;
    }
    if (rc == EXIT_OK) {
        IrProgram *p = pp.prog;
        size_t len;
        char *text = mil_print(p, &len);
        const char *o = args_get(&a, "output");
        if (!text) {
            cli_error("out of memory");
            rc = EXIT_SYSTEM;
        } else if (args_flag(&a, "check")) {
            size_t olen;
            char *orig = cli_read_file(a.pos[0], &olen);
            if (!orig)
                rc = EXIT_SYSTEM;
            else if (olen != len || memcmp(orig, text, len) != 0) {
                fprintf(stderr, "%s: not in canonical form\n", a.pos[0]);
                rc = EXIT_INPUT;
            }
            free(orig);
        } else if (o)
            rc = cli_write_file(o, text, len) == 0 ? EXIT_OK : EXIT_SYSTEM;
        else
            fwrite(text, 1, len, stdout);
        free(text);
    }
    arena_free(&arena);
    diag_free(&d);
out:
    args_free(&a);
    return rc;
}

const Command cmd_fmt = {"fmt", "print a MIL program in canonical form", fmt_run, fmt_help, false, false};
