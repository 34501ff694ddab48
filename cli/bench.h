/* bench.h — the pieces of `milc bench`: a program family's template
 * parameters, building and loading a whole model's chunks as one chain that
 * runs like a forward pass, the fresh-process child, and the statistics and
 * reports (table, JSON, CSV; the schema is cli/BENCH.md). */
#ifndef MILC_CLI_BENCH_H
#define MILC_CLI_BENCH_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "cli.h"
#include "milc/jobs.h"
#include "milc/backend.h"
#include "milc/estimate.h"
#include "genopts.h"
#include "json.h"
#include "milc/chain.h"
#include "milc/model.h"
#include "milc/pipeline.h"
#include "milc/whole.h"

/* ---- a program family --------------------------------------------------- */

/* A config (template or preset) plus template parameters in the order they
 * are applied: a later value of a name wins, so a variant (decode, a sweep
 * point) is the base with a few more appended.  Strings are owned (strdup). */
typedef struct BenchParams {
    char *config;  /* template or preset name */
    char *weights; /* NULL = random:0 */
    MilcParam *v;  /* name/value pairs */
    int n, cap;
} BenchParams;

int bparams_init(BenchParams *p, const char *config, const char *weights); /* 0 or -1 (ENOMEM) */
int bparams_add(BenchParams *p, const char *name, const char *value);      /* 0 or -1 */
int bparams_copy(BenchParams *dst, const BenchParams *src);                /* 0 or -1 */
void bparams_free(BenchParams *p);

/* ---- building and running a chain --------------------------------------- */

/* Build (or find) every program of p at mode in c, the whole model cut into
 * chunks of `chunk` layers (chunk > 0) or one program with the params' own
 * layers; verify_hits (BUILD_VERIFY_*) says how a hit is checked, as in
 * `milc build`.  EXIT_OK, or EXIT_INPUT with diagnostics in d, or
 * EXIT_SYSTEM with a message printed.  The chain is milc/chain.h's. */
int bench_build(Cache *c, const TemplatePath *tp, const BenchParams *p, int mode, long chunk, int verify_hits,
                const char *tmp_root, ChainBuilt *out, DiagSink *d);

/* The hidden fresh-process measurement: `milc bench --child ttft ...` (see
 * cmd_bench.c).  Prints one JSON line on stdout. */
int bench_child(Cli *cli, int argc, char **argv);

/* "1,2,4" into out[]: integers within [lo, hi], at most BENCH_MAX_POINTS;
 * a usage error (printed) otherwise.  opt names the option in the message. */
bool bench_parse_list(const char *opt, const char *s, long lo, long hi, long *out, int *n);

/* --modes into out[] (at most RT_NMODES): compile modes, none twice; without
 * it every mode of the mode table, in number order.  A usage error of cmd
 * (printed) otherwise. */
bool bench_parse_modes(const char *cmd, const Args *a, long *out, int *n);
/* Every compile mode, "0,1,2", into buf. */
const char *bench_all_modes(char *buf, size_t n);

/* ---- statistics --------------------------------------------------------- */

typedef struct BenchStat {
    double med, min, max; /* NAN when n == 0 */
    int n;
} BenchStat;
BenchStat bench_stat(const double *v, int n);

typedef struct BenchPoint {
    double work;         /* layers or tokens per dispatch */
    BenchStat ms;        /* time per forward of the program */
    double dispatches;   /* per forward */
    double weight_bytes; /* the program's weights */
    double stream_ms;    /* weight_bytes ÷ the bandwidth of those bytes, read right after: the floor of a forward */
} BenchPoint;

enum { BENCH_MAX_POINTS = 32 };

/* The per-dispatch overhead measured directly (bench_dispatch.c). */
typedef struct BenchDispatch {
    BenchStat us;       /* µs per dispatch: (per-op forward - bonded forward) / extra dispatches, per pair */
    int bonded, per_op; /* dispatches of one forward each way */
    int pairs;
} BenchDispatch;

/* The decode chunks of p (chunks of `chunk` layers) compiled in mode 0 with
 * the same ops in both variants, weights written under dir, timed bonded vs
 * one dispatch per op in `pairs` alternated pairs.  EXIT_OK, EXIT_INPUT with
 * diagnostics in d, or EXIT_SYSTEM with a message printed. */
int bench_dispatch(const TemplatePath *tp, const BenchParams *p, long chunk, int nthreads, const char *dir, int pairs,
                   BenchDispatch *out, DiagSink *d);

/* Generate one job's program (weights under dir), check it and compile it
 * with bo (model_path set to dir) into *art; st may be NULL.  0, or -1 with
 * diagnostics in d. */
int bench_compile_job(const TemplatePath *tp, const BuildJob *j, const char *dir, const BackendOptions *bo,
                      RtArtifact **art, BackendStats *st, DiagSink *d);

/* Bytes per second nthreads threads read from the ranges together (the best
 * of reps passes); 0 if it cannot be measured. */
double bench_bandwidth(const ChainRange *r, int nr, int nthreads, int reps);

/* time = a + b·work over the points' medians, by least squares. */
typedef struct BenchSweep {
    const char *work_name; /* "layers" or "tokens" */
    int fixed;             /* the other dimension: seq of the depth sweep, layers of the token sweep */
    BenchPoint pts[BENCH_MAX_POINTS];
    int npts;
    bool has_fit;          /* at least two distinct work values */
    double a_ms, b_ms, r2; /* the line (= fit.a, fit.b, fit.r2) */
    EstFit fit;            /* with the flags that say when a_ms is not a cost, and the hinge */
} BenchSweep;
void bench_fit(BenchSweep *s);

/* ---- results ------------------------------------------------------------ */

typedef struct BenchModeResult {
    int mode;
    BenchStat compile_ms; /* cold: generate+check+compile+store of every chunk */
    BenchStat load_ms;    /* fresh process, warm cache: rt_model_load of every chunk */
    /* Where a cached ttft goes: spawn → command entry, cache open, lookup
     * (+ checksum) of every chunk, and the first forward (load_ms above). */
    BenchStat cached_start_ms, cached_open_ms, cached_lookup_ms, cached_run_ms;
    BenchStat ttft_cold_ms;         /* spawn → first prefill output, empty cache */
    BenchStat ttft_cached_ms;       /* spawn → first prefill output, warm cache */
    BenchStat prefill_ms;           /* steady state, in process */
    BenchStat ttft_pair;            /* each cached run ÷ the steady forward taken right after it */
    BenchStat decode_ms;            /* one token through every chunk */
    BenchStat build_warm_ms;        /* whole `milc build` process on the warm cache */
    BenchStat rss_cached, rss_cold; /* peak RSS bytes of the fresh processes */
    /* The cold build's parts (compile_ms split), and what the disk under the
     * cache takes to write and fdatasync as many bytes, measured beside them. */
    BenchStat cold_generate_ms, cold_check_ms, cold_lower_ms, cold_store_ms;
    double disk_write_ms;
    uint64_t artifact_bytes;
    double prefill_dispatches, decode_dispatches;       /* per forward / per token */
    double decode_ops, decode_weight_bytes, decode_gbs; /* plan ops per token; weights; their read bandwidth */
    bool has_sweeps;
    BenchSweep depth, tokens;
} BenchModeResult;

typedef struct BenchReport {
    const char *config;
    long layers, chunk, nchunks, seq, ctx, depth_seq;
    int repeat, cold_repeat, threads;
    int verify; /* how hits are checked: BUILD_VERIFY_* (pipeline.h), as `milc build` */
    BenchModeResult modes[RT_NMODES];
    int nmodes;
    bool has_dispatch;
    BenchDispatch dispatch;                   /* measured directly, once per run */
    const struct BenchProjection *projection; /* --project: the ANE estimate, or NULL */
    const WholeResult *whole;                 /* --whole: embedding → chunks → head, or NULL */
    int whole_mode;
} BenchReport;

/* ---- the ANE projection (an ESTIMATE; bench_project.c) ------------------ */

typedef struct BenchProjection {
    EstChip chip;
    char chip_path[4096];
    EstModel model;
    int prompt, ctx;
    int modes[RT_NMODES], nmodes;
    int depths[BENCH_MAX_POINTS], ndepths;
    EstPlan plan[RT_NMODES][BENCH_MAX_POINTS];     /* [mode][depth] */
    EstResult res[RT_NMODES][BENCH_MAX_POINTS][2]; /* [mode][depth][EST_DIRECT, EST_COREML] */
} BenchProjection;

/* The chip file a --chip argument names: a bare NAME is milc's
 * data/ane/NAME.json (NULL: m4-max), anything with '/' or ".json" a path. */
const char *bench_chip_path(const char *arg, char *buf, size_t len);
/* Read and check a chip file.  EXIT_OK, or EXIT_INPUT / EXIT_SYSTEM with a
 * message printed that names the file and the field. */
int bench_chip_load(const char *path, EstChip *c);
/* The per-layer plan of decode's family: one decode layer compiled in mode 1
 * (weights under dir): its MIL ops, weight bytes, and dim for attention.
 * EXIT_OK, EXIT_INPUT with diagnostics in d, or EXIT_SYSTEM. */
int bench_project_model(const TemplatePath *tp, const BenchParams *decode, const char *dir, EstModel *m, DiagSink *d);
/* Fill plan and res for every mode and depth (depths above the model's are skipped). */
void bench_project_run(BenchProjection *p);
void bench_project_table(FILE *f, const BenchProjection *p);
json_t *bench_project_json(const BenchProjection *p); /* one JSON object, a new reference */

/* --whole's figures (bench_whole.c): Orion's table on this backend. */
void bench_whole_table(FILE *f, const BenchReport *r);
json_t *bench_whole_json(const BenchReport *r); /* a new reference; null without --whole */

void bench_print_table(FILE *f, const BenchReport *r);
void bench_write_json(FILE *f, const BenchReport *r);
void bench_write_csv(FILE *f, const BenchReport *r);

#endif
