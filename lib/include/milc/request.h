/* request.h — building a whole request (`milc build`'s options, or a bench
 * chain), with the request remembered in a cache note so that repeating it
 * reads no template at all. */
#ifndef MILC_LIB_REQUEST_H
#define MILC_LIB_REQUEST_H

#include "milc/jobs.h"

typedef struct RequestOptions {
    int verify_hits;      /* BUILD_VERIFY_* */
    const char *tmp_root; /* scratch directories (the cache directory) */
    const JobList *jobs;  /* spec already expanded by the caller, or NULL */
    uint64_t max_memory;  /* --max-memory (BuildRequest.max_memory) */
    Store *remote;        /* the shared tier for the builds, or NULL */
    int overlap;          /* 1: each program made and stored in turn; 2: one stored
                             while the next is made; 0: 2 on 2+ CPUs */
    /* Non-NULL: called once, before the first result, with the request's
     * splits (JobList.splits: how each parameter combination was cut into
     * chunks).  From the note when it holds them, so a repeated `--chunk
     * auto` reports its split without reading a template. */
    void (*on_split)(void *ctx, const JobList *splits);
} RequestOptions;

/* Called once per program, in job order, after every program is built or
 * found.  label: what tells the job apart (or its config name). */
typedef void (*RequestResultFn)(void *ctx, int idx, const char *label, const BuildResult *r);

/* Build or find every program of spec and report each to fn.  First the
 * request's note: when the template path's files and the request are as they
 * were when it was written, its artifact keys are looked up directly (a
 * direct hit each; the first's lookup time includes the note's).  Otherwise
 * — or when any of those entries is gone, damaged or unusable — the jobs
 * are expanded and built one by one (pipeline_build), and the note is
 * written for next time.  Returns MILC_OK, MILC_E_INPUT with diagnostics in d,
 * or MILC_E_SYSTEM with a message printed; on failure fn has seen nothing. */
int build_request(Store *s, const TemplatePath *tp, const JobSpec *spec, const RequestOptions *o, RequestResultFn fn,
                  void *ctx, DiagSink *d);

/* Write spec's note from its jobs (all n of them, in order) and their
 * artifact keys, built elsewhere (prewarm's workers) from weights of digest
 * wdig (BuildResult.wdig), and a --chunk request's splits (spec expanded
 * again).  Best effort. */
void request_remember(Store *s, const TemplatePath *tp, const JobSpec *spec, const BuildJob *jobs, int n,
                      const CacheKey *keys, const uint8_t wdig[16]);

#endif
