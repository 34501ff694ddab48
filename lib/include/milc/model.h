/* model.h — a loaded runtime model together with whatever keeps its bytes
 * alive: a file mapping, or a cache hit (an LMDB read transaction). */
#ifndef MILC_LIB_MODEL_H
#define MILC_LIB_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "milc/lib.h"
#include "milc/store.h"
#include "milc/rt.h"

/* How to load: threads or a shared pool, checksums, and the memory limit. */
typedef struct ModelLoad {
    int nthreads;        /* <= 0: every CPU (ignored with pool) */
    RtPool *pool;        /* run on this pool (a chain's), NULL: its own */
    bool verify;         /* recompute checksums (a file always is) */
    bool describe;       /* check everything, allocate nothing to run yet
                            (RT_LOAD_DESCRIBE): model_realize before a run */
    uint64_t max_memory; /* the most arena and scratch it may take; 0: no limit */
} ModelLoad;

typedef struct LoadedModel {
    RtModel *model;
    void *map; /* file form: the file read into memory (owned) */
    size_t map_len;
    Store *store;    /* cache form: the store the entry came from */
    StoreEntry *hit; /* its entry (LMDB: the read transaction the sections live in) */
    RtSection *secs;
    int nsecs;
    ModelLoad how;
    char what[64]; /* for messages: the file or key */
} LoadedModel;

/* Map an artifact file and load it (checksums verified).  0, or EXIT_* with a
 * message printed. */
int model_load_file(LoadedModel *lm, const char *path, const ModelLoad *how);
/* Load from a store's entry; lm takes ownership of hit (store_released by
 * model_free, before the store closes). */
int model_load_hit(LoadedModel *lm, Store *s, StoreEntry *hit, const ModelLoad *how, const char *what);
/* A model loaded with how.describe: now allocate what it runs in. */
int model_realize(LoadedModel *lm);
void model_free(LoadedModel *lm);

#endif
