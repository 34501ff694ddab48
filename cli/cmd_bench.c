/* cmd_bench.c — `milc bench`: cold vs cached first prefill, steady prefill
 * and decode, mode against mode, the per-dispatch overhead measured directly,
 * and sweeps of chunk depth and tokens per dispatch with fits that say what
 * their intercept is (or why it is no cost).  Fresh-process figures come from
 * re-executing this binary (`bench --child ttft`, bench_chain.c) and timing
 * it from the spawn; cold ones in a new, empty cache directory each time. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "scratch.h"
#include "milc/ossys.h"
#include "bench.h"
#include "milc/jobs.h"

extern char **environ;

static const OptSpec bench_opts[] = {
    GEN_COMMON_OPTS,
    {"modes", 0, OPT_VALUE, "N[,N]", "compile modes to compare (default: every mode)"},
    {"chunk", 0, OPT_VALUE, "K", "layers per chunk of the headline figures (default 4)"},
    {"ctx", 0, OPT_VALUE, "N", "KV-cache positions for decode (default 1024)"},
    {"repeat", 0, OPT_VALUE, "N", "runs per figure, median reported (default 5)"},
    {"cold-repeat", 0, OPT_VALUE, "N", "cold runs (compile everything) per mode (default 3, or --repeat if smaller)"},
    {"depths", 0, OPT_VALUE, "LIST", "depth sweep, layers per chunk (default 1,2,4,6,12)"},
    {"depth-seq", 0, OPT_VALUE, "T", "tokens per dispatch in the depth sweep (default 1)"},
    {"seqs", 0, OPT_VALUE, "LIST", "token sweep, tokens per dispatch (default 1,8,16,32,64,128)"},
    {"no-sweeps", 0, OPT_FLAG, NULL, "skip the sweeps"},
    {"whole", 0, OPT_FLAG, NULL,
     "also the whole model (embedding, chunks, head): first call empty and cached, steady prefill, decode"},
    VERIFY_OPTS,
    {"threads", 'j', OPT_VALUE, "N", "runtime threads (default: all CPUs)"},
    {"json", 0, OPT_VALUE, "FILE", "also write the results as JSON (--json alone: JSON on stdout)"},
    {"csv", 0, OPT_VALUE, "FILE", "also write the results as CSV"},
    {"quick", 0, OPT_FLAG, NULL, "tiny preset, short sweeps, one run each (a smoke test)"},
    {"project", 0, OPT_VALUE, "ane", "also ESTIMATE the run's chunkings on the ANE (docs/ANE-ESTIMATE.md)"},
    {"chip", 0, OPT_VALUE, "NAME|FILE", "chip parameters of --project: data/ane/NAME.json or a file (default m4-max)"},
    {"help", 'h', OPT_FLAG, NULL, "this help, with the template's parameters"},
    {0},
};

static void bench_usage(FILE *f) {
    fputs("usage: milc bench [--model PRESET | --template NAME] [--modes 0,1,2] [--chunk K]\n"
          "                  [--seqs LIST] [--depths LIST] [--json [FILE]] [--csv FILE] [--project ane]\n"
          "                  [--PARAM VALUE ...]\n"
          "\n"
          "Measure, per compile mode, a whole model cut into chunks: compile time, artifact\n"
          "size, first prefill in a fresh process with an empty cache (ttft cold) and with\n"
          "a warm one (ttft cached), load time, steady prefill and decode speed, dispatches,\n"
          "peak RSS, and a warm `milc build`.  The per-dispatch overhead is measured\n"
          "directly: the same decode ops bonded vs one dispatch per op, in alternated pairs.\n"
          "Then sweep chunk depth and tokens per dispatch and fit time = a + b*work: a is\n"
          "time independent of the work (shown beside the time to stream the weights once),\n"
          "not a dispatch cost; a negative, poorly fitting or bending fit is flagged (a\n"
          "bend: a cache cliff, fitted with two slopes).  --project ane adds an ESTIMATE\n"
          "of the same chunkings on the ANE (docs/ANE-ESTIMATE.md).  Results on stdout,\n"
          "progress on stderr; the JSON and CSV layouts are in cli/BENCH.md.\n"
          "Defaults: GPT-2 124M (--model gpt2), chunks of 4, prefill --seq 128, decode at\n"
          "--ctx 1024, min_seq 1, io split.  Everything is built in a scratch cache under $TMPDIR\n"
          "(default /tmp), removed at the end; the user's cache is not touched.\n"
          "  milc bench                              the full run (minutes)\n"
          "  milc bench --modes 2 --no-sweeps --json out.json\n"
          "  milc bench --quick --json               seconds; a smoke test\n"
          "  milc bench --modes 2 --project ane      and an ESTIMATE of the same chunkings on the ANE\n"
          "  milc bench --modes 2 --no-sweeps --whole and the whole model, token ids to logits\n"
          "\noptions:\n",
          f);
    print_options(f, bench_opts);
}

static void bench_help(FILE *f) { bench_usage(f); }

/* ---- the run's settings ---------------------------------------------------- */

enum { MAX_LIST = BENCH_MAX_POINTS };

typedef struct Bench {
    Cli *cli;
    TemplatePath tp;
    BenchParams base;   /* the headline prefill programs */
    BenchParams decode; /* base + phase=decode, seq=1, ctx */
    char exe[4096];     /* this binary, re-executed for fresh-process runs */
    char root[4096];    /* scratch directory of every cache the run uses */
    long chunk, layers, nchunks, seq, ctx, depth_seq;
    int repeat, cold_repeat, threads;
    int verify; /* how hits are checked: BUILD_VERIFY_*, as `milc build` by default */
    long depths[MAX_LIST], seqs[MAX_LIST];
    int ndepths, nseqs;
    bool sweeps;
} Bench;

static void progress(const Bench *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void progress(const Bench *b, const char *fmt, ...) {
    if (b->cli->verbosity < 0) return;
    va_list ap;
    va_start(ap, fmt);
    fputs("bench: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

bool bench_parse_list(const char *opt, const char *s, long lo, long hi, long *out, int *n) {
    *n = 0;
    const char *p = s;
    for (;;) {
        char item[32];
        size_t len = strcspn(p, ",");
        if (len == 0 || len >= sizeof item || *n == MAX_LIST) {
            cli_usage_error("bench", "--%s: '%s' is not a list of at most %d numbers", opt, s, MAX_LIST);
            return false;
        }
        memcpy(item, p, len);
        item[len] = 0;
        if (!args_int("bench", opt, item, lo, hi, &out[(*n)++])) return false;
        if (!p[len]) return true;
        p += len + 1;
    }
}

const char *bench_all_modes(char *buf, size_t n) {
    size_t len = 0;
    buf[0] = 0;
    for (int m = 0; m < RT_NMODES && len < n; m++)
        if (rt_mode(m)) len += (size_t)snprintf(buf + len, n - len, "%s%d", len ? "," : "", m);
    return buf;
}

bool bench_parse_modes(const char *cmd, const Args *a, long *out, int *n) {
    char all[64];
    const char *s = args_get(a, "modes") ? args_get(a, "modes") : bench_all_modes(all, sizeof all);
    long v[MAX_LIST];
    if (!bench_parse_list("modes", s, 0, RT_NMODES - 1, v, n)) return false;
    for (int i = 0; i < *n; i++) {
        if (!rt_mode((int)v[i])) {
            cli_usage_error(cmd, "--modes: %ld is not a compile mode", v[i]);
            return false;
        }
        for (int k = 0; k < i; k++)
            if (v[i] == v[k]) {
                cli_usage_error(cmd, "--modes: mode %ld twice", v[i]);
                return false;
            }
        out[i] = v[i];
    }
    return true;
}

/* ---- fresh processes -------------------------------------------------------- */

typedef struct Argv {
    char **v;
    int n, cap;
    bool oom;
} Argv;

static void av_push(Argv *a, const char *s) {
    if (a->n + 2 > a->cap) {
        int cap = a->cap ? a->cap * 2 : 32;
        char **v = realloc(a->v, sizeof *v * (size_t)cap);
        if (!v) {
            a->oom = true;
            return;
        }
        a->v = v;
        a->cap = cap;
    }
    char *d = strdup(s);
    if (!d) {
        a->oom = true;
        return;
    }
    a->v[a->n++] = d;
    a->v[a->n] = NULL;
}

static void av_pushf(Argv *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void av_pushf(Argv *a, const char *fmt, ...) {
    char buf[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    av_push(a, buf);
}

static void av_free(Argv *a) {
    for (int i = 0; i < a->n; i++) free(a->v[i]);
    free(a->v);
    memset(a, 0, sizeof *a);
}

/* `milc --cache-dir DIR --template-dir ... CMD`, then the program family as
 * options; --NAME=VALUE keeps a value that starts with '-' a value. */
static void av_start(Argv *a, const Bench *b, const char *cache_dir, const char *cmd) {
    av_push(a, "milc");
    av_push(a, "--cache-dir");
    av_push(a, cache_dir);
    av_push(a, "--template-dir");
    av_push(a, b->cli->template_dirs);
    av_push(a, cmd);
}

static void av_params(Argv *a, const BenchParams *p) {
    av_pushf(a, "--template=%s", p->config);
    if (p->weights) av_pushf(a, "--weights=%s", p->weights);
    for (int i = 0; i < p->n; i++) av_pushf(a, "--%s=%s", p->v[i].name, p->v[i].value);
}

typedef struct Spawned {
    double wall_ms;   /* spawn → reaped */
    double rss_bytes; /* wait4's ru_maxrss: see peak_rss_bytes() in bench_chain.c for its flaw */
    char out[4096];   /* its stdout when captured (one JSON line) */
} Spawned;

/* Run argv (this binary) to completion; stdout captured or discarded, stderr
 * shared.  EXIT_OK if it exited 0, else EXIT_SYSTEM with a message. */
static int spawn_wait(const Bench *b, Argv *av, bool capture, Spawned *s) {
    memset(s, 0, sizeof *s);
    if (av->oom) {
        cli_error("out of memory");
        return EXIT_SYSTEM;
    }
    int fds[2] = {-1, -1};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    if (capture) {
        if (pipe2(fds, O_CLOEXEC) != 0) {
            cli_error("pipe: %s", strerror(errno));
            posix_spawn_file_actions_destroy(&fa);
            return EXIT_SYSTEM;
        }
        posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    } else {
        posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    }
    fflush(stdout);
    fflush(stderr);
    long long t0 = cli_now_ns();
    pid_t pid;
    sigset_t held;
    posix_spawnattr_t at;
    posix_spawnattr_init(&at);
    scratch_hold(&held);
    posix_spawnattr_setsigmask(&at, &held);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK);
    int r = posix_spawn(&pid, b->exe, &fa, &at, av->v, environ);
    if (r == 0) scratch_child_add(pid); /* an interrupted bench stops it too */
    scratch_release(&held);
    posix_spawnattr_destroy(&at);
    posix_spawn_file_actions_destroy(&fa);
    if (capture) close(fds[1]);
    if (r != 0) {
        if (capture) close(fds[0]);
        cli_error("cannot run %s: %s", b->exe, strerror(r));
        return EXIT_SYSTEM;
    }
    size_t len = 0;
    while (capture) {
        ssize_t k = read(fds[0], s->out + len, sizeof s->out - 1 - len);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) break;
        len += (size_t)k;
        if (len == sizeof s->out - 1) { /* drain: only the first line matters */
            char sink[4096];
            while (read(fds[0], sink, sizeof sink) > 0) {}
            break;
        }
    }
    s->out[len] = 0;
    if (capture) close(fds[0]);
    int status;
    struct rusage ru;
    pid_t w;
    while ((w = wait4(pid, &status, 0, &ru)) < 0 && errno == EINTR) {}
    scratch_child_del(pid);
    s->wall_ms = (double)(cli_now_ns() - t0) / 1e6;
    if (w < 0) {
        cli_error("wait4: %s", strerror(errno));
        return EXIT_SYSTEM;
    }
    s->rss_bytes = (double)ru.ru_maxrss * 1024.0; /* Linux reports KiB */
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        if (WIFSIGNALED(status))
            cli_error("'milc %s' was killed by signal %d", av->v[5], WTERMSIG(status));
        else
            cli_error("'milc %s' failed (exit %d)", av->v[5], WEXITSTATUS(status));
        return EXIT_SYSTEM;
    }
    return EXIT_OK;
}

/* A number field of the child's flat JSON line (a format this file owns). */
static bool json_num(const char *s, const char *key, double *v) {
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(s, pat);
    if (!p) return false;
    char *end;
    *v = strtod(p + strlen(pat), &end);
    return end != p + strlen(pat);
}

typedef struct Ttft {
    double ttft_ms, start_ms, open_ms, build_ms, load_ms, run_ms, misses, hits, bytes, dispatches, rss;
    double generate_ms, check_ms, lower_ms, store_ms; /* build_ms's parts */
} Ttft;

static int run_ttft(const Bench *b, const char *cache_dir, int mode, Ttft *t) {
    Argv av = {0};
    av_start(&av, b, cache_dir, "bench");
    av_push(&av, "--child");
    av_push(&av, "ttft");
    long long t0 = cli_now_ns();
    av_pushf(&av, "--t0=%lld", t0);
    av_pushf(&av, "--mode=%d", mode);
    av_pushf(&av, "--chunk=%ld", b->chunk);
    av_pushf(&av, "--threads=%d", b->threads);
    if (verify_flag(b->verify)) av_push(&av, verify_flag(b->verify));
    av_params(&av, &b->base);
    Spawned s;
    int rc = spawn_wait(b, &av, true, &s);
    av_free(&av);
    if (rc != EXIT_OK) return rc;
    bool ok = json_num(s.out, "ttft_ms", &t->ttft_ms) && json_num(s.out, "build_ms", &t->build_ms) &&
              json_num(s.out, "load_ms", &t->load_ms) && json_num(s.out, "misses", &t->misses) &&
              json_num(s.out, "hits", &t->hits) && json_num(s.out, "artifact_bytes", &t->bytes) &&
              json_num(s.out, "dispatches", &t->dispatches) && json_num(s.out, "start_ms", &t->start_ms) &&
              json_num(s.out, "open_ms", &t->open_ms) && json_num(s.out, "run_ms", &t->run_ms);
    ok = ok && json_num(s.out, "generate_ms", &t->generate_ms) && json_num(s.out, "check_ms", &t->check_ms) &&
         json_num(s.out, "lower_ms", &t->lower_ms) && json_num(s.out, "store_ms", &t->store_ms);
    if (!ok) {
        cli_error("bench child printed no result: '%.200s'", s.out);
        return EXIT_SYSTEM;
    }
    if (!strstr(s.out, "\"finite\":true")) progress(b, "warning: mode %d prefill produced non-finite values", mode);
    double own;
    t->rss = json_num(s.out, "peak_rss_bytes", &own) && own > 0 ? own : s.rss_bytes;
    return EXIT_OK;
}

/* ---- in-process measurements ------------------------------------------------- */

/* Build (quietly, if needed) and load p into ch, and run it once: the warm-up
 * that first touches its weights and arena. */
static int chain_ready(const Bench *b, Cache *c, const char *cache_dir, const BenchParams *p, int mode, long chunk,
                       Chain *ch, double *dispatches) {
    DiagSink d;
    diag_init(&d);
    ChainBuilt built;
    int rc = bench_build(c, &b->tp, p, mode, chunk, b->verify, cache_dir, &built, &d);
    if (rc == EXIT_INPUT) cli_report(b->cli, &d);
    diag_free(&d);
    if (rc != EXIT_OK) return rc;
    rc = chain_load(ch, c, &built, b->threads, 0);
    chain_built_free(&built);
    if (rc != EXIT_OK) return rc;
    double t;
    uint64_t nd = 0;
    if ((rc = chain_run(ch, &t, &nd)) != EXIT_OK) chain_free(ch);
    *dispatches = (double)nd;
    return rc;
}

/* What measure() learns besides the times. */
typedef struct Measured {
    double dispatches, ops, weight_bytes, gbs;
} Measured;

/* chain_ready, then b->repeat timed forwards, then the read bandwidth of the
 * chain's own weights (GB/s, 0 if unknown). */
static int measure(const Bench *b, Cache *c, const char *cache_dir, const BenchParams *p, int mode, long chunk,
                   BenchStat *ms, Measured *mx) {
    Chain ch;
    int rc = chain_ready(b, c, cache_dir, p, mode, chunk, &ch, &mx->dispatches);
    if (rc != EXIT_OK) return rc;
    double v[1024];
    int n = b->repeat < 1024 ? b->repeat : 1024;
    for (int i = 0; i < n && rc == EXIT_OK; i++) rc = chain_run(&ch, &v[i], NULL);
    mx->ops = (double)ch.last_ops;
    ChainRange r[512];
    int nr;
    mx->weight_bytes = chain_weight_bytes(&ch, r, &nr, 512);
    int nth = b->threads ? b->threads : os_cpu_count();
    mx->gbs = rc == EXIT_OK ? bench_bandwidth(r, nr, nth, 3) / 1e9 : 0;
    chain_free(&ch);
    if (rc == EXIT_OK) *ms = bench_stat(v, n);
    return rc;
}

static int sweep_point(const Bench *b, Cache *c, const char *dir, int mode, long layers, long seq, double work,
                       BenchSweep *s) {
    BenchParams p;
    char lv[32], sv[32];
    snprintf(lv, sizeof lv, "%ld", layers);
    snprintf(sv, sizeof sv, "%ld", seq);
    if (bparams_copy(&p, &b->base) != 0 || bparams_add(&p, "layers", lv) != 0 ||
        bparams_add(&p, "first_layer", "0") != 0 || bparams_add(&p, "seq", sv) != 0) {
        bparams_free(&p);
        cli_error("out of memory");
        return EXIT_SYSTEM;
    }
    BenchPoint *pt = &s->pts[s->npts];
    pt->work = work;
    Measured mx;
    int rc = measure(b, c, dir, &p, mode, 0, &pt->ms, &mx);
    bparams_free(&p);
    pt->dispatches = mx.dispatches;
    pt->weight_bytes = mx.weight_bytes;
    pt->stream_ms = mx.gbs > 0 ? mx.weight_bytes / (mx.gbs * 1e9) * 1e3 : NAN;
    if (rc == EXIT_OK) s->npts++;
    return rc;
}

/* What the disk under dir takes to write and fdatasync bytes (a file beside
 * the cold caches, 4 MiB writes, then removed): the yardstick of a cold
 * build, measured in the same run.  NAN if it cannot be measured. */
static double disk_write_ms(const char *dir, uint64_t bytes) {
    char path[4200];
    snprintf(path, sizeof path, "%s/disk-yardstick", dir);
    size_t blk = 4u << 20;
    char *buf = malloc(blk);
    int fd = buf ? open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600) : -1;
    double ms = NAN;
    if (fd >= 0) {
        memset(buf, 0x5a, blk);
        long long t0 = cli_now_ns();
        uint64_t at = 0;
        while (at < bytes) {
            size_t n = bytes - at < blk ? (size_t)(bytes - at) : blk;
            if (write(fd, buf, n) != (ssize_t)n) break;
            at += n;
        }
        if (at == bytes && fdatasync(fd) == 0) ms = cli_ms_since(t0);
        close(fd);
        unlink(path);
    }
    free(buf);
    return ms;
}

/* ---- one compile mode ---------------------------------------------------------- */

/* Cold: a directory that does not exist yet, so nothing can hit.  The
 * first cold cache becomes this mode's warm one. */
static int cold_runs(const Bench *b, int mode, const char *warm, BenchModeResult *m) {
    char dir[4200];
    double v1[1024], v2[1024], v3[1024], vg[1024], vc[1024], vl[1024], vs[1024];
    Ttft t;
    int rc;
    for (int i = 0; i < b->cold_repeat; i++) {
        progress(b, "mode %d: cold run %d/%d (compile %ld chunk%s, then prefill)", mode, i + 1, b->cold_repeat,
                 b->nchunks, b->nchunks == 1 ? "" : "s");
        if (i == 0)
            snprintf(dir, sizeof dir, "%s", warm);
        else
            snprintf(dir, sizeof dir, "%s/cold-%d-%d", b->root, mode, i);
        if ((rc = run_ttft(b, dir, mode, &t)) != EXIT_OK) return rc;
        if (i > 0) cli_rm_tree(dir);
        if (t.misses != (double)b->nchunks || t.hits != 0) {
            cli_error("cold run of mode %d found %g of %ld chunks in a new cache", mode, t.hits, b->nchunks);
            return EXIT_SYSTEM;
        }
        v1[i] = t.ttft_ms, v2[i] = t.build_ms, v3[i] = t.rss;
        vg[i] = t.generate_ms, vc[i] = t.check_ms, vl[i] = t.lower_ms, vs[i] = t.store_ms;
        m->artifact_bytes = (uint64_t)t.bytes;
    }
    m->ttft_cold_ms = bench_stat(v1, b->cold_repeat);
    m->compile_ms = bench_stat(v2, b->cold_repeat);
    m->rss_cold = bench_stat(v3, b->cold_repeat);
    m->cold_generate_ms = bench_stat(vg, b->cold_repeat), m->cold_check_ms = bench_stat(vc, b->cold_repeat);
    m->cold_lower_ms = bench_stat(vl, b->cold_repeat), m->cold_store_ms = bench_stat(vs, b->cold_repeat);
    m->disk_write_ms = disk_write_ms(b->root, m->artifact_bytes);
    return EXIT_OK;
}

/* Warm: `milc build` of the whole chain on the warm cache, each a fresh process. */
static int warm_builds(const Bench *b, int mode, const char *warm, BenchModeResult *m) {
    double v1[1024];
    int rc;
    progress(b, "mode %d: %d warm `milc build` run%s", mode, b->repeat, b->repeat == 1 ? "" : "s");
    for (int i = 0; i < b->repeat; i++) {
        Argv av = {0};
        av_start(&av, b, warm, "build");
        av_pushf(&av, "--chunk=%ld", b->chunk);
        av_pushf(&av, "--mode=%d", mode);
        if (verify_flag(b->verify)) av_push(&av, verify_flag(b->verify));
        av_params(&av, &b->base);
        Spawned s;
        rc = spawn_wait(b, &av, false, &s);
        av_free(&av);
        if (rc != EXIT_OK) return rc;
        v1[i] = s.wall_ms;
    }
    m->build_warm_ms = bench_stat(v1, b->repeat);
    return EXIT_OK;
}

/* The depth and token sweeps, each fitted to a line. */
static int run_sweeps(const Bench *b, Cache *c, const char *warm, int mode, BenchModeResult *m) {
    int rc = EXIT_OK;
    m->has_sweeps = true;
    m->depth.work_name = "layers";
    m->depth.fixed = (int)b->depth_seq;
    for (int i = 0; i < b->ndepths && rc == EXIT_OK; i++) {
        progress(b, "mode %d: depth sweep, %ld layer%s per chunk", mode, b->depths[i], b->depths[i] == 1 ? "" : "s");
        rc = sweep_point(b, c, warm, mode, b->depths[i], b->depth_seq, (double)b->depths[i], &m->depth);
    }
    m->tokens.work_name = "tokens";
    long k = b->chunk < b->layers ? b->chunk : b->layers;
    m->tokens.fixed = (int)k;
    for (int i = 0; i < b->nseqs && rc == EXIT_OK; i++) {
        progress(b, "mode %d: token sweep, %ld token%s per dispatch", mode, b->seqs[i], b->seqs[i] == 1 ? "" : "s");
        rc = sweep_point(b, c, warm, mode, k, b->seqs[i], (double)b->seqs[i], &m->tokens);
    }
    bench_fit(&m->depth);
    bench_fit(&m->tokens);
    return rc;
}

static int bench_mode(const Bench *b, int mode, BenchModeResult *m) {
    memset(m, 0, sizeof *m);
    m->mode = mode;
    char warm[4200];
    snprintf(warm, sizeof warm, "%s/warm-%d", b->root, mode);
    double v1[1024], v2[1024], v3[1024], v4[1024], v5[1024], v6[1024], v7[1024];
    Ttft t;
    int rc;

    if ((rc = cold_runs(b, mode, warm, m)) != EXIT_OK) return rc;
    if ((rc = warm_builds(b, mode, warm, m)) != EXIT_OK) return rc;

    /* In process, on the warm cache: this process opens it once. */
    Cache *c = NULL;
    char err[512] = "";
    int r = cache_open(&c, warm, &(CacheOptions){.no_sync = 1}, err, sizeof err);
    if (r != 0) {
        cli_cache_error(r, err);
        return EXIT_SYSTEM;
    }

    /* Cached first prefills and steady ones in turn: a fresh process on the
     * warm cache, then one forward of the chain loaded here.  The VM's speed
     * drifts over seconds; taken in alternation, both figures see the same
     * conditions, so their ratio is the first call's extra cost and not the
     * drift between two blocks of runs. */
    progress(b, "mode %d: %d cached run%s (fresh process, warm cache), each with a steady prefill", mode, b->repeat,
             b->repeat == 1 ? "" : "s");
    Chain ch;
    double nd, v8[1024], v9[1024];
    rc = chain_ready(b, c, warm, &b->base, mode, b->chunk, &ch, &nd);
    bool loaded = rc == EXIT_OK;
    for (int i = 0; i < b->repeat && rc == EXIT_OK; i++) {
        if ((rc = run_ttft(b, warm, mode, &t)) != EXIT_OK) break;
        if (t.misses != 0) {
            cli_error("cached run of mode %d compiled %g chunk(s): the warm cache missed", mode, t.misses);
            rc = EXIT_SYSTEM;
            break;
        }
        v1[i] = t.ttft_ms, v2[i] = t.load_ms, v3[i] = t.rss;
        v4[i] = t.start_ms, v5[i] = t.open_ms, v6[i] = t.build_ms, v7[i] = t.run_ms;
        m->prefill_dispatches = t.dispatches;
        rc = chain_run(&ch, &v8[i], NULL);
        v9[i] = t.ttft_ms / v8[i];
    }
    if (loaded) chain_free(&ch);
    if (rc == EXIT_OK) {
        m->cached_start_ms = bench_stat(v4, b->repeat);
        m->cached_open_ms = bench_stat(v5, b->repeat);
        m->cached_lookup_ms = bench_stat(v6, b->repeat);
        m->cached_run_ms = bench_stat(v7, b->repeat);
        m->ttft_cached_ms = bench_stat(v1, b->repeat);
        m->load_ms = bench_stat(v2, b->repeat);
        m->rss_cached = bench_stat(v3, b->repeat);
        m->prefill_ms = bench_stat(v8, b->repeat);
        m->ttft_pair = bench_stat(v9, b->repeat);
    }
    if (rc == EXIT_OK) {
        progress(b, "mode %d: decode at ctx %ld (compiles the decode chunks)", mode, b->ctx);
        Measured mx;
        rc = measure(b, c, warm, &b->decode, mode, b->chunk, &m->decode_ms, &mx);
        m->decode_dispatches = mx.dispatches, m->decode_ops = mx.ops;
        m->decode_weight_bytes = mx.weight_bytes, m->decode_gbs = mx.gbs;
    }
    if (rc == EXIT_OK && b->sweeps) rc = run_sweeps(b, c, warm, mode, m);
    cache_close(c);
    cli_rm_tree(warm);
    return rc;
}

/* ---- the per-dispatch overhead ------------------------------------------------- */

/* Once per run: the decode chunks, bonded vs one dispatch per op. */
static int measure_dispatch(const Bench *b, BenchReport *r) {
    int pairs = b->repeat <= 1 ? 5 : b->repeat < 21 ? 21 : b->repeat;
    progress(b, "per-dispatch overhead: decode chunks bonded vs one dispatch per op, %d alternated pairs", pairs);
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/dispatch", b->root);
    DiagSink d;
    diag_init(&d);
    int rc = bench_dispatch(&b->tp, &b->decode, b->chunk, b->threads, dir, pairs, &r->dispatch, &d);
    if (rc == EXIT_INPUT) cli_report(b->cli, &d);
    diag_free(&d);
    cli_rm_tree(dir);
    r->has_dispatch = rc == EXIT_OK && r->dispatch.us.n > 0;
    return rc;
}

/* ---- the ANE projection ----------------------------------------------------------- */

/* --project: the measured modes at the sweep's depths and the headline one,
 * for the run's prompt and context.  The chip file was read already. */
static int project(const Bench *b, const BenchReport *r, BenchProjection *pr) {
    progress(b, "ANE estimate: one decode layer compiled in mode 1 to count its ops");
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/project", b->root);
    DiagSink d;
    diag_init(&d);
    int rc = bench_project_model(&b->tp, &b->decode, dir, &pr->model, &d);
    if (rc == EXIT_INPUT) cli_report(b->cli, &d);
    diag_free(&d);
    cli_rm_tree(dir);
    if (rc != EXIT_OK) return rc;
    pr->prompt = (int)b->seq, pr->ctx = (int)b->ctx;
    pr->nmodes = r->nmodes;
    for (int i = 0; i < r->nmodes; i++) pr->modes[i] = r->modes[i].mode;
    pr->ndepths = 0;
    for (long dd = 1; dd <= b->layers && pr->ndepths < BENCH_MAX_POINTS; dd++) {
        bool want = dd == b->chunk;
        for (int i = 0; i < b->ndepths; i++) want |= b->depths[i] == dd;
        if (want) pr->depths[pr->ndepths++] = (int)dd;
    }
    bench_project_run(pr);
    return EXIT_OK;
}

/* ---- the whole model ------------------------------------------------------------ */

static void whole_progress(void *ctx, const char *what) { progress(ctx, "%s", what); }

/* --whole, in the headline mode (2 when measured, else the first): the
 * library's figures of embedding → chunks → head. */
static int measure_whole(const Bench *b, const long *modes, int nmodes, WholeResult *w, int *mode) {
    *mode = (int)modes[0];
    for (int i = 0; i < nmodes; i++)
        if (modes[i] == RT_MODE_DEFAULT) *mode = RT_MODE_DEFAULT;
    DiagSink d;
    diag_init(&d);
    int rc = whole_bench(&(WholeSpec){.tp = &b->tp,
                                      .config = b->base.config,
                                      .weights = b->base.weights,
                                      .prefill = b->base.v,
                                      .nprefill = b->base.n,
                                      .decode = b->decode.v,
                                      .ndecode = b->decode.n,
                                      .chunk = b->chunk,
                                      .mode = *mode,
                                      .nthreads = b->threads,
                                      .verify_hits = b->verify,
                                      .cold_repeat = b->cold_repeat,
                                      .repeat = b->repeat,
                                      .tokens = b->repeat < 16 ? 16 : b->repeat,
                                      .root = b->root,
                                      .progress = whole_progress,
                                      .ctx = (void *)b},
                         w, &d);
    if (rc == EXIT_INPUT) cli_report(b->cli, &d);
    diag_free(&d);
    return rc;
}

/* ---- the command -------------------------------------------------------------- */

static bool opt_long(const Args *a, const char *name, long lo, long hi, long *v) {
    const char *s = args_get(a, name);
    return !s || args_int("bench", name, s, lo, hi, v);
}

static bool has_param(const Args *a, const char *name) {
    for (int i = 0; i < a->nextra; i++)
        if (gen_name_matches(name, a->extra[i].name)) return true;
    return false;
}

/* Write what fn prints to path atomically.  0 or -1 (message printed). */
static int write_report(const char *path, void (*fn)(FILE *, const BenchReport *), const BenchReport *r) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) {
        cli_error("out of memory");
        return -1;
    }
    fn(f, r);
    if (fclose(f) != 0) {
        free(buf);
        cli_error("out of memory");
        return -1;
    }
    int rc = cli_write_file(path, buf, len);
    free(buf);
    return rc;
}

/* Bench's options into b (and *prp with --project), checked.  EXIT_OK, or
 * the exit code of a usage error or a bad chip file (printed). */
static int bench_options(const Args *a, bool quick, Bench *b, long *modes, int *nmodes, BenchProjection **prp) {
    BenchProjection *pr;
    long repeat = quick ? 1 : 5, cold = quick ? 1 : 3, threads = 0;
    if (!opt_long(a, "chunk", 1, 4096, &b->chunk) || !opt_long(a, "ctx", 1, 65536, &b->ctx) ||
        !opt_long(a, "repeat", 1, 1000, &repeat) || !opt_long(a, "cold-repeat", 1, 1000, &cold) ||
        !opt_long(a, "depth-seq", 1, 65536, &b->depth_seq) || !opt_long(a, "threads", 1, 256, &threads) ||
        !bench_parse_modes("bench", a, modes, nmodes) ||
        !bench_parse_list("depths",
                          args_get(a, "depths") ? args_get(a, "depths")
                          : quick               ? "1,2"
                                                : "1,2,4,6,12",
                          1, 4096, b->depths, &b->ndepths) ||
        !bench_parse_list("seqs",
                          args_get(a, "seqs") ? args_get(a, "seqs")
                          : quick             ? "1,8"
                                              : "1,8,16,32,64,128",
                          1, 65536, b->seqs, &b->nseqs))
        return EXIT_USAGE;
    for (int i = 0; i < a->nextra; i++)
        if (strchr(a->extra[i].value, ',')) {
            cli_usage_error("bench", "--%s: one value per parameter (sweeps are --seqs and --depths)",
                            a->extra[i].name);
            return EXIT_USAGE;
        }
    const char *proj = args_get(a, "project");
    if (proj && strcmp(proj, "ane") != 0) {
        cli_usage_error("bench", "--project: only 'ane' exists");
        return EXIT_USAGE;
    }
    if (args_get(a, "chip") && !proj) {
        cli_usage_error("bench", "--chip needs --project ane");
        return EXIT_USAGE;
    }
    if (proj) { /* the chip file first: a bad one fails before minutes of measuring */
        char buf[4096];
        if (!(pr = *prp = calloc(1, sizeof *pr))) {
            cli_error("out of memory");
            return EXIT_SYSTEM;
        }
        snprintf(pr->chip_path, sizeof pr->chip_path, "%s", bench_chip_path(args_get(a, "chip"), buf, sizeof buf));
        int rc = bench_chip_load(pr->chip_path, &pr->chip);
        if (rc != EXIT_OK) return rc;
    }
    if (!args_get(a, "cold-repeat") && cold > repeat) cold = repeat;
    b->repeat = (int)repeat;
    b->cold_repeat = (int)cold;
    b->threads = (int)threads;
    b->sweeps = !args_flag(a, "no-sweeps");
    b->verify = verify_policy(a);
    if (os_exe_path(b->exe, sizeof b->exe) != 0) {
        cli_error("cannot find this executable's path (the OS does not say)");
        return EXIT_SYSTEM;
    }
    return EXIT_OK;
}

/* Check the request against the template before spending minutes, and
 * learn the model's depth and the prefill length from the resolved config.
 * EXIT_OK, or the exit code of the diagnostics (printed). */
static int bench_shape(Bench *b, const char *config) {
    DiagSink d;
    diag_init(&d);
    JobList jobs = {0};
    JobSpec spec = {.config = config,
                    .weights = b->base.weights,
                    .modes = "2",
                    .chunk = b->chunk,
                    .extra = b->base.v,
                    .nextra = b->base.n};
    int erc = jobs_expand(&b->tp, &spec, &jobs, &d);
    b->nchunks = jobs.n;
    spec.extra = b->decode.v, spec.nextra = b->decode.n;
    if (erc == 0) erc = jobs_expand(&b->tp, &spec, &jobs, &d);
    jobs_free(&jobs);
    BuildJob whole = {.config = b->base.config, .nparams = b->base.n};
    char **names = calloc((size_t)b->base.n + 1, sizeof *names),
         **values = calloc((size_t)b->base.n + 1, sizeof *values);
    for (int i = 0; names && values && i < b->base.n; i++) {
        names[i] = (char *)b->base.v[i].name;
        values[i] = (char *)b->base.v[i].value;
    }
    whole.names = names, whole.values = values;
    GenConfig *gc = erc == 0 && names && values ? job_config(&b->tp, &whole, &d) : NULL;
    free(names);
    free(values);
    int64_t seq = 0, layers = 0;
    bool known = gc && gen_config_get_int(gc, "seq", &seq) && gen_config_get_int(gc, "layers", &layers);
    if (gc && !known)
        diag_error(&d, (SrcLoc){0}, "template '%s' has no 'seq' or 'layers' parameter: bench needs both", config);
    gen_config_free(gc);
    if (!known) {
        int rc = cli_report(b->cli, &d);
        diag_free(&d);
        return rc == EXIT_OK ? EXIT_INPUT : rc;
    }
    diag_free(&d);
    b->layers = (long)layers;
    b->seq = (long)seq;
    /* Sweep depths beyond the model do not exist. */
    int nd = 0;
    for (int i = 0; i < b->ndepths; i++)
        if (b->depths[i] <= b->layers) b->depths[nd++] = b->depths[i];
    b->ndepths = nd;
    return EXIT_OK;
}

static int bench_run(Cli *cli, int argc, char **argv) {
    if (argc > 1 && strncmp(argv[1], "--child", 7) == 0) return bench_child(cli, argc, argv);
    Args a;
    /* A failed parse leaves its partial arrays in a. */
    if (!args_parse("bench", bench_opts, argc - 1, argv + 1, true, &a)) {
        args_free(&a);
        return EXIT_USAGE;
    }
    if (!verify_flags_ok("bench", &a)) {
        args_free(&a);
        return EXIT_USAGE;
    }
    int rc = EXIT_USAGE;
    BenchProjection *pr = NULL; /* --project */
    if (args_flag(&a, "help")) {
        bench_usage(stdout);
        cli_template_help(cli, stdout, &a);
        args_free(&a);
        return EXIT_OK;
    }
    bool quick = args_flag(&a, "quick");
    /* The global --json is a flag (main takes it out of argv), so
     * `--json FILE` arrives as --json plus a positional FILE. */
    const char *json_file = args_get(&a, "json");
    if (a.npos == 1 && cli->json && !json_file)
        json_file = a.pos[0];
    else if (a.npos) {
        cli_usage_error("bench", "unexpected argument '%s'", a.pos[0]);
        goto out_args;
    }
    bool json_stdout = cli->json && !json_file;

    Bench b = {.cli = cli,
               .verify = BUILD_VERIFY_ONCE,
               .chunk = quick ? 1 : 4,
               .ctx = quick ? 64 : 1024,
               .depth_seq = 1,
               .sweeps = true};
    long modes[MAX_LIST];
    int nmodes = 0;
    if ((rc = bench_options(&a, quick, &b, modes, &nmodes, &pr)) != EXIT_OK) goto out_args;

    /* The program families: bench's defaults first, so the user's own
     * --seq / --min-seq (applied later) win. */
    const char *config = args_get(&a, "model") || args_get(&a, "template") ? cli_config_name(&a)
                         : quick                                           ? "tiny"
                                                                           : "gpt2";
    char cv[32];
    rc = EXIT_SYSTEM;
    if (tpath_init(&b.tp, cli->template_dirs) != 0) {
        cli_error("out of memory");
        goto out_args;
    }
    bool oom = bparams_init(&b.base, config, args_get(&a, "weights")) != 0;
    if (!has_param(&a, "seq")) oom |= bparams_add(&b.base, "seq", quick ? "32" : "128") != 0;
    oom |= bparams_add(&b.base, "min_seq", "1") != 0; /* the CPU backend needs no padding */
    oom |= bparams_add(&b.base, "io", "split") != 0;  /* nor packing: chunks chain x <- y */
    for (int i = 0; i < a.nextra; i++) oom |= bparams_add(&b.base, a.extra[i].name, a.extra[i].value) != 0;
    snprintf(cv, sizeof cv, "%ld", b.ctx);
    oom |= bparams_copy(&b.decode, &b.base) != 0;
    oom |= bparams_add(&b.decode, "phase", "decode") != 0 || bparams_add(&b.decode, "seq", "1") != 0 ||
           bparams_add(&b.decode, "ctx", cv) != 0;
    if (oom) {
        cli_error("out of memory");
        goto out;
    }

    if ((rc = bench_shape(&b, config)) != EXIT_OK) goto out;

    const char *tmp = getenv("TMPDIR");
    ScratchUsage stale; /* what benches killed outright left behind */
    scratch_sweep(tmp && *tmp ? tmp : "/tmp", "milc-bench", 1, &stale);
    if (scratch_make(tmp && *tmp ? tmp : "/tmp", "milc-bench", b.root, sizeof b.root) != 0) {
        cli_error("cannot create a scratch directory in '%s': %s", tmp && *tmp ? tmp : "/tmp", strerror(errno));
        goto out;
    }
    BenchReport r = {.config = config,
                     .layers = b.layers,
                     .chunk = b.chunk,
                     .nchunks = b.nchunks,
                     .seq = b.seq,
                     .ctx = b.ctx,
                     .depth_seq = b.depth_seq,
                     .verify = b.verify,
                     .repeat = b.repeat,
                     .cold_repeat = b.cold_repeat,
                     .threads = b.threads ? b.threads : os_cpu_count()};
    char allm[64];
    progress(&b, "%s: %ld layers in %ld chunk%s of %ld, T=%ld, modes %s; scratch %s", config, b.layers, b.nchunks,
             b.nchunks == 1 ? "" : "s", b.chunk, b.seq,
             args_get(&a, "modes") ? args_get(&a, "modes") : bench_all_modes(allm, sizeof allm), b.root);
    rc = measure_dispatch(&b, &r);
    for (int i = 0; i < nmodes && rc == EXIT_OK; i++) {
        rc = bench_mode(&b, (int)modes[i], &r.modes[i]);
        r.nmodes = i + 1;
    }
    if (rc == EXIT_OK && pr && (rc = project(&b, &r, pr)) == EXIT_OK) r.projection = pr;
    WholeResult whole;
    if (rc == EXIT_OK && args_flag(&a, "whole") &&
        (rc = measure_whole(&b, modes, nmodes, &whole, &r.whole_mode)) == EXIT_OK)
        r.whole = &whole;
    scratch_remove(b.root);
    if (rc != EXIT_OK) goto out;
    if (json_stdout)
        bench_write_json(stdout, &r);
    else if (cli->verbosity >= 0)
        bench_print_table(stdout, &r);
    if (json_file && write_report(json_file, bench_write_json, &r) != 0) rc = EXIT_SYSTEM;
    if (args_get(&a, "csv") && write_report(args_get(&a, "csv"), bench_write_csv, &r) != 0) rc = EXIT_SYSTEM;

out:
    bparams_free(&b.base);
    bparams_free(&b.decode);
    tpath_free(&b.tp);
out_args:
    free(pr);
    args_free(&a);
    return rc;
}

const Command cmd_bench = {
    "bench", "measure compile modes: cold vs cached, prefill, decode, sweeps", bench_run, bench_help, true, false};
