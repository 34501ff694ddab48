/* model.c — loading artifacts (file or cache) and running them on .npy files. */
#include <stdio.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "milc/lib.h"
#include "milc/model.h"
#include "milc/half.h"
#include "milc/npy.h"
#include "milc/osfile.h"

enum { MAX_SECTIONS = 1 << 16 };

/* rt_model_load as lm->how says: MILC_OK, or the exit code of its error
 * (printed, naming lm->what). */
static int load_sections(LoadedModel *lm, bool describe) {
    char err[512];
    const ModelLoad *h = &lm->how;
    RtLoadOptions o = {.nthreads = h->nthreads,
                       .pool = h->pool,
                       .max_arena = h->max_memory,
                       .cpu = (RtCpu)lib_cpu(),
                       .flags = (h->verify ? RT_LOAD_VERIFY : 0) | (describe ? RT_LOAD_DESCRIBE : 0)};
    int r = rt_model_load(&lm->model, lm->secs, lm->nsecs, &o, err, sizeof err);
    if (r == 0) return MILC_OK;
    if (r == RT_ENOMEM && strstr(err, "the limit of")) {
        lib_error("%s: %s (--max-memory)", lm->what, err);
        return MILC_E_INPUT;
    }
    if (lm->map)
        lib_error("%s: not a valid artifact: %s", lm->what, err);
    else
        lib_error("cached artifact %s does not load: %s", lm->what, err);
    return r == RT_ENOMEM || r == RT_ESYS || r == RT_EIO ? MILC_E_SYSTEM : MILC_E_INPUT;
}

int model_load_file(LoadedModel *lm, const char *path, const ModelLoad *how) {
    memset(lm, 0, sizeof *lm);
    lm->how = *how;
    lm->how.verify = true;
    snprintf(lm->what, sizeof lm->what, "%s", path);
    /* Read into owned memory, not mapped: an artifact truncated while it
     * loads is an I/O error, never a SIGBUS. */
    char oerr[600];
    int orc = os_read_file(path, 0, &lm->map, &lm->map_len, oerr, sizeof oerr);
    if (orc) {
        lib_error("%s", oerr);
        return orc == -EINVAL ? MILC_E_INPUT : MILC_E_SYSTEM;
    }
    if (lm->map_len == 0) {
        lib_error("'%s' is empty, not an artifact", path);
        model_free(lm);
        return MILC_E_INPUT;
    }
    lm->secs = calloc(MAX_SECTIONS, sizeof(RtSection));
    if (!lm->secs) {
        model_free(lm);
        lib_error("out of memory");
        return MILC_E_SYSTEM;
    }
    char err[512];
    if (rt_artifact_split(lm->map, lm->map_len, lm->secs, MAX_SECTIONS, &lm->nsecs, err, sizeof err) != 0) {
        lib_error("%s: not a valid artifact: %s", path, err);
        model_free(lm);
        return MILC_E_INPUT;
    }
    int rc = load_sections(lm, how->describe);
    if (rc != MILC_OK) model_free(lm);
    return rc;
}

int model_load_hit(LoadedModel *lm, Store *s, StoreEntry *hit, const ModelLoad *how, const char *what) {
    memset(lm, 0, sizeof *lm);
    lm->store = s, lm->hit = hit;
    lm->how = *how;
    snprintf(lm->what, sizeof lm->what, "%s", what);
    const CacheSection *cs = hit->secs;
    int n = hit->nsecs;
    lm->secs = calloc((size_t)n + 1, sizeof(RtSection));
    if (!lm->secs) {
        model_free(lm);
        lib_error("out of memory");
        return MILC_E_SYSTEM;
    }
    for (int i = 0; i < n; i++) lm->secs[i] = (RtSection){0, 0, cs[i].data, (size_t)cs[i].size};
    lm->nsecs = n;
    int rc = load_sections(lm, how->describe);
    if (rc == MILC_E_SYSTEM) rc = MILC_E_INPUT; /* a cached artifact that does not load is its bytes' fault */
    if (rc != MILC_OK) model_free(lm);
    return rc;
}

int model_realize(LoadedModel *lm) {
    if (!lm->how.describe) return MILC_OK;
    rt_model_free(lm->model);
    lm->model = NULL;
    lm->how.describe = false;
    lm->how.verify = false; /* checked by the describing load */
    return load_sections(lm, false);
}

void model_free(LoadedModel *lm) {
    if (lm->model) rt_model_free(lm->model);
    if (lm->hit) store_release(lm->store, lm->hit);
    free(lm->map);
    free(lm->secs);
    memset(lm, 0, sizeof *lm);
}
