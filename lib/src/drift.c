/* drift.c — entries made by another milc.  Every key record starts with the
 * key base (pipeline_key_base: key format, milc version, backend, artifact
 * format, runtime op table, CPU features); an entry whose base differs from this milc's is
 * stale.  Its key can never be asked for again, so it is never served; it
 * only takes space, and its direct record is a recipe to rebuild it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "milc/drift.h"
#include "milc/keyrec.h"

bool drift_why(const uint8_t *rec, size_t len, char *why, size_t n) {
    CacheKeyBuilder b;
    ckey_init(&b);
    pipeline_key_base(&b);
    KeyRecord ours, theirs;
    bool stale = false;
    why[0] = 0;
    if (b.err || keyrec_parse(b.buf, b.len, &ours) != 0) {
        ckey_free(&b);
        return false;
    }
    if (keyrec_parse(rec, len, &theirs) != 0) theirs.n = 0;
    for (int i = 0; i < ours.n; i++) {
        const KeyField *t = keyrec_field(&theirs, ours.f[i].tag);
        if (t && t->n == ours.f[i].n && memcmp(t->p, ours.f[i].p, t->n) == 0) continue;
        char v1[80], v2[80];
        size_t l = strlen(why);
        keyrec_show(t, ours.f[i].tag, v1, sizeof v1), keyrec_show(&ours.f[i], ours.f[i].tag, v2, sizeof v2);
        snprintf(why + l, n - l, "%s%s %s, this milc %s", stale ? "; " : "", keyrec_label(ours.f[i].tag), v1, v2);
        stale = true;
    }
    ckey_free(&b);
    return stale;
}

/* ---- recipes ---- */

typedef struct {
    CacheKey key;
    uint64_t compile_ns;
    bool taken; /* a recipe for it is a job already */
} Cost;

typedef struct {
    Cost *v;
    int n, cap;
} Costs;

static int cost_of(void *ctx, const CacheEntryInfo *e) {
    Costs *c = ctx;
    if (c->n == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 64;
        Cost *v = realloc(c->v, (size_t)c->cap * sizeof *v);
        if (!v) return CACHE_ENOMEM;
        c->v = v;
    }
    c->v[c->n++] = (Cost){e->key, e->compile_ns, false};
    return 0;
}

typedef struct {
    JobList *jobs;
    Costs costs;
    uint64_t *est; /* per job: its stale entry's compile time */
    int cap;
} Recipes;

/* One stale direct record as a job: the template named in its parameters,
 * every other parameter as given, its weight source and mode. */
static int recipe(void *ctx, const CacheKey *dkey, const uint8_t *rec, size_t len, const CacheKey *akey) {
    (void)dkey;
    Recipes *rc = ctx;
    char why[256];
    KeyRecord r;
    int at = -1;
    for (int i = 0; i < rc->costs.n && at < 0; i++)
        if (memcmp(rc->costs.v[i].key.b, akey->b, 16) == 0) at = i;
    /* Only a stale entry still in the cache, once (a removed one is no
     * longer listed by verify --stale). */
    if (at < 0 || rc->costs.v[at].taken || !drift_why(rec, len, why, sizeof why) || keyrec_parse(rec, len, &r) != 0)
        return 0;
    rc->costs.v[at].taken = true;
    const KeyField *parm = keyrec_field(&r, KEY_TAG('P', 'A', 'R', 'M')),
                   *ws = keyrec_field(&r, KEY_TAG('W', 'S', 'R', 'C')),
                   *mode = keyrec_field(&r, KEY_TAG('M', 'O', 'D', 'E'));
    const char *tv;
    size_t tl;
    if (!parm || !ws || !mode || mode->n != 8 || !rt_mode(mode->p[0]) || !keyrec_param(parm, "template", 8, &tv, &tl))
        return 0;
    char tmpl[128], weights[1024];
    snprintf(tmpl, sizeof tmpl, "%.*s", (int)tl, tv);
    snprintf(weights, sizeof weights, "%.*s", (int)ws->n, (const char *)ws->p);
    BuildJob *j = jobs_push(rc->jobs, tmpl, weights, mode->p[0]);
    if (!j) return CACHE_ENOMEM;
    for (const char *p = (const char *)parm->p, *end = p + parm->n, *eol; p < end; p = eol + 1) {
        if (!(eol = memchr(p, '\n', (size_t)(end - p)))) eol = end;
        const char *eq = memchr(p, '=', (size_t)(eol - p));
        if (!eq || (eq - p == 8 && memcmp(p, "template", 8) == 0)) continue;
        char name[128], value[256];
        snprintf(name, sizeof name, "%.*s", (int)(eq - p), p);
        snprintf(value, sizeof value, "%.*s", (int)(eol - eq - 1), eq + 1);
        jobs_param(j, name, value);
    }
    snprintf(j->label, sizeof j->label, "(stale %.*s)", (int)(parm->n < 200 ? parm->n : 200), (const char *)parm->p);
    for (char *q = j->label; *q; q++)
        if (*q == '\n') *q = ' ';
    if (rc->jobs->n > rc->cap) {
        rc->cap = 2 * rc->jobs->n;
        uint64_t *e = realloc(rc->est, (size_t)rc->cap * sizeof *e);
        if (!e) return CACHE_ENOMEM;
        rc->est = e;
    }
    rc->est[rc->jobs->n - 1] = rc->costs.v[at].compile_ns;
    return 0;
}

/* Costliest first: with N workers the longest compiles start first and the
 * run ends sooner (longest-processing-time order). */
static void sort_by_cost(JobList *jl, uint64_t *est) {
    for (int i = 1; i < jl->n; i++)
        for (int k = i; k > 0 && est[k] > est[k - 1]; k--) {
            BuildJob t = jl->v[k];
            uint64_t e = est[k];
            jl->v[k] = jl->v[k - 1], est[k] = est[k - 1];
            jl->v[k - 1] = t, est[k - 1] = e;
        }
}

int drift_jobs(Cache *c, JobList *out) {
    Recipes r = {.jobs = out};
    int rc = cache_ls(c, cost_of, &r.costs);
    if (rc == 0) rc = cache_direct_ls(c, recipe, &r);
    if (rc == 0) sort_by_cost(out, r.est);
    free(r.costs.v);
    free(r.est);
    if (rc != 0) lib_error("cache: %s", cache_errmsg(c));
    return rc == 0 ? 0 : -1;
}
