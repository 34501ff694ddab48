/* jobs.h — expanding a build request (a config, template parameters with
 * comma lists, a mode list, --chunk K) into one job per program, as
 * `milc build` and each line of a prewarm manifest do. */
#ifndef MILC_LIB_JOBS_H
#define MILC_LIB_JOBS_H

#include "milc/lib.h"
#include "milc/diag.h"
#include "milc/pipeline.h"

/* The template search path, split from a ':'-separated list of directories. */
typedef struct TemplatePath {
    GenSearchPath sp;
    char *buf;
    const char **dirs;
} TemplatePath;
/* 0, or -1 out of memory. */
int tpath_init(TemplatePath *tp, const char *dirs);
void tpath_free(TemplatePath *tp);

/* Option and parameter names compare with '-' and '_' as one character. */
bool lib_name_eq(const char *a, const char *b);

typedef struct BuildJob {
    char *config;  /* template or preset name */
    char *weights; /* NULL = random:0 */
    int mode;
    int nparams;
    char **names, **values; /* template parameters, applied in order */
    char label[256];        /* what distinguishes this job, for output */
    SrcLoc loc;             /* manifest line, or {0} */
} BuildJob;

/* One chunk of a split model: layers [first, first + layers), and the bytes
 * of its weight file (0 when the depth was given, not chosen). */
typedef struct JobChunk {
    long first, layers;
    uint64_t weight_bytes;
} JobChunk;

/* How one parameter combination was cut into chunks (--chunk K or auto). */
typedef struct JobSplit {
    char label[256]; /* the combination ("seq=8"), "" when the request has one */
    bool chosen;     /* --chunk auto: the depths were chosen from the weights */
    JobChunk *v;
    int n;
} JobSplit;

typedef struct JobList {
    BuildJob *v;
    int n, cap;
    JobSplit *splits; /* one per parameter combination of a --chunk request */
    int nsplits;
} JobList;

/* JobSpec.chunk for `--chunk auto`: every chunk as deep as its weights allow
 * under JobSpec.max_chunk_bytes. */
enum { JOBS_CHUNK_AUTO = -1 };
/* The ANE's program ceiling `--chunk auto` sizes against unless told: 1 GiB
 * of weights per program. */
#define JOBS_DEFAULT_MAX_CHUNK_BYTES (UINT64_C(1) << 30)

typedef struct JobSpec {
    const char *config; /* NULL = gpt2 */
    const char *weights;
    const char *modes;        /* "2", "0,2" (RT_MODE_* numbers); NULL = RT_MODE_DEFAULT */
    long chunk;               /* 0 = one program with the given layers; K; JOBS_CHUNK_AUTO */
    uint64_t max_chunk_bytes; /* JOBS_CHUNK_AUTO's ceiling; 0 = JOBS_DEFAULT_MAX_CHUNK_BYTES */
    bool whole;               /* also the embedding and the head (--part embed, head) */
    const MilcParam *extra;   /* template parameters, values may be comma lists */
    int nextra;
    SrcLoc loc; /* where errors point (a manifest line), or {0} */
} JobSpec;

/* The spec's template or preset name: its config, else "gpt2". */
const char *jobs_config(const JobSpec *spec);

/* Append the jobs of spec to out.  Checks every parameter name and value
 * against the template now, so a bad request fails before any build.  A
 * --chunk request also appends its split per parameter combination to
 * out->splits.  With JOBS_CHUNK_AUTO, each chunk takes as many layers as
 * keep its weight file within the ceiling (greedy from the first layer, so
 * the last chunk may be shallower); a layer that alone exceeds it is an
 * error.  0, or -1 with diagnostics in d. */
int jobs_expand(const TemplatePath *tp, const JobSpec *spec, JobList *out, DiagSink *d);
void jobs_free(JobList *jl);

/* Append a job by hand (a stored recipe): the strings are copied.  NULL if
 * out of memory.  Then jobs_param for each parameter, in order. */
BuildJob *jobs_push(JobList *jl, const char *config, const char *weights, int mode);
void jobs_param(BuildJob *j, const char *name, const char *value);

/* The job's resolved generator config (caller frees), NULL with diagnostics. */
GenConfig *job_config(const TemplatePath *tp, const BuildJob *j, DiagSink *d);

#endif
