/* bench_chain.c — what `milc bench` measures with: a program family's
 * parameters, the build request of a whole model's chunks (the chain itself
 * is the library's, milc/chain.h), and the fresh-process child that times a
 * first prefill. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "json.h"
#include "milc/request.h"
#include "milc/half.h"

/* ---- parameters ---------------------------------------------------------- */

int bparams_init(BenchParams *p, const char *config, const char *weights) {
    memset(p, 0, sizeof *p);
    p->config = strdup(config);
    p->weights = weights ? strdup(weights) : NULL;
    return p->config && (!weights || p->weights) ? 0 : -1;
}

int bparams_add(BenchParams *p, const char *name, const char *value) {
    if (p->n == p->cap) {
        int cap = p->cap ? p->cap * 2 : 16;
        MilcParam *v = realloc(p->v, sizeof *v * (size_t)cap);
        if (!v) return -1;
        p->v = v;
        p->cap = cap;
    }
    char *n = strdup(name), *val = strdup(value);
    if (!n || !val) {
        free(n);
        free(val);
        return -1;
    }
    p->v[p->n++] = (MilcParam){n, val};
    return 0;
}

int bparams_copy(BenchParams *dst, const BenchParams *src) {
    if (bparams_init(dst, src->config, src->weights) != 0) {
        bparams_free(dst);
        return -1;
    }
    for (int i = 0; i < src->n; i++)
        if (bparams_add(dst, src->v[i].name, src->v[i].value) != 0) {
            bparams_free(dst);
            return -1;
        }
    return 0;
}

void bparams_free(BenchParams *p) {
    for (int i = 0; i < p->n; i++) {
        free((char *)p->v[i].name);
        free((char *)p->v[i].value);
    }
    free(p->v);
    free(p->config);
    free(p->weights);
    memset(p, 0, sizeof *p);
}

/* ---- building ------------------------------------------------------------ */

int bench_build(Cache *c, const TemplatePath *tp, const BenchParams *p, int mode, long chunk, int verify_hits,
                const char *tmp_root, ChainBuilt *out, DiagSink *d) {
    char modes[2] = {(char)('0' + mode), 0};
    JobSpec spec = {
        .config = p->config, .weights = p->weights, .modes = modes, .chunk = chunk, .extra = p->v, .nextra = p->n};
    Store *s = store_lmdb_wrap(c);
    if (!s) {
        memset(out, 0, sizeof *out);
        cli_error("out of memory");
        return EXIT_SYSTEM;
    }
    /* Each program made and stored in turn: the cold path's parts (BENCH.md)
     * then add up to compile_ms, which overlapping them would not. */
    int rc = chain_build(s, tp, &spec,
                         &(RequestOptions){.verify_hits = verify_hits, .tmp_root = tmp_root, .overlap = 1}, out, d);
    store_close(s);
    return rc;
}

/* ---- the fresh-process child --------------------------------------------- */

static const OptSpec child_opts[] = {
    GEN_COMMON_OPTS,
    {"child", 0, OPT_VALUE, "WHAT", "ttft"},
    {"t0", 0, OPT_VALUE, "NS", "CLOCK_MONOTONIC of the parent just before it spawned this process"},
    {"mode", 0, OPT_VALUE, "N", "compile mode"},
    {"chunk", 0, OPT_VALUE, "K", "layers per chunk"},
    {"threads", 0, OPT_VALUE, "N", "runtime threads"},
    VERIFY_OPTS,
    {0},
};

/* The peak resident set of this process's own address space (VmHWM), in
 * bytes; 0 if unknown.  Not getrusage's ru_maxrss: on Linux that also counts
 * the address space a spawned child shared with its parent until exec, so a
 * child of a big parent would report the parent's peak. */
static double peak_rss_bytes(void) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return 0;
    char line[256];
    double kb = 0;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "VmHWM:", 6) == 0) kb = strtod(line + 6, NULL);
    fclose(f);
    return kb * 1024.0;
}

/* Everything a user's first prefill pays in a new process: open the cache,
 * find (or compile and store) every chunk, load them, run the prefill once.
 * The clock starts at the parent's spawn, so process start-up counts too. */
int bench_child(Cli *cli, int argc, char **argv) {
    long long t_entry = cli_now_ns();
    Args a;
    if (!args_parse("bench --child", child_opts, argc - 1, argv + 1, true, &a)) {
        args_free(&a);
        return EXIT_USAGE;
    }
    if (!verify_flags_ok("bench", &a)) {
        args_free(&a);
        return EXIT_USAGE;
    }
    int rc = EXIT_USAGE;
    long mode = RT_MODE_DEFAULT, chunk = 0, threads = 0;
    const char *t0s = args_get(&a, "t0");
    long long t0 = t0s ? strtoll(t0s, NULL, 10) : t_entry;
    if (!args_get(&a, "child") || strcmp(args_get(&a, "child"), "ttft") != 0) {
        cli_usage_error("bench", "--child: only 'ttft' exists");
        goto out_args;
    }
    if ((args_get(&a, "mode") && !args_int("bench", "mode", args_get(&a, "mode"), 0, RT_NMODES - 1, &mode)) ||
        (args_get(&a, "chunk") && !args_int("bench", "chunk", args_get(&a, "chunk"), 1, 4096, &chunk)) ||
        (args_get(&a, "threads") && !args_int("bench", "threads", args_get(&a, "threads"), 0, 256, &threads)))
        goto out_args;
    BenchParams p;
    if (bparams_init(&p, cli_config_name(&a), args_get(&a, "weights")) != 0) {
        rc = EXIT_SYSTEM;
        goto out_args;
    }
    for (int i = 0; i < a.nextra; i++)
        if (bparams_add(&p, a.extra[i].name, a.extra[i].value) != 0) {
            rc = EXIT_SYSTEM;
            goto out_p;
        }

    TemplatePath tp;
    if (tpath_init(&tp, cli->template_dirs) != 0) {
        cli_error("out of memory");
        rc = EXIT_SYSTEM;
        goto out_p;
    }
    DiagSink d;
    diag_init(&d);
    Cache *c = NULL;
    ChainBuilt b = {0};
    Chain ch = {0};
    char err[512] = "";
    long long t1 = cli_now_ns();
    int r = cache_open(&c, cli->cache_dir, NULL, err, sizeof err);
    if (r != 0) {
        cli_cache_error(r, err);
        rc = EXIT_SYSTEM;
        goto out;
    }
    double open_ms = (double)(cli_now_ns() - t1) / 1e6;
    t1 = cli_now_ns();
    rc = bench_build(c, &tp, &p, (int)mode, chunk, verify_policy(&a), cli->cache_dir, &b, &d);
    if (rc != EXIT_OK) {
        if (rc == EXIT_INPUT) cli_report(cli, &d);
        goto out;
    }
    double build_ms = (double)(cli_now_ns() - t1) / 1e6; /* with the templates read and resolved */
    t1 = cli_now_ns();
    if ((rc = chain_load(&ch, c, &b, (int)threads, 0)) != EXIT_OK) goto out;
    double load_ms = (double)(cli_now_ns() - t1) / 1e6;
    double run_ms;
    uint64_t nd;
    if ((rc = chain_run(&ch, &run_ms, &nd)) != EXIT_OK) goto out;
    long long t_done = cli_now_ns();
    /* A ttft is only meaningful if the result is a number. */
    const RtTensor *last = chain_output(&ch, "y");
    if (!last && ch.n && ch.nout[ch.n - 1]) last = &ch.out[ch.n - 1][0];
    bool finite = chain_tensor_finite(last);
    cli_json_print(stdout,
                   cli_json_obj("ttft_ms", cli_json_real((double)(t_done - t0) / 1e6, 4), "start_ms",
                                cli_json_real((double)(t_entry - t0) / 1e6, 4), "open_ms", cli_json_real(open_ms, 4),
                                "build_ms", cli_json_real(build_ms, 4), "misses", json_integer(b.misses), "hits",
                                json_integer(b.hits), "checksummed", json_integer(b.checksummed), "artifact_bytes",
                                json_integer((json_int_t)b.artifact_bytes), "load_ms", cli_json_real(load_ms, 4),
                                "run_ms", cli_json_real(run_ms, 4), "dispatches", json_integer((json_int_t)nd),
                                "programs", json_integer(b.n), "peak_rss_bytes", cli_json_real(peak_rss_bytes(), 0),
                                "finite", json_boolean(finite), "generate_ms", cli_json_real(b.ms_generate, 4),
                                "check_ms", cli_json_real(b.ms_check, 4), "lower_ms", cli_json_real(b.ms_lower, 4),
                                "store_ms", cli_json_real(b.ms_store, 4), NULL));
    rc = EXIT_OK;
out:
    chain_free(&ch);
    chain_built_free(&b);
    if (c) cache_close(c);
    diag_free(&d);
    tpath_free(&tp);
out_p:
    bparams_free(&p);
out_args:
    args_free(&a);
    return rc;
}
