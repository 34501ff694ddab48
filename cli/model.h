/* model.h — a loaded runtime model together with whatever keeps its bytes
 * alive: a file mapping, or a cache hit (an LMDB read transaction). */
#ifndef MILC_CLI_MODEL_H
#define MILC_CLI_MODEL_H

#include "milc/cache.h"
#include "milc/rt.h"

typedef struct LoadedModel {
    RtModel *model;
    void *map; /* file form: the file read into memory (owned) */
    size_t map_len;
    CacheHit *hit; /* cache form: the read transaction the sections live in */
    RtSection *secs;
    int nsecs;
} LoadedModel;

/* Map an artifact file and load it (checksums verified).  0, or EXIT_* with a
 * message printed. */
int model_load_file(LoadedModel *lm, const char *path, int nthreads);
/* Load from a cache hit; lm takes ownership of hit (released by model_free).
 * pool: run on that thread pool (shared by a chain of models), NULL: its own
 * of nthreads. */
int model_load_hit(LoadedModel *lm, CacheHit *hit, int nthreads, RtPool *pool, int verify, const char *what);
void model_free(LoadedModel *lm);

/* Bind --input NAME=FILE.npy pairs to the model's inputs, allocate outputs,
 * run, write DIR/NAME.npy for every output.  Prints what it does. */
int model_run_npy(LoadedModel *lm, const char *const *inputs, int ninputs, const char *outdir, int json,
                  int repeat, int quiet);

#endif
