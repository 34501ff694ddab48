/* cmd_estimate.c — `milc estimate`: project a model's chunking onto the ANE
 * per compile mode and chunk depth from a chip's published parameters
 * (data/ane/NAME.json).  Compiles one decode layer in a scratch directory to
 * count its ops and weights; measures nothing: every figure is an ESTIMATE
 * (docs/ANE-ESTIMATE.md). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "json.h"

static const OptSpec est_opts[] = {
    GEN_COMMON_OPTS,
    {"modes", 0, OPT_VALUE, "N[,N]", "compile modes (default: every mode)"},
    {"depths", 0, OPT_VALUE, "LIST", "layers per chunk (default: every divisor of the model's layers)"},
    {"chip", 0, OPT_VALUE, "NAME|FILE", "chip parameters: data/ane/NAME.json or a file (default m4-max)"},
    {"prompt", 0, OPT_VALUE, "N", "prefill tokens, one forward (default 128)"},
    {"ctx", 0, OPT_VALUE, "N", "positions decode attends to (default 1024)"},
    {"help", 'h', OPT_FLAG, NULL, "this help, with the template's parameters"},
    {0},
};

static void est_usage(FILE *f) {
    fputs("usage: milc estimate [--model PRESET | --template NAME] [--chip NAME|FILE] [--modes 0,1,2]\n"
          "                     [--depths LIST] [--prompt N] [--ctx N] [--PARAM VALUE ...]\n"
          "\n"
          "ESTIMATE what a chunking costs on the Apple Neural Engine, from published figures:\n"
          "per compile mode and chunk depth, decode ms/token, cached prefill tok/s, compile\n"
          "time and first-call prefill tok/s, through the direct client and through Core ML,\n"
          "and the depth with the least time per token.  One decode layer is compiled in a\n"
          "scratch directory to count its ops and weights; nothing is measured.  The chip's\n"
          "parameters are a JSON file you can edit with your own measurements; how the\n"
          "projection works and how it compares with published whole-model figures is in\n"
          "docs/ANE-ESTIMATE.md.  --json prints JSON.\n"
          "\noptions:\n",
          f);
    print_options(f, est_opts);
}

static void est_help(FILE *f) { est_usage(f); }

static bool opt_int(const Args *a, const char *name, long lo, long hi, long *v) {
    const char *s = args_get(a, name);
    return !s || args_int("estimate", name, s, lo, hi, v);
}

/* Every divisor of layers, or the --depths list within 1..layers. */
static void pick_depths(BenchProjection *p, const long *given, int ngiven) {
    p->ndepths = 0;
    for (int d = 1; d <= p->model.layers && p->ndepths < BENCH_MAX_POINTS; d++) {
        bool want = ngiven ? false : p->model.layers % d == 0;
        for (int i = 0; i < ngiven; i++) want |= given[i] == d;
        if (want) p->depths[p->ndepths++] = d;
    }
}

static int est_params(const Args *a, BenchParams *p) {
    const char *config = args_get(a, "model") || args_get(a, "template") ? cli_config_name(a) : "gpt2";
    bool oom = bparams_init(p, config, args_get(a, "weights")) != 0;
    for (int i = 0; i < a->nextra && !oom; i++) oom |= bparams_add(p, a->extra[i].name, a->extra[i].value) != 0;
    oom = oom || bparams_add(p, "phase", "decode") != 0 || bparams_add(p, "seq", "1") != 0;
    if (oom) cli_error("out of memory");
    return oom ? EXIT_SYSTEM : EXIT_OK;
}

/* The per-layer plan, from one decode layer compiled in a scratch directory. */
static int est_model(Cli *cli, const BenchParams *p, BenchProjection *pr) {
    TemplatePath tp;
    if (tpath_init(&tp, cli->template_dirs) != 0) {
        cli_error("out of memory");
        return EXIT_SYSTEM;
    }
    const char *tmp = getenv("TMPDIR");
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/milc-estimate-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    int rc = EXIT_SYSTEM;
    if (!mkdtemp(dir))
        cli_error("cannot create a scratch directory '%s': %s", dir, strerror(errno));
    else {
        DiagSink d;
        diag_init(&d);
        rc = bench_project_model(&tp, p, dir, &pr->model, &d);
        if (rc == EXIT_INPUT) cli_report(cli, &d);
        diag_free(&d);
        cli_rm_tree(dir);
    }
    tpath_free(&tp);
    return rc;
}

static int estimate_run(Cli *cli, int argc, char **argv) {
    Args a;
    if (!args_parse("estimate", est_opts, argc - 1, argv + 1, true, &a)) {
        args_free(&a);
        return EXIT_USAGE;
    }
    if (args_flag(&a, "help")) {
        est_usage(stdout);
        cli_template_help(cli, stdout, &a);
        args_free(&a);
        return EXIT_OK;
    }
    BenchProjection *pr = calloc(1, sizeof *pr);
    BenchParams p = {0};
    long modes[BENCH_MAX_POINTS], depths[BENCH_MAX_POINTS], prompt = 128, ctx = 1024;
    int nmodes = 0, ndepths = 0, rc = EXIT_USAGE;
    if (!pr) {
        cli_error("out of memory");
        rc = EXIT_SYSTEM;
        goto out;
    }
    if (a.npos) {
        cli_usage_error("estimate", "unexpected argument '%s'", a.pos[0]);
        goto out;
    }
    if (!bench_parse_modes("estimate", &a, modes, &nmodes) ||
        (args_get(&a, "depths") && !bench_parse_list("depths", args_get(&a, "depths"), 1, 4096, depths, &ndepths)) ||
        !opt_int(&a, "prompt", 1, 65536, &prompt) || !opt_int(&a, "ctx", 1, 1 << 20, &ctx))
        goto out;
    for (int i = 0; i < nmodes; i++) pr->modes[i] = (int)modes[i];
    pr->nmodes = nmodes;
    pr->prompt = (int)prompt, pr->ctx = (int)ctx;
    char buf[4096];
    snprintf(pr->chip_path, sizeof pr->chip_path, "%s", bench_chip_path(args_get(&a, "chip"), buf, sizeof buf));
    if ((rc = bench_chip_load(pr->chip_path, &pr->chip)) != EXIT_OK) goto out;
    if ((rc = est_params(&a, &p)) != EXIT_OK || (rc = est_model(cli, &p, pr)) != EXIT_OK) goto out;
    pick_depths(pr, depths, ndepths);
    bench_project_run(pr);
    if (cli->json) {
        if (cli_json_print(stdout, bench_project_json(pr)) != 0) rc = EXIT_SYSTEM;
    } else if (cli->verbosity >= 0)
        bench_project_table(stdout, pr);
out:
    bparams_free(&p);
    free(pr);
    args_free(&a);
    return rc;
}

const Command cmd_estimate = {
    "estimate", "ESTIMATE a chunking's cost on the ANE from published figures", estimate_run, est_help, true, false};
