/* bench_chain.c — what `milc bench` measures with: a program family's
 * parameters, building a whole model's chunks through the normal pipeline,
 * loading them from the cache and running them back to back as one forward
 * pass, and the fresh-process child that times a first prefill. */
#include <math.h>
#include <sys/mman.h>
#include <stdlib.h>
#include <string.h>

#include "milc/ossys.h"
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

typedef struct {
    BenchBuilt *out;
    bool oom;
} Collect;

static void collect(void *ctx, int idx, const char *label, const BuildResult *r) {
    (void)idx, (void)label;
    Collect *cl = ctx;
    BenchBuilt *b = cl->out;
    CacheKey *k = realloc(b->keys, sizeof *k * (size_t)(b->n + 1));
    if (!k) {
        cl->oom = true;
        return;
    }
    b->keys = k;
    b->keys[b->n++] = r->key;
    b->ms_total += r->ms_total;
    b->artifact_bytes += r->artifact_bytes;
    b->ms_generate += r->ms_generate, b->ms_check += r->ms_check;
    b->ms_lower += r->ms_passes + r->ms_lower, b->ms_store += r->ms_store;
    if (r->outcome == BUILD_MISS)
        b->misses++;
    else
        b->hits++, b->checksummed += r->checksummed;
}

int bench_build(Cache *c, const TemplatePath *tp, const BenchParams *p, int mode, long chunk, int verify_hits,
                const char *tmp_root, BenchBuilt *out, DiagSink *d) {
    memset(out, 0, sizeof *out);
    char modes[2] = {(char)('0' + mode), 0};
    JobSpec spec = {
        .config = p->config, .weights = p->weights, .modes = modes, .chunk = chunk, .extra = p->v, .nextra = p->n};
    Collect cl = {out, false};
    Store *s = store_lmdb_wrap(c);
    if (!s) {
        cli_error("out of memory");
        return EXIT_SYSTEM;
    }
    /* Each program made and stored in turn: the cold path's parts (BENCH.md)
     * then add up to compile_ms, which overlapping them would not. */
    int rc =
        build_request(s, tp, &spec, &(RequestOptions){.verify_hits = verify_hits, .tmp_root = tmp_root, .overlap = 1},
                      collect, &cl, d);
    store_close(s);
    if (rc == EXIT_OK && cl.oom) cli_error("out of memory"), rc = EXIT_SYSTEM;
    if (rc != EXIT_OK) bench_built_free(out);
    return rc;
}

void bench_built_free(BenchBuilt *b) {
    free(b->keys);
    memset(b, 0, sizeof *b);
}

/* ---- loading and running -------------------------------------------------- */

/* Tensors come from one mapping with huge pages asked for, each faulted in
 * when handed out: a page fault per 4 KB of them otherwise lands in the
 * first prefill (~1,300 for GPT-2's k/v outputs), or in load as many faults
 * as pages.  The reservation is address space only (MAP_NORESERVE). */
enum { CHAIN_MEM = 1u << 30 };
static void *chain_alloc(BenchChain *ch, size_t size) {
    if (!ch->mem) {
        void *m = mmap(NULL, CHAIN_MEM, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (m == MAP_FAILED) return NULL;
        os_huge_hint(m, CHAIN_MEM);
        ch->mem = m, ch->mem_len = CHAIN_MEM, ch->mem_used = 0;
    }
    size_t at = (ch->mem_used + 63) & ~(size_t)63, n = size ? size : 1;
    if (n > ch->mem_len - at) return NULL;
    ch->mem_used = at + n;
    unsigned char *p = ch->mem + at;
    if (madvise(p - ((uintptr_t)p & 4095), n + ((uintptr_t)p & 4095), MADV_POPULATE_WRITE) != 0)
        for (size_t i = 0; i < n; i += 4096) ((volatile unsigned char *)p)[i] = 0;
    return p;
}

/* Inputs get fixed, moderate values: random hidden states keep LayerNorm and
 * softmax on their ordinary paths (no NaN or denormal slow paths), and the
 * same values every run keep the timings comparable. */
static void fill_input(RtTensor *t, const char *name, uint64_t seed) {
    size_t n = t->size / rt_dtype_size(t->dtype);
    if (strcmp(name, "mask") == 0 || t->dtype == RT_I32 || t->dtype == RT_BOOL) return; /* zeros */
    uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17; /* xorshift64 */
        float v = ((float)(s >> 40) / (float)(1u << 24) - 0.5f);
        if (t->dtype == RT_F16)
            ((uint16_t *)t->data)[i] = float_to_half(v);
        else
            ((float *)t->data)[i] = v;
    }
}

static int io_find(const RtModel *m, bool input, const char *name) {
    int n = input ? rt_model_ninputs(m) : rt_model_noutputs(m);
    for (int i = 0; i < n; i++) {
        RtIoInfo io;
        if ((input ? rt_model_input(m, i, &io) : rt_model_output(m, i, &io)) == 0 && strcmp(io.name, name) == 0)
            return i;
    }
    return -1;
}

static int tensor_for(BenchChain *ch, const RtIoInfo *io, RtTensor *t) {
    *t = (RtTensor){.dtype = io->dtype, .rank = io->rank};
    memcpy(t->dims, io->dims, sizeof t->dims);
    size_t n = rt_dtype_size(io->dtype);
    for (int d = 0; d < io->rank; d++) n *= (size_t)io->dims[d];
    t->size = n;
    t->data = chain_alloc(ch, n);
    return t->data ? 0 : -1;
}

static bool same_shape(const RtTensor *a, const RtTensor *b) {
    return a->dtype == b->dtype && a->rank == b->rank &&
           memcmp(a->dims, b->dims, sizeof(int64_t) * (size_t)a->rank) == 0;
}

/* The chain's arrays for n programs and its thread pool.  EXIT_OK or EXIT_*
 * with a message printed (ch freed). */
static int chain_start(BenchChain *ch, int n, int nthreads) {
    memset(ch, 0, sizeof *ch);
    ch->lm = calloc((size_t)n + 1, sizeof *ch->lm);
    ch->in = calloc((size_t)n + 1, sizeof *ch->in);
    ch->out = calloc((size_t)n + 1, sizeof *ch->out);
    ch->nin = calloc((size_t)n + 1, sizeof *ch->nin);
    ch->nout = calloc((size_t)n + 1, sizeof *ch->nout);
    if (!ch->lm || !ch->in || !ch->out || !ch->nin || !ch->nout) {
        bench_chain_free(ch);
        cli_error("out of memory");
        return EXIT_SYSTEM;
    }
    int pr = rt_pool_new(&ch->pool, nthreads);
    if (pr != RT_OK) {
        cli_error("cannot start the runtime's threads: %s", rt_strerror(pr));
        bench_chain_free(ch);
        return EXIT_SYSTEM;
    }
    return EXIT_OK;
}

/* Tensors for program i, whose model is loaded: outputs, then inputs, the
 * hidden state x reading what program i-1 wrote to y.  0 or -1 (ENOMEM). */
static int chain_bind(BenchChain *ch, int i) {
    RtModel *m = ch->lm[i].model;
    ch->nin[i] = rt_model_ninputs(m);
    ch->nout[i] = rt_model_noutputs(m);
    ch->in[i] = calloc((size_t)ch->nin[i] + 1, sizeof(RtTensor));
    ch->out[i] = calloc((size_t)ch->nout[i] + 1, sizeof(RtTensor));
    if (!ch->in[i] || !ch->out[i]) return -1;
    for (int k = 0; k < ch->nout[i]; k++) {
        RtIoInfo io;
        rt_model_output(m, k, &io);
        if (tensor_for(ch, &io, &ch->out[i][k]) != 0) return -1;
    }
    int px = i > 0 ? io_find(ch->lm[i - 1].model, false, "y") : -1;
    for (int k = 0; k < ch->nin[i]; k++) {
        RtIoInfo io;
        rt_model_input(m, k, &io);
        RtTensor t;
        if (tensor_for(ch, &io, &t) != 0) return -1;
        fill_input(&t, io.name, (uint64_t)(i * 131 + k + 1));
        /* Chain the hidden states: this chunk reads what the last wrote. */
        if (px >= 0 && strcmp(io.name, "x") == 0 && same_shape(&t, &ch->out[i - 1][px]))
            t.data = ch->out[i - 1][px].data;
        ch->in[i][k] = t;
    }
    return 0;
}

int bench_chain_load(Cache *c, const BenchBuilt *b, int nthreads, BenchChain *ch) {
    int rc = chain_start(ch, b->n, nthreads);
    if (rc != EXIT_OK) return rc;
    if (!(ch->store = store_lmdb_wrap(c))) goto nomem;
    for (int i = 0; i < b->n; i++) {
        char hex[33];
        cache_key_hex(&b->keys[i], hex);
        StoreEntry *hit;
        /* The pipeline just found or stored this key (and checked it on a
         * hit), so the record compare and the checksum are not repeated.
         * The pages are mapped now, in one call per value: faulted in by the
         * first prefill instead they cost it ~7 ms, against ~3 ms here. */
        int r = store_get(ch->store, &b->keys[i], NULL, 0, STORE_GET_NOTOUCH | STORE_GET_POPULATE | STORE_GET_TRUSTED,
                          &hit);
        if (r != 0) {
            cli_error("cache entry %s: %s", hex, cache_strerror(r));
            bench_chain_free(ch);
            return EXIT_SYSTEM;
        }
        rc = model_load_hit(&ch->lm[i], ch->store, hit, &(ModelLoad){.nthreads = nthreads, .pool = ch->pool}, hex);
        ch->n = i + 1;
        if (rc != EXIT_OK) {
            bench_chain_free(ch);
            return rc;
        }
        if (chain_bind(ch, i) != 0) goto nomem;
    }
    return EXIT_OK;
nomem:
    bench_chain_free(ch);
    cli_error("out of memory");
    return EXIT_SYSTEM;
}

int bench_chain_adopt(RtArtifact **arts, int n, int nthreads, BenchChain *ch) {
    int rc = chain_start(ch, n, nthreads);
    if (rc != EXIT_OK) {
        for (int i = 0; i < n; i++) rt_artifact_free(arts[i]);
        free(arts);
        return rc;
    }
    ch->arts = arts, ch->narts = n;
    for (int i = 0; i < n; i++) {
        const RtSection *secs;
        int ns;
        char err[512];
        rt_artifact_sections(arts[i], &secs, &ns);
        int r = rt_model_load(&ch->lm[i].model, secs, ns, &(RtLoadOptions){.nthreads = nthreads, .pool = ch->pool}, err,
                              sizeof err);
        if (r != 0) {
            cli_error("a compiled program does not load: %s", err);
            bench_chain_free(ch);
            return EXIT_SYSTEM;
        }
        ch->n = i + 1;
        if (chain_bind(ch, i) != 0) {
            bench_chain_free(ch);
            cli_error("out of memory");
            return EXIT_SYSTEM;
        }
    }
    return EXIT_OK;
}

/* Section i's kind from the manifest's table (compiler/runtime/ARTIFACT.md:
 * 64-byte header, then 32-byte entries, kind first; entry k is section k+1).
 * A cache hit's sections carry no kind of their own; the model loaded, so
 * the table is valid. */
static uint32_t section_kind(const RtSection *secs, int i) {
    const RtSection *m = &secs[0];
    size_t at = 64 + 32 * (size_t)(i - 1);
    uint32_t kind = 0;
    if (i >= 1 && at + 4 <= m->size) memcpy(&kind, (const unsigned char *)m->data + at, 4);
    return kind;
}

double bench_chain_weight_bytes(const BenchChain *ch, BenchRange *r, int *nr, int max) {
    double sum = 0;
    int n = 0;
    for (int i = 0; i < ch->n; i++)
        for (int k = 1; k < ch->lm[i].nsecs; k++)
            if (section_kind(ch->lm[i].secs, k) == RT_SEC_WEIGHT) {
                sum += (double)ch->lm[i].secs[k].size;
                if (r && n < max) r[n++] = (BenchRange){ch->lm[i].secs[k].data, ch->lm[i].secs[k].size};
            }
    if (nr) *nr = n;
    return sum;
}

int bench_chain_run(BenchChain *ch, double *ms, uint64_t *dispatches) {
    long long t0 = cli_now_ns();
    uint64_t nd = 0, ops = 0;
    for (int i = 0; i < ch->n; i++) {
        RtRunStats st = {0};
        int r = rt_run(ch->lm[i].model, ch->in[i], ch->nin[i], ch->out[i], ch->nout[i], ch->run_flags, &st);
        if (r != 0) {
            cli_error("run failed: %s", rt_strerror(r));
            return EXIT_SYSTEM;
        }
        nd += st.dispatches;
        ops += st.ops;
    }
    ch->last_ops = ops;
    *ms = (double)(cli_now_ns() - t0) / 1e6;
    if (dispatches) *dispatches = nd;
    return EXIT_OK;
}

void bench_chain_free(BenchChain *ch) {
    for (int i = 0; i < ch->n; i++) model_free(&ch->lm[i]);
    store_close(ch->store); /* after the entries the models held */
    rt_pool_free(ch->pool);
    for (int i = 0; ch->in && ch->out && i < ch->n; i++) {
        free(ch->in[i]);
        free(ch->out[i]);
    }
    if (ch->mem) munmap(ch->mem, ch->mem_len);
    for (int i = 0; i < ch->narts; i++) rt_artifact_free(ch->arts[i]); /* after the models that ran on them */
    free(ch->arts);
    free(ch->lm);
    free(ch->in);
    free(ch->out);
    free(ch->nin);
    free(ch->nout);
    memset(ch, 0, sizeof *ch);
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
    BenchBuilt b = {0};
    BenchChain ch = {0};
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
    if ((rc = bench_chain_load(c, &b, (int)threads, &ch)) != EXIT_OK) goto out;
    double load_ms = (double)(cli_now_ns() - t1) / 1e6;
    double run_ms;
    uint64_t nd;
    if ((rc = bench_chain_run(&ch, &run_ms, &nd)) != EXIT_OK) goto out;
    long long t_done = cli_now_ns();
    /* A ttft is only meaningful if the result is a number. */
    int yi = ch.n ? io_find(ch.lm[ch.n - 1].model, false, "y") : -1;
    const RtTensor *last = ch.n && ch.nout[ch.n - 1] ? &ch.out[ch.n - 1][yi >= 0 ? yi : 0] : NULL;
    bool finite = true;
    for (size_t i = 0; last && last->dtype == RT_F16 && i < last->size / 2; i++)
        finite &= isfinite(half_to_float(((const uint16_t *)last->data)[i])) != 0;
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
    bench_chain_free(&ch);
    bench_built_free(&b);
    if (c) cache_close(c);
    diag_free(&d);
    tpath_free(&tp);
out_p:
    bparams_free(&p);
out_args:
    args_free(&a);
    return rc;
}
