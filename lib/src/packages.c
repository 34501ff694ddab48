/* packages.c — a request's programs as Core ML packages beside the cache. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "milc/arena.h"
#include "milc/mil.h"
#include "milc/pkg.h"
#include "milc/packages.h"

/* One job's package: generated into a scratch folder inside dir (same file
 * system: the weights are copied once, by the kernel), read back and
 * checked as any package milc writes, then written. */
static int package_one(const TemplatePath *tp, const BuildJob *j, const GenWeights *src, const char *dir,
                       const char *path, DiagSink *d) {
    char scratch[4200];
    if (lib_scratch_make(dir, ".milc-package", scratch, sizeof scratch) != 0) {
        diag_syserror(d, (SrcLoc){0}, "cannot create a scratch folder in '%s': %s", dir, strerror(errno));
        return MILC_E_SYSTEM;
    }
    GenConfig *cfg = job_config(tp, j, d);
    bool ok =
        cfg && gen_emit(cfg, &(GenOptions){.weights = j->weights, .source = src, .compile_mode = -1, .scratch = true},
                        scratch, d) == 0;
    gen_config_free(cfg);
    Arena a;
    arena_init(&a);
    PkgProgram pp;
    ok = ok && pkg_load(&a, d, scratch, NULL, &pp) == 0;
    ok = ok && mil_check(pp.prog, &(MilCheckOptions){.target = MIL_TARGET_CPU, .model_path = pp.model_dir}, d);
    ok = ok && pkg_write(pp.prog, pp.model_dir, PKG_OUT_MLPACKAGE, path, d) == 0;
    arena_free(&a);
    lib_scratch_remove(scratch);
    return ok ? MILC_OK : d->system_errors ? MILC_E_SYSTEM : MILC_E_INPUT;
}

/* The weight source of a job, opened once per distinct string. */
typedef struct Source {
    char *name;
    GenWeights *w;
} Source;

static int source_for(Source *s, const char *weights, DiagSink *d) {
    const char *want = weights ? weights : "random:0";
    if (s->w && strcmp(s->name, want) == 0) return 0;
    gen_weights_close(s->w);
    free(s->name);
    s->w = NULL;
    if (!(s->name = strdup(want))) return -1;
    return gen_weights_open(weights, &s->w, d);
}

int packages_leave(const TemplatePath *tp, const BuildJob *jobs, const CacheKey *const *keys, int n, const char *dir,
                   PackageFn fn, void *ctx, DiagSink *d) {
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        /* A path through a file or a missing folder is the caller's mistake;
         * anything else (permissions, a full disk) the system's. */
        bool input = errno == ENOTDIR || errno == ENOENT;
        if (input)
            diag_error(d, (SrcLoc){0}, "--packages '%s': %s", dir, strerror(errno));
        else
            diag_syserror(d, (SrcLoc){0}, "--packages '%s': %s", dir, strerror(errno));
        return input ? MILC_E_INPUT : MILC_E_SYSTEM;
    }
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        diag_error(d, (SrcLoc){0}, "--packages '%s': not a folder", dir);
        return MILC_E_INPUT;
    }
    Source src = {0};
    int rc = MILC_OK;
    for (int i = 0; i < n && rc == MILC_OK; i++) {
        if (!keys[i]) continue;
        char hex[33], path[4200];
        cache_key_hex(keys[i], hex);
        snprintf(path, sizeof path, "%s/%s.mlpackage", dir, hex);
        bool there = lstat(path, &st) == 0 && S_ISDIR(st.st_mode);
        if (!there && source_for(&src, jobs[i].weights, d) != 0)
            rc = d->system_errors ? MILC_E_SYSTEM : MILC_E_INPUT;
        else if (!there)
            rc = package_one(tp, &jobs[i], src.w, dir, path, d);
        if (rc == MILC_OK && fn) fn(ctx, i, path, !there);
    }
    gen_weights_close(src.w);
    free(src.name);
    return rc;
}
