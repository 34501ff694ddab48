/* bench_dispatch.c — the per-dispatch overhead, measured directly as
 * tests/backend/bench_backend does: the decode chunks compiled once in mode 0
 * with the bonded program's ops in both variants (BackendOptions.same_ops),
 * then run bonded (one dispatch per chunk) and one dispatch per op, forward
 * by forward in alternation; the median difference over the extra dispatches.
 * Same ops, same data, same seconds: what is left is the dispatch. */
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "milc/jobs.h"
#include "milc/mil.h"

int bench_compile_job(const TemplatePath *tp, const BuildJob *j, const char *dir, const BackendOptions *bo,
                      RtArtifact **art, BackendStats *st, DiagSink *d) {
    GenConfig *gc = job_config(tp, j, d);
    if (!gc) return -1;
    GenResult gr;
    int rc = gen_generate(gc, &(GenOptions){.weights = j->weights, .compile_mode = bo->mode}, dir, &gr, d);
    gen_config_free(gc);
    if (rc != 0) return -1;
    Arena a;
    arena_init(&a);
    IrProgram *p = mil_parse(&a, d, "model.mil", gr.mil, gr.mil_len);
    BackendOptions o = *bo;
    o.model_path = dir;
    rc =
        p && mil_check(p, &(MilCheckOptions){.model_path = dir}, d) && backend_compile(p, &o, art, st, d) == 0 ? 0 : -1;
    arena_free(&a);
    gen_result_free(&gr);
    return rc;
}

static int compile_all(const TemplatePath *tp, const BenchParams *p, long chunk, const char *dir, RtArtifact ***arts,
                       int *n, DiagSink *d) {
    JobList jobs = {0};
    JobSpec spec = {
        .config = p->config, .weights = p->weights, .modes = "0", .chunk = chunk, .extra = p->v, .nextra = p->n};
    *arts = NULL, *n = 0;
    if (jobs_expand(tp, &spec, &jobs, d) != 0) {
        jobs_free(&jobs);
        return EXIT_INPUT;
    }
    *arts = calloc((size_t)jobs.n + 1, sizeof **arts);
    int rc = *arts ? EXIT_OK : EXIT_SYSTEM;
    for (int i = 0; i < jobs.n && rc == EXIT_OK; i++) {
        char sub[4200];
        snprintf(sub, sizeof sub, "%s/dispatch-%d", dir, i);
        BackendOptions bo = {.mode = 0, .same_ops = true};
        if (bench_compile_job(tp, &jobs.v[i], sub, &bo, &(*arts)[i], NULL, d) != 0)
            rc = diag_failed(d) ? EXIT_INPUT : EXIT_SYSTEM;
        else
            *n = i + 1;
    }
    jobs_free(&jobs);
    if (rc == EXIT_SYSTEM && !diag_failed(d)) cli_error("out of memory");
    return rc;
}

int bench_dispatch(const TemplatePath *tp, const BenchParams *p, long chunk, int nthreads, const char *dir, int pairs,
                   BenchDispatch *out, DiagSink *d) {
    memset(out, 0, sizeof *out);
    RtArtifact **arts;
    int n, rc = compile_all(tp, p, chunk, dir, &arts, &n, d);
    if (rc != EXIT_OK) {
        for (int i = 0; i < n; i++) rt_artifact_free(arts[i]);
        free(arts);
        return rc;
    }
    Chain ch;
    if ((rc = chain_adopt(&ch, arts, n, nthreads)) != EXIT_OK) return rc;
    uint64_t nb = 0, np = 0;
    double t, *v = malloc(sizeof *v * (size_t)(pairs > 0 ? pairs : 1));
    if (!v) {
        chain_free(&ch);
        cli_error("out of memory");
        return EXIT_SYSTEM;
    }
    /* One untimed forward of each kind first: the weights touched, the pool awake. */
    rc = chain_run(&ch, &t, &nb);
    ch.run_flags = RT_RUN_NONBONDED;
    if (rc == EXIT_OK) rc = chain_run(&ch, &t, &np);
    for (int i = 0; i < pairs && rc == EXIT_OK && np > nb; i++) {
        double tb, tn;
        ch.run_flags = 0;
        rc = chain_run(&ch, &tb, NULL);
        ch.run_flags = RT_RUN_NONBONDED;
        if (rc == EXIT_OK) rc = chain_run(&ch, &tn, NULL);
        v[i] = (tn - tb) / (double)(np - nb) * 1e3; /* ms per extra dispatch -> µs */
    }
    if (rc == EXIT_OK) {
        out->us = bench_stat(v, np > nb ? pairs : 0);
        out->bonded = (int)nb, out->per_op = (int)np, out->pairs = pairs;
    }
    free(v);
    chain_free(&ch);
    return rc;
}
