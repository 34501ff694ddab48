/* cmd_prewarm.c — `milc prewarm MANIFEST [-j N]`: build everything a manifest
 * lists, in parallel worker processes, so that the first run after an install
 * compiles nothing.  Idempotent (a second run is all cache hits) and
 * resumable (killed, it keeps what it stored; a rerun finishes the rest).
 *
 * Manifest format: one build request per line, written as `milc build`
 * options; '#' starts a comment; blank lines are ignored.
 *
 *     # GPT-2 124M, prefill chunks of 4 in both modes, decode buckets
 *     --model gpt2 --chunk 4 --mode 0,2 --seq 128
 *     --model gpt2 --chunk 4 --mode 2 --phase decode --seq 1,8,16
 *
 * Options: --template, --model, --weights, --mode (list), --chunk, and any
 * template parameter (comma lists build every value).  Errors point at the
 * manifest's file:line:col. */
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "scratch.h"
#include "cli.h"
#include "json.h"
#include "genopts.h"
#include "milc/drift.h"
#include "milc/ledger.h"
#include "tier.h"
#include "milc/manifest.h"
#include "milc/packages.h"
#include "milc/request.h"
#include "milc/ossys.h"

static const OptSpec prewarm_opts[] = {
    {"jobs", 'j', OPT_VALUE, "N", "worker processes (default: the number of CPUs)"},
    {"stale", 0, OPT_FLAG, NULL,
     "instead of a manifest: rebuild every entry another milc made (cache verify --stale) from its stored recipe, "
     "costliest first"},
    {"packages", 0, OPT_VALUE, "DIR",
     "also leave each program as a Core ML package, DIR/KEY.mlpackage (after the builds)"},
    VERIFY_OPTS,
    {0},
};

static void prewarm_help(FILE *f) {
    fputs("usage: milc prewarm MANIFEST [-j N] [--packages DIR]\n"
          "       milc prewarm --stale [-j N]\n"
          "\n"
          "Build every program a manifest lists into the cache, in parallel worker\n"
          "processes, with a progress bar on a terminal.  Running it again compiles\n"
          "nothing; if it is interrupted, a rerun builds only what is missing.\n"
          "Exits non-zero if any build failed, after listing what and why.\n"
          "SIGINT, SIGTERM or SIGHUP stops the workers (each removes its scratch);\n"
          "prewarm waits for them, then dies of the signal (exit status 128+N).\n"
          "\n"
          "MANIFEST: one request per line in 'milc build' option syntax; '#' comments.\n"
          "  --model gpt2 --chunk 4 --mode 0,2 --seq 128\n"
          "  --model gpt2 --chunk 4 --phase decode --seq 1,8,16\n"
          "Keys: --template --model --weights --mode --chunk and template parameters.\n"
          "\noptions:\n",
          f);
    print_options(f, prewarm_opts);
}

/* A worker's report of one job; small enough for an atomic pipe write. */
typedef struct Report {
    int32_t job, rc, outcome;
    double ms;
    char key[33];
    uint8_t wdig[16]; /* the weights the key was made from */
    char msg[3000];
} Report;

/* Each line whose programs all built or hit gets its request note, so that
 * `milc build` with the same options finds them without reading a template.
 * Best effort: a line without a note is only slower to find. */
static void remember_lines(const Cli *cli, const TemplatePath *tp, const ManifestLine *lines, int nlines,
                           const int *line_first, const JobList *jobs, const Report *reports, const bool *have) {
    Store *c = NULL;
    char err[512];
    if (nlines == 0 || store_lmdb_open(&c, cli->cache_dir, NULL, err, sizeof err) != 0) return;
    CacheKey *keys = calloc((size_t)jobs->n + 1, sizeof *keys);
    for (int l = 0; keys && l < nlines; l++) {
        int first = line_first[l], n = line_first[l + 1] - first;
        bool ok = n > 0;
        /* The note names one weight digest: a checkpoint replaced between
         * two of the line's jobs leaves the line without one. */
        for (int i = first; ok && i < first + n; i++)
            ok = have[i] && reports[i].rc == EXIT_OK && cache_key_parse(reports[i].key, &keys[i]) == 0 &&
                 memcmp(reports[i].wdig, reports[first].wdig, 16) == 0;
        JobSpec spec = manifest_line_spec(&lines[l], (SrcLoc){0});
        if (ok) request_remember(c, tp, &spec, &jobs->v[first], n, &keys[first], reports[first].wdig);
    }
    free(keys);
    store_close(c);
}

static void worker(const Cli *cli, const TemplatePath *tp, const JobList *jobs, const int *order, atomic_int *next,
                   int fd, int verify, bool use_remote) {
    Store *c = NULL;
    Store *remote = NULL; /* each worker its own connection; the parent checked the options */
    char err[512] = "";
    int r = store_lmdb_open(&c, cli->cache_dir, NULL, err, sizeof err);
    if (use_remote) (void)tier_open(cli, "prewarm", true, &remote);
    for (;;) {
        int n = atomic_fetch_add(next, 1);
        if (n >= jobs->n) break;
        int i = order[n];
        Report rep = {.job = i, .rc = EXIT_SYSTEM};
        if (r != 0) {
            snprintf(rep.msg, sizeof rep.msg, "%s", err[0] ? err : cache_strerror(r));
        } else {
            DiagSink d;
            diag_init(&d);
            GenConfig *cfg = job_config(tp, &jobs->v[i], &d);
            BuildResult res;
            /* A build error prints to stderr from inside the pipeline; keep
             * diagnostics in the report so the parent lists them at the end. */
            rep.rc = cfg ? pipeline_build(c,
                                          &(BuildRequest){.config = cfg,
                                                          .weights = jobs->v[i].weights,
                                                          .mode = jobs->v[i].mode,
                                                          .tmp_root = cli->cache_dir,
                                                          .verify_hits = verify,
                                                          .max_memory = cli->max_memory,
                                                          .remote = remote},
                                          &res, &d)
                         : EXIT_INPUT;
            gen_config_free(cfg);
            if (rep.rc == EXIT_OK) {
                rep.outcome = res.outcome;
                rep.ms = res.ms_total;
                cache_key_hex(&res.key, rep.key);
                memcpy(rep.wdig, res.wdig, 16);
            }
            char *s = diag_render(&d);
            if (s) {
                snprintf(rep.msg, sizeof rep.msg, "%s", s);
                free(s);
            }
            diag_free(&d);
        }
        ssize_t w = write(fd, &rep, sizeof rep);
        (void)w;
    }
    tier_close(remote);
    store_close(c);
}

/* The remote tier for the workers: the options checked and the server asked
 * once here, so a dead one costs one warning, not one per worker. */
static int remote_for_workers(const Cli *cli, bool *use) {
    Store *r;
    int rc = tier_open(cli, "prewarm", true, &r);
    *use = rc == EXIT_OK && r && remote_ping(store_redis_remote(r)) == 0;
    tier_close(r);
    return rc;
}

static void progress(const Cli *cli, int done, int total, int hits, int built, int failed, double elapsed) {
    if (!cli->is_tty || cli->json || cli->verbosity < 0) return;
    int width = 30, fill = total ? done * width / total : width;
    char bar[64];
    for (int i = 0; i < width; i++) bar[i] = i < fill ? '=' : i == fill ? '>' : ' ';
    bar[width] = 0;
    double eta = done ? elapsed / done * (total - done) : 0;
    fprintf(stderr, "\r[%s] %d/%d  hit %d  built %d  failed %d  %.0fs left   ", bar, done, total, hits, built, failed,
            eta);
    if (done == total) fputc('\n', stderr);
}

/* Costliest first, by the cache's ledger (ledger_order); --stale jobs come
 * sorted already, and any order is valid if the cache cannot be read. */
static int build_order(const Cli *cli, const TemplatePath *tp, const JobList *jobs, int *order) {
    Cache *c;
    char err[512] = "";
    for (int i = 0; i < jobs->n; i++) order[i] = i;
    if (cache_open(&c, cli->cache_dir, NULL, err, sizeof err) != 0) {
        cli_error("%s", err);
        return EXIT_SYSTEM;
    }
    ledger_order(c, tp, jobs, order);
    cache_close(c);
    return EXIT_OK;
}

/* --stale: the recipes of the entries another milc made. */
static int stale_recipes(const Cli *cli, JobList *jobs) {
    Cache *c;
    char err[512] = "";
    if (cache_open(&c, cli->cache_dir, NULL, err, sizeof err) != 0) {
        cli_error("%s", err);
        return EXIT_SYSTEM;
    }
    int r = drift_jobs(c, jobs);
    cache_close(c);
    return r == 0 ? EXIT_OK : EXIT_SYSTEM;
}

/* The manifest's requests: each line's parsed options and its first job. */
typedef struct Manifest {
    ManifestLine *lines;
    int nlines, *line_first; /* line_first[nlines] = jobs.n */
    JobList jobs;
} Manifest;

static void manifest_free(Manifest *m) {
    for (int i = 0; i < m->nlines; i++) manifest_line_free(&m->lines[i]);
    free(m->lines);
    free(m->line_first);
    jobs_free(&m->jobs);
}

/* Parse text (cut in place) line by line and expand each request into jobs.
 * EXIT_OK (errors, if any, in d) or EXIT_SYSTEM (out of memory, printed). */
static int read_manifest(char *text, const char *file, const TemplatePath *tp, Manifest *m, DiagSink *d) {
    int lineno = 0;
    for (char *p = text, *next; p && *p; p = next) {
        lineno++;
        next = strchr(p, '\n');
        if (next) *next++ = 0;
        ManifestLine ln;
        if (manifest_parse_line(p, (SrcLoc){file, lineno, 1}, &ln, d) != 0) {
            manifest_line_free(&ln);
            continue;
        }
        if (!ln.config && !ln.nextra && !ln.chunk && !ln.modes && !ln.weights) continue; /* blank or comment */
        ManifestLine *nl = realloc(m->lines, sizeof(ManifestLine) * (size_t)(m->nlines + 1));
        int *nf = realloc(m->line_first, sizeof(int) * (size_t)(m->nlines + 2));
        if (nl) m->lines = nl;
        if (nf) m->line_first = nf;
        if (!nl || !nf) {
            manifest_line_free(&ln);
            cli_error("out of memory");
            return EXIT_SYSTEM;
        }
        m->line_first[m->nlines] = m->jobs.n;
        m->lines[m->nlines++] = ln;
        JobSpec spec = manifest_line_spec(&ln, (SrcLoc){file, lineno, 1});
        jobs_expand(tp, &spec, &m->jobs, d);
    }
    if (m->line_first) m->line_first[m->nlines] = m->jobs.n;
    return EXIT_OK;
}

/* What the workers reported: one Report per job that finished. */
typedef struct Results {
    Report *reports;
    bool *have;
    int done, hits, built, failed, crashed;
    double secs;
} Results;

/* Fork nworkers workers over the jobs in order and collect their reports
 * (printed as they come).  Workers take jobs from a shared counter and
 * report through a pipe; each opens its own cache handle (LMDB handles do
 * not survive fork).  EXIT_OK, or EXIT_SYSTEM (printed). */
static int run_workers(const Cli *cli, const TemplatePath *tp, const JobList *jobs, const int *order, long nworkers,
                       int policy, bool use_remote, Results *res) {
    atomic_int *next = mmap(NULL, sizeof *next, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    int fds[2];
    if (next == MAP_FAILED || pipe(fds) != 0) {
        cli_error("cannot start workers: %s", strerror(errno));
        return EXIT_SYSTEM;
    }
    atomic_init(next, 0);
    fflush(stdout);
    fflush(stderr);
    pid_t *pids = calloc((size_t)nworkers, sizeof *pids);
    for (long w = 0; w < nworkers; w++) {
        sigset_t held;
        scratch_hold(&held);
        pid_t pid = fork();
        if (pid == 0) {
            scratch_forget_all(); /* the parent's children and scratch are not ours */
            scratch_release(&held);
            close(fds[0]);
            worker(cli, tp, jobs, order, next, fds[1], policy, use_remote);
            _exit(0);
        }
        if (pid > 0) scratch_child_add(pid); /* a signal to the parent stops the workers too */
        scratch_release(&held);
        if (pid < 0) {
            cli_error("fork failed: %s", strerror(errno));
            break;
        }
        pids[w] = pid;
    }
    close(fds[1]);
    long long t0 = cli_now_ns();
    res->reports = calloc((size_t)jobs->n, sizeof *res->reports);
    res->have = calloc((size_t)jobs->n, sizeof *res->have);
    Report rep;
    ssize_t got;
    while ((got = read(fds[0], &rep, sizeof rep)) == (ssize_t)sizeof rep) {
        if (rep.job < 0 || rep.job >= jobs->n || res->have[rep.job]) continue;
        res->have[rep.job] = true;
        res->reports[rep.job] = rep;
        res->done++;
        if (rep.rc != EXIT_OK)
            res->failed++;
        else if (rep.outcome == BUILD_MISS)
            res->built++;
        else
            res->hits++;
        const BuildJob *j = &jobs->v[rep.job];
        if (!cli->is_tty && !cli->json && cli->verbosity >= 0)
            printf("[%d/%d] %-12s %s %s%s%s (%.0f ms)\n", res->done, jobs->n,
                   rep.rc != EXIT_OK           ? "FAILED"
                   : rep.outcome == BUILD_MISS ? "built"
                                               : "hit",
                   rep.key, j->config, j->label[0] ? " " : "", j->label, rep.ms);
        progress(cli, res->done, jobs->n, res->hits, res->built, res->failed, (double)(cli_now_ns() - t0) / 1e9);
    }
    close(fds[0]);
    for (long w = 0; w < nworkers; w++) {
        int st;
        if (pids[w] > 0 && waitpid(pids[w], &st, 0) == pids[w] && !(WIFEXITED(st) && WEXITSTATUS(st) == 0))
            res->crashed++;
        scratch_child_del(pids[w]);
    }
    res->secs = (double)(cli_now_ns() - t0) / 1e9;
    free(pids);
    munmap(next, sizeof *next);
    return EXIT_OK;
}

/* Print each failure and the summary; the exit code. */
static int summarize(const Cli *cli, const char *file, const JobList *jobs, const Results *res, long nworkers) {
    int missing = jobs->n - res->done, rc = EXIT_OK;
    for (int i = 0; i < jobs->n; i++) {
        if (!res->have[i] || res->reports[i].rc == EXIT_OK) continue;
        const BuildJob *j = &jobs->v[i];
        fprintf(stderr, "%s:%d: error: build failed: %s %s (mode %d)\n%s", file, j->loc.line, j->config, j->label,
                j->mode, res->reports[i].msg);
        if (res->reports[i].rc == EXIT_SYSTEM || rc == EXIT_SYSTEM)
            rc = EXIT_SYSTEM;
        else
            rc = EXIT_INPUT;
    }
    if (missing || res->crashed) {
        cli_error("%d job%s not finished (%d worker%s died)", missing, missing == 1 ? "" : "s", res->crashed,
                  res->crashed == 1 ? "" : "s");
        rc = EXIT_SYSTEM;
    }
    return rc;
}

static void print_totals(const Cli *cli, const JobList *jobs, const Results *res, long nworkers) {
    int missing = jobs->n - res->done;
    if (cli->json)
        cli_json_print(stdout, cli_json_obj("jobs", json_integer(jobs->n), "built", json_integer(res->built), "hits",
                                            json_integer(res->hits), "failed", json_integer(res->failed), "unfinished",
                                            json_integer(missing), "seconds", cli_json_real(res->secs, 3), NULL));
    else if (cli->verbosity >= 0)
        fprintf(stderr, "prewarm: %d programs: %d built, %d already cached, %d failed in %.1f s (%ld workers)\n",
                jobs->n, res->built, res->hits, res->failed + missing, res->secs, nworkers);
}

static void print_package(void *ctx, int idx, const char *path, bool written) {
    const Cli *cli = ctx;
    (void)idx;
    if (cli->verbosity >= 0 && !cli->json)
        fprintf(stderr, "prewarm: package %s%s\n", path, written ? "" : " (already there)");
}

/* --packages DIR: a package of every program that built or hit, in the
 * parent once the workers are done (a worker's report holds only the key). */
static int prewarm_packages(const Cli *cli, const TemplatePath *tp, const JobList *jobs, const Results *res,
                            const char *dir) {
    CacheKey *keys = calloc((size_t)jobs->n + 1, sizeof *keys);
    const CacheKey **have = calloc((size_t)jobs->n + 1, sizeof *have);
    if (!keys || !have) {
        free(keys), free(have);
        cli_error("out of memory");
        return EXIT_SYSTEM;
    }
    for (int i = 0; i < jobs->n; i++)
        if (res->have[i] && res->reports[i].rc == EXIT_OK && cache_key_parse(res->reports[i].key, &keys[i]) == 0)
            have[i] = &keys[i];
    DiagSink d;
    diag_init(&d);
    int rc = packages_leave(tp, jobs->v, have, jobs->n, dir, print_package, (void *)cli, &d);
    int drc = cli_report(cli, &d);
    diag_free(&d);
    free(keys);
    free(have);
    return rc != EXIT_OK ? rc : drc;
}

/* Build the manifest's jobs (parsed into m) with nworkers workers. */
static int prewarm_jobs(const Cli *cli, const Args *a, const TemplatePath *tp, const char *file, Manifest *m,
                        long nworkers) {
    JobList *jobs = &m->jobs;
    if (nworkers > jobs->n) nworkers = jobs->n;
    bool use_remote = false;
    int rc;
    if ((rc = remote_for_workers(cli, &use_remote)) != EXIT_OK) return rc;
    int *order = calloc((size_t)jobs->n, sizeof *order); /* the jobs in the order workers take them */
    if (!order) {
        cli_error("out of memory");
        return EXIT_SYSTEM;
    }
    if ((rc = build_order(cli, tp, jobs, order)) != EXIT_OK) {
        free(order);
        return rc;
    }
    Results res = {0};
    if ((rc = run_workers(cli, tp, jobs, order, nworkers, verify_policy(a), use_remote, &res)) != EXIT_OK) {
        free(order);
        return rc;
    }
    rc = summarize(cli, file, jobs, &res, nworkers);
    remember_lines(cli, tp, m->lines, m->nlines, m->line_first, jobs, res.reports, res.have);
    if (args_get(a, "packages")) {
        int prc = prewarm_packages(cli, tp, jobs, &res, args_get(a, "packages"));
        if (rc == EXIT_OK) rc = prc;
    }
    print_totals(cli, jobs, &res, nworkers);
    free(res.reports);
    free(res.have);
    free(order);
    return rc;
}

static int prewarm_run(Cli *cli, int argc, char **argv) {
    Args a;
    if (!args_parse("prewarm", prewarm_opts, argc - 1, argv + 1, false, &a)) return EXIT_USAGE;
    if (!verify_flags_ok("prewarm", &a)) {
        args_free(&a);
        return EXIT_USAGE;
    }
    long nworkers = os_cpu_count();
    bool stale = args_flag(&a, "stale");
    if (a.npos != (stale ? 0 : 1)) {
        cli_usage_error("prewarm", stale ? "--stale takes no MANIFEST" : "expected one MANIFEST");
        args_free(&a);
        return EXIT_USAGE;
    }
    if (args_get(&a, "jobs") && !args_int("prewarm", "jobs", args_get(&a, "jobs"), 1, 256, &nworkers)) {
        args_free(&a);
        return EXIT_USAGE;
    }
    size_t len = 0;
    char *text = stale ? strdup("") : cli_read_file(a.pos[0], &len);
    if (!text) {
        args_free(&a);
        return EXIT_SYSTEM;
    }
    TemplatePath tp;
    if (tpath_init(&tp, cli->template_dirs) != 0) {
        cli_error("out of memory");
        free(text);
        args_free(&a);
        return EXIT_SYSTEM;
    }
    DiagSink d;
    diag_init(&d);
    const char *file = stale ? "(stale entries)" : diag_add_source(&d, a.pos[0], text, len);
    Manifest m = {0};
    int rc = read_manifest(text, file, &tp, &m, &d);
    if (rc != EXIT_OK) goto out;
    if (diag_failed(&d)) {
        rc = cli_report(cli, &d);
        goto out;
    }
    if (stale && (rc = stale_recipes(cli, &m.jobs)) != EXIT_OK) goto out;
    if (stale && m.jobs.n == 0) {
        if (cli->verbosity >= 0) fprintf(stderr, "prewarm: no stale entries\n");
        rc = EXIT_OK;
        goto out;
    }
    if (m.jobs.n == 0) {
        cli_error("%s: the manifest lists nothing to build", a.pos[0]);
        rc = EXIT_INPUT;
        goto out;
    }
    rc = prewarm_jobs(cli, &a, &tp, file, &m, nworkers);
out:
    manifest_free(&m);
    diag_free(&d);
    tpath_free(&tp);
    free(text);
    args_free(&a);
    return rc;
}

const Command cmd_prewarm = {
    "prewarm", "build everything a manifest lists into the cache", prewarm_run, prewarm_help, false, true};
