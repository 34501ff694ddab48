/* cmd_run.c — `milc run`: execute an artifact (a .milc file or a cache key)
 * on .npy inputs and write .npy outputs. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "genopts.h"
#include "milc/jobs.h"
#include "milc/model.h"
#include "milc/npy.h"
#include "run_npy.h"
#include "milc/drift.h"
#include "tier.h"
#include "milc/pipeline.h"
#include "program.h"

static const OptSpec run_opts[] = {
    GEN_COMMON_OPTS,
    {"mode", 0, OPT_VALUE, "N", "with build options: " RT_MODES_HELP},
    {"model-path", 0, OPT_VALUE, "DIR", "with a model.mil file: the directory @model_path stands for"},
    {"function", 0, OPT_VALUE, "NAME", "with a program: the function to run (default: main, or its only function)"},
    {"shape", 0, OPT_VALUE, "NAME=D0,D1,..",
     "with a program: the size of input NAME's flexible dimensions (default: its --input file's)"},
    {"input", 'i', OPT_VALUE, "NAME=FILE.npy", "bind an input (repeat for each)"},
    {"state", 0, OPT_VALUE, "NAME=FILE.npy", "seed a state (repeat for each; the others start at zero)"},
    {"output", 'o', OPT_VALUE, "DIR", "write each output as DIR/NAME.npy (default .)"},
    {"threads", 'j', OPT_VALUE, "N", "worker threads (default: all CPUs)"},
    {"repeat", 0, OPT_VALUE, "N", "run N times and report the fastest"},
    VERIFY_OPTS,
    {0},
};

static void run_help(FILE *f) {
    fputs("usage: milc run (ARTIFACT.milc | KEY | FILE.mil | PKG.mlpackage | DIR | build options) --input "
          "NAME=FILE.npy ...\n"
          "                [--state NAME=FILE.npy ...] [-o DIR]\n"
          "\n"
          "Load a compiled artifact - a file from 'milc compile', a cache entry by its\n"
          "key (see 'milc cache ls'), or the chunk that 'milc build' with the same\n"
          "options makes (built now if not cached), or a MIL program (model.mil, a\n"
          "folder holding one, a .mlpackage) compiled through the cache under the\n"
          "same key whatever its container - validate it, bind every input from an .npy\n"
          "file (fp16 inputs also take fp32 files), run it, and write each output as\n"
          "DIR/NAME.npy under its MIL name.  Outputs of one run are inputs of the\n"
          "next, so prefill and decode steps chain through files.  A program with\n"
          "states (state<tensor<...>> inputs: a KV cache the model keeps) starts\n"
          "from the --state seeds (same dtype and shape; fp16 states also take fp32\n"
          "files), zero otherwise, and each state's value after the run is written\n"
          "as DIR/NAME.npy too: the next run's seed.\n\noptions:\n",
          f);
    print_options(f, run_opts);
}

static bool is_key(const char *s) {
    if (strlen(s) != 32) return false;
    for (; *s; s++)
        if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f') || (*s >= 'A' && *s <= 'F'))) return false;
    return true;
}

/* Build options instead of an artifact: build (or find) the chunk, then
 * load it from the cache. */
static int run_build(Cli *cli, const Args *a, Store **c, LoadedModel *lm, int threads) {
    long mode = RT_MODE_DEFAULT;
    if (args_get(a, "mode") && !args_int("run", "mode", args_get(a, "mode"), 0, RT_NMODES - 1, &mode))
        return EXIT_USAGE;
    for (int i = 0; i < a->nextra; i++)
        if (strchr(a->extra[i].value, ',')) {
            cli_usage_error("run", "--%s: one value, not a list", a->extra[i].name);
            return EXIT_USAGE;
        }
    Store *remote;
    int trc = tier_open(cli, "run", true, &remote);
    if (trc != EXIT_OK) return trc;
    TemplatePath tp;
    if (tpath_init(&tp, cli->template_dirs) != 0) {
        cli_error("out of memory");
        tier_close(remote);
        return EXIT_SYSTEM;
    }
    DiagSink d;
    diag_init(&d);
    int rc = EXIT_SYSTEM;
    GenConfig *cfg = cli_gen_config(&tp.sp, a, &d);
    char err[512] = "";
    int r;
    if (!cfg)
        rc = EXIT_INPUT;
    else if ((r = store_lmdb_open(c, cli->cache_dir, NULL, err, sizeof err)) != 0)
        cli_cache_error(r, err);
    else {
        StoreEntry *hit = NULL;
        BuildResult res;
        rc = pipeline_build(*c,
                            &(BuildRequest){.config = cfg,
                                            .weights = args_get(a, "weights"),
                                            .mode = (int)mode,
                                            .tmp_root = cli->cache_dir,
                                            .verify_hits = verify_policy(a),
                                            .hit_out = &hit,
                                            .max_memory = cli->max_memory,
                                            .remote = remote},
                            &res, &d);
        if (rc == EXIT_OK) {
            char key[33];
            cache_key_hex(&res.key, key);
            if (cli->verbosity > 0) fprintf(stderr, "%s %s\n", key, res.outcome == BUILD_MISS ? "built" : "cached");
            long long t0 = cli_now_ns();
            rc = model_load_hit(
                lm, *c, hit, &(ModelLoad){.nthreads = threads, .describe = true, .max_memory = cli->max_memory}, key);
            if (rc == EXIT_OK) cache_record_load(store_lmdb_cache(*c), &res.key, (uint64_t)(cli_now_ns() - t0));
        }
    }
    int drc = cli_report(cli, &d);
    if (rc == EXIT_OK) rc = drc;
    gen_config_free(cfg);
    diag_free(&d);
    tpath_free(&tp);
    tier_close(remote);
    return rc;
}

/* The shapes of the --input files, for the program's flexible inputs (a
 * file that does not open is left to the binding to report). */
static MilInputShape *input_shapes(const Args *a, int *n) {
    MilInputShape *s = calloc((size_t)a->nhits + 1, sizeof *s);
    *n = 0;
    for (int i = 0; s && i < a->nhits; i++) {
        const char *v = a->hits[i].value, *eq = strchr(v, '=');
        if (strcmp(a->hits[i].spec->name, "input") != 0 || !eq || eq == v) continue;
        NpyFile nf;
        char err[256];
        if (npy_open(&nf, eq + 1, err, sizeof err) != 0) continue;
        MilInputShape *x = &s[*n];
        x->rank = nf.arr.rank;
        memcpy(x->dims, nf.arr.dims, sizeof(int64_t) * (size_t)nf.arr.rank);
        npy_close(&nf);
        if ((x->name = strndup(v, (size_t)(eq - v)))) (*n)++;
    }
    return s;
}

/* A program from a file: check it, then compile it through the cache (or
 * find it there) and load the entry. */
static int run_program(Cli *cli, const Args *a, Store **c, LoadedModel *lm, int threads) {
    long mode = RT_MODE_DEFAULT;
    if (args_get(a, "mode") && !args_int("run", "mode", args_get(a, "mode"), 0, RT_NMODES - 1, &mode))
        return EXIT_USAGE;
    MilInputShape *shapes, *from_data;
    int nshapes, nfrom_data;
    if (!cli_shapes("run", a, &shapes, &nshapes)) return EXIT_USAGE;
    if (!(from_data = input_shapes(a, &nfrom_data))) {
        cli_shapes_free(shapes, nshapes);
        cli_error("out of memory");
        return EXIT_SYSTEM;
    }
    Arena arena;
    arena_init(&arena);
    DiagSink d; /* the program's locations point into it: it outlives the program */
    diag_init(&d);
    PkgProgram pp;
    ProgramLoadOptions lo = {.model_path = args_get(a, "model-path"),
                             .target = MIL_TARGET_CPU,
                             .function = args_get(a, "function"),
                             .shapes = shapes,
                             .nshapes = nshapes,
                             .from_data = from_data,
                             .nfrom_data = nfrom_data};
    int rc = cli_load_program_with(cli, a->pos[0], &lo, &arena, &pp, &d);
    cli_shapes_free(shapes, nshapes);
    cli_shapes_free(from_data, nfrom_data);
    char err[512] = "";
    int r;
    if (rc == EXIT_OK && (r = store_lmdb_open(c, cli->cache_dir, NULL, err, sizeof err)) != 0) {
        cli_cache_error(r, err);
        rc = EXIT_SYSTEM;
    }
    if (rc == EXIT_OK) {
        StoreEntry *hit = NULL;
        BuildResult res;
        ProgramRequest req = {.what = a->pos[0],
                              .mode = (int)mode,
                              .verify_hits = verify_policy(a),
                              .hit_out = &hit,
                              .function = args_get(a, "function")};
        rc = pipeline_program(*c, pp.prog, pp.model_dir, &req, &res, &d);
        int drc = cli_report(cli, &d);
        if (rc == EXIT_OK) rc = drc;
        if (rc == EXIT_OK) {
            char key[33];
            cache_key_hex(&res.key, key);
            if (cli->verbosity > 0) fprintf(stderr, "%s %s\n", key, res.outcome == BUILD_MISS ? "built" : "cached");
            rc = model_load_hit(
                lm, *c, hit, &(ModelLoad){.nthreads = threads, .describe = true, .max_memory = cli->max_memory}, key);
        } else if (hit)
            store_release(*c, hit);
    }
    arena_free(&arena);
    diag_free(&d);
    return rc;
}

static int run_run(Cli *cli, int argc, char **argv) {
    Args a;
    if (!args_parse("run", run_opts, argc - 1, argv + 1, true, &a)) return EXIT_USAGE;
    if (!verify_flags_ok("run", &a)) {
        args_free(&a);
        return EXIT_USAGE;
    }
    int rc = EXIT_USAGE;
    const char **inputs = calloc((size_t)a.nhits + 1, sizeof(char *)),
               **states = calloc((size_t)a.nhits + 1, sizeof(char *));
    int ninputs = 0, nstates = 0;
    for (int i = 0; inputs && states && i < a.nhits; i++) {
        if (strcmp(a.hits[i].spec->name, "input") == 0) inputs[ninputs++] = a.hits[i].value;
        if (strcmp(a.hits[i].spec->name, "state") == 0) states[nstates++] = a.hits[i].value;
    }
    if (!inputs || !states) {
        cli_error("out of memory");
        rc = EXIT_SYSTEM;
        goto out;
    }
    long threads = 0, repeat = 1;
    bool from_build = a.npos == 0 && (a.nextra || args_get(&a, "model") || args_get(&a, "template"));
    if (a.npos != 1 && !from_build) {
        cli_usage_error("run", "expected one ARTIFACT or KEY, or build options");
        goto out;
    }
    bool program = a.npos == 1 && cli_is_program(a.pos[0]);
    if (a.npos == 1 &&
        (a.nextra || args_get(&a, "model") || args_get(&a, "template") || (args_get(&a, "mode") && !program))) {
        cli_usage_error("run", "build options go without an ARTIFACT or KEY");
        goto out;
    }
    if (!program && (args_get(&a, "function") || args_get(&a, "model-path") || args_get(&a, "shape"))) {
        cli_usage_error("run", "--%s goes with a program (FILE.mil, a package or a folder)",
                        args_get(&a, "function") ? "function" : args_get(&a, "shape") ? "shape" : "model-path");
        goto out;
    }
    if (args_get(&a, "threads") && !args_int("run", "threads", args_get(&a, "threads"), 1, 256, &threads)) goto out;
    if (args_get(&a, "repeat") && !args_int("run", "repeat", args_get(&a, "repeat"), 1, 1000000, &repeat)) goto out;
    const char *outdir = args_get(&a, "output") ? args_get(&a, "output") : ".";
    if (mkdir(outdir, 0777) != 0 && errno != EEXIST) {
        cli_error("cannot create '%s': %s", outdir, strerror(errno));
        rc = EXIT_SYSTEM;
        goto out;
    }
    LoadedModel lm;
    Store *c = NULL;
    /* Described first: the inputs are checked before the arena is allocated. */
    ModelLoad how = {.nthreads = (int)threads, .describe = true, .max_memory = cli->max_memory};
    struct stat st;
    if (from_build) {
        rc = run_build(cli, &a, &c, &lm, (int)threads);
    } else if (program) {
        rc = run_program(cli, &a, &c, &lm, (int)threads);
    } else if (is_key(a.pos[0]) && stat(a.pos[0], &st) != 0) {
        CacheKey k;
        cache_key_parse(a.pos[0], &k);
        char err[512] = "";
        int r = store_lmdb_open(&c, cli->cache_dir, NULL, err, sizeof err);
        if (r != 0) {
            cli_cache_error(r, err);
            rc = EXIT_SYSTEM;
            goto out;
        }
        StoreEntry *hit;
        /* A key typed by the user has no key record to compare: the
         * checksum is all that vouches for the bytes. */
        r = store_get(c, &k, NULL, 0, verify_store_flags(verify_policy(&a)) | STORE_GET_POPULATE, &hit);
        if (r != 0) {
            cli_error("cache entry %s: %s", a.pos[0], r == CACHE_ENOTFOUND ? "no such entry" : cache_strerror(r));
            store_close(c);
            rc = r == CACHE_ENOTFOUND || r == CACHE_ECORRUPT ? EXIT_INPUT : EXIT_SYSTEM;
            goto out;
        }
        char why[512];
        if (drift_why(hit->record, hit->record_len, why, sizeof why)) { /* never served: rebuild it */
            cli_error("cache entry %s was made by another milc (%s): 'milc prewarm --stale' rebuilds it", a.pos[0],
                      why);
            store_release(c, hit);
            store_close(c);
            rc = EXIT_INPUT;
            goto out;
        }
        long long t0 = cli_now_ns();
        rc = model_load_hit(&lm, c, hit, &how, a.pos[0]);
        if (rc == EXIT_OK)
            cache_record_load(store_lmdb_cache(c), &k, (uint64_t)(cli_now_ns() - t0)); /* the cost ledger */
    } else {
        rc = model_load_file(&lm, a.pos[0], &how);
    }
    if (rc == EXIT_OK) {
        rc = model_run_npy(&lm, inputs, ninputs, states, nstates, outdir, cli->json, (int)repeat, cli->verbosity < 0);
        model_free(&lm);
    }
    if (c) store_close(c);
out:
    free(inputs);
    free(states);
    args_free(&a);
    return rc;
}

const Command cmd_run = {"run", "run an artifact on .npy inputs", run_run, run_help, false, true};
