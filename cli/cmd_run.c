/* cmd_run.c — `milc run`: execute an artifact (a .milc file or a cache key)
 * on .npy inputs and write .npy outputs. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "model.h"

static const OptSpec run_opts[] = {
    {"input", 'i', OPT_VALUE, "NAME=FILE.npy", "bind an input (repeat for each)"},
    {"output", 'o', OPT_VALUE, "DIR", "write each output as DIR/NAME.npy (default .)"},
    {"threads", 'j', OPT_VALUE, "N", "worker threads (default: all CPUs)"},
    {"repeat", 0, OPT_VALUE, "N", "run N times and report the fastest"},
    {0},
};

static void run_help(FILE *f) {
    fputs("usage: milc run (ARTIFACT.milc | KEY) --input NAME=FILE.npy ... [-o DIR]\n"
          "\n"
          "Load a compiled artifact - a file from 'milc compile', or a cache entry by\n"
          "its key (see 'milc cache ls') - validate it, bind every input from an .npy\n"
          "file (fp16 inputs also take fp32 files), run it, and write each output as\n"
          "DIR/NAME.npy under its MIL name.  Outputs of one run are inputs of the\n"
          "next, so prefill and decode steps chain through files.\n\noptions:\n", f);
    print_options(f, run_opts);
}

static bool is_key(const char *s) {
    if (strlen(s) != 32) return false;
    for (; *s; s++)
        if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f') || (*s >= 'A' && *s <= 'F'))) return false;
    return true;
}

static int run_run(Cli *cli, int argc, char **argv) {
    Args a;
    if (!args_parse("run", run_opts, argc - 1, argv + 1, false, &a)) return EXIT_USAGE;
    int rc = EXIT_USAGE;
    const char **inputs = calloc((size_t)a.nhits + 1, sizeof(char *));
    int ninputs = 0;
    for (int i = 0; i < a.nhits; i++)
        if (strcmp(a.hits[i].spec->name, "input") == 0) inputs[ninputs++] = a.hits[i].value;
    long threads = 0, repeat = 1;
    if (a.npos != 1) { cli_usage_error("run", "expected one ARTIFACT or KEY"); goto out; }
    if (args_get(&a, "threads") && !args_int("run", "threads", args_get(&a, "threads"), 1, 256, &threads)) goto out;
    if (args_get(&a, "repeat") && !args_int("run", "repeat", args_get(&a, "repeat"), 1, 1000000, &repeat)) goto out;
    const char *outdir = args_get(&a, "output") ? args_get(&a, "output") : ".";
    if (mkdir(outdir, 0777) != 0 && errno != EEXIST) {
        cli_error("cannot create '%s': %s", outdir, strerror(errno));
        rc = EXIT_SYSTEM;
        goto out;
    }
    LoadedModel lm;
    Cache *c = NULL;
    struct stat st;
    if (is_key(a.pos[0]) && stat(a.pos[0], &st) != 0) {
        CacheKey k;
        cache_key_parse(a.pos[0], &k);
        char err[512] = "";
        int r = cache_open(&c, cli->cache_dir, NULL, err, sizeof err);
        if (r != 0) { cli_error("%s", err[0] ? err : cache_strerror(r)); rc = EXIT_SYSTEM; goto out; }
        CacheHit *hit;
        /* A key typed by the user has no key record to compare, so verify
         * the bytes' checksum instead. */
        r = cache_get(c, &k, NULL, 0, CACHE_GET_VERIFY, &hit);
        if (r != 0) {
            cli_error("cache entry %s: %s", a.pos[0], r == CACHE_ENOTFOUND ? "no such entry" : cache_strerror(r));
            cache_close(c);
            rc = r == CACHE_ENOTFOUND || r == CACHE_ECORRUPT ? EXIT_INPUT : EXIT_SYSTEM;
            goto out;
        }
        rc = model_load_hit(&lm, hit, (int)threads, 0, a.pos[0]);
    } else {
        rc = model_load_file(&lm, a.pos[0], (int)threads);
    }
    if (rc == EXIT_OK) {
        rc = model_run_npy(&lm, inputs, ninputs, outdir, cli->json, (int)repeat, cli->verbosity < 0);
        model_free(&lm);
    }
    if (c) cache_close(c);
out:
    free(inputs);
    args_free(&a);
    return rc;
}

const Command cmd_run = {"run", "run an artifact on .npy inputs", run_run, run_help, false};
