/* explain.c — why a build misses.  A request's direct record (key format,
 * milc version, backend, artifact format, CPU features, mode, template
 * digest, parameters, weight source and digest) is compared with every
 * stored direct record of the same template; the nearest (fewest differing
 * fields, each parameter counted alone) are shown with what differs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "milc/keyrec.h"

int keyrec_parse(const uint8_t *rec, size_t len, KeyRecord *r) {
    size_t pos = 0;
    int k;
    r->n = 0;
    while (r->n < KEYREC_MAX_FIELDS &&
           (k = ckey_record_next(rec, len, &pos, &r->f[r->n].tag, &r->f[r->n].p, &r->f[r->n].n)) == 1)
        r->n++;
    return r->n > 0 ? 0 : -1;
}

const KeyField *keyrec_field(const KeyRecord *r, uint32_t tag) {
    for (int i = 0; i < r->n; i++)
        if (r->f[i].tag == tag) return &r->f[i];
    return NULL;
}

/* The value of "name=" in a PARM field ("k=v\n..."), as a pointer and length. */
bool keyrec_param(const KeyField *pf, const char *name, size_t nl, const char **v, size_t *vl) {
    const char *p = pf ? (const char *)pf->p : NULL, *end = p ? p + pf->n : NULL;
    while (p && p < end) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        if (!eol) eol = end;
        if ((size_t)(eol - p) > nl && memcmp(p, name, nl) == 0 && p[nl] == '=') {
            *v = p + nl + 1, *vl = (size_t)(eol - p) - nl - 1;
            return true;
        }
        p = eol + 1;
    }
    return false;
}

const char *keyrec_label(uint32_t tag) {
    switch (tag) {
    case KEY_TAG('K', 'F', 'M', 'T'): return "key format";
    case KEY_TAG('M', 'V', 'E', 'R'): return "milc version";
    case KEY_TAG('B', 'K', 'N', 'D'): return "backend";
    case KEY_TAG('A', 'F', 'M', 'T'): return "artifact format";
    case KEY_TAG('O', 'P', 'T', 'B'): return "runtime op table";
    case KEY_TAG('C', 'P', 'U', 'F'): return "CPU features";
    case KEY_TAG('M', 'O', 'D', 'E'): return "mode";
    case KEY_TAG('T', 'M', 'P', 'L'): return "template digest";
    case KEY_TAG('W', 'S', 'R', 'C'): return "weight source";
    case KEY_TAG('W', 'D', 'I', 'G'): return "weight digest";
    default: return "field";
    }
}

/* A field's value for display: text as is, 8-byte numbers in decimal, digests
 * as their first 8 hex digits. */
void keyrec_show(const KeyField *f, uint32_t tag, char *out, size_t n) {
    if (!f) {
        snprintf(out, n, "(none)");
        return;
    }
    bool num =
        tag == KEY_TAG('K', 'F', 'M', 'T') || tag == KEY_TAG('A', 'F', 'M', 'T') || tag == KEY_TAG('M', 'O', 'D', 'E');
    if (num && f->n == 8) {
        uint64_t v = 0;
        for (int i = 7; i >= 0; i--) v = v << 8 | f->p[i];
        snprintf(out, n, "%llu", (unsigned long long)v);
    } else if (tag == KEY_TAG('O', 'P', 'T', 'B') && f->n == 8) {
        uint64_t v = 0;
        for (int i = 7; i >= 0; i--) v = v << 8 | f->p[i];
        snprintf(out, n, "%016llx", (unsigned long long)v);
    } else if (tag == KEY_TAG('T', 'M', 'P', 'L') || tag == KEY_TAG('W', 'D', 'I', 'G')) {
        snprintf(out, n, "%02x%02x%02x%02x...", f->n > 0 ? f->p[0] : 0, f->n > 1 ? f->p[1] : 0, f->n > 2 ? f->p[2] : 0,
                 f->n > 3 ? f->p[3] : 0);
    } else
        snprintf(out, n, "%.*s", (int)(f->n < 60 ? f->n : 60), (const char *)f->p);
}

static void diff_add(ExplainDiff *d, const char *what, const char *stored, const char *asked) {
    size_t tl = strlen(d->text);
    snprintf(d->text + tl, sizeof d->text - tl, "%s%s %s -> %s", d->count ? ", " : "", what, stored, asked);
    if (d->count < EXPLAIN_MAX_FIELDS) {
        snprintf(d->f[d->count].field, sizeof d->f[0].field, "%s", what);
        snprintf(d->f[d->count].stored, sizeof d->f[0].stored, "%s", stored);
        snprintf(d->f[d->count].asked, sizeof d->f[0].asked, "%s", asked);
    }
    d->count++;
}

/* Each parameter of either side that the other lacks or sets differently. */
static void diff_params(const KeyField *s, const KeyField *a, ExplainDiff *d) {
    const KeyField *sides[2] = {a, s};
    for (int side = 0; side < 2; side++) {
        const KeyField *f = sides[side], *o = sides[1 - side];
        const char *p = f ? (const char *)f->p : NULL, *end = p ? p + f->n : NULL;
        while (p && p < end) {
            const char *eol = memchr(p, '\n', (size_t)(end - p)), *eq;
            if (!eol) eol = end;
            if ((eq = memchr(p, '=', (size_t)(eol - p))) != NULL) {
                const char *ov;
                size_t ol, nl = (size_t)(eq - p), vl = (size_t)(eol - eq - 1);
                bool has = keyrec_param(o, p, nl, &ov, &ol);
                if (!has || ((side == 0) && (ol != vl || memcmp(ov, eq + 1, vl) != 0))) {
                    char name[64], v1[80], v2[80];
                    snprintf(name, sizeof name, "%.*s", (int)nl, p);
                    snprintf(v1, sizeof v1, "%.*s", (int)vl, eq + 1);
                    snprintf(v2, sizeof v2, "%.*s", has ? (int)ol : 6, has ? ov : "(none)");
                    if (side == 0)
                        diff_add(d, name, v2, v1);
                    else
                        diff_add(d, name, v1, "(none)");
                }
            }
            p = eol + 1;
        }
    }
}

static void diff_records(const KeyRecord *s, const KeyRecord *a, ExplainDiff *d) {
    memset(d, 0, sizeof *d);
    for (int i = 0; i < a->n; i++) {
        uint32_t tag = a->f[i].tag;
        const KeyField *sf = keyrec_field(s, tag);
        if (tag == KEY_TAG('P', 'A', 'R', 'M')) {
            diff_params(sf, &a->f[i], d);
            continue;
        }
        if (sf && sf->n == a->f[i].n && memcmp(sf->p, a->f[i].p, sf->n) == 0) continue;
        char v1[80], v2[80];
        keyrec_show(sf, tag, v1, sizeof v1), keyrec_show(&a->f[i], tag, v2, sizeof v2);
        diff_add(d, keyrec_label(tag), v1, v2);
    }
}

typedef struct Scan {
    const KeyRecord *asked;
    Explain *e;
} Scan;

static int scan_one(void *ctx, const CacheKey *dkey, const uint8_t *rec, size_t len, const CacheKey *akey) {
    (void)dkey;
    Scan *sc = ctx;
    Explain *s = sc->e;
    KeyRecord r;
    const char *v;
    size_t vl;
    if (keyrec_parse(rec, len, &r) != 0 ||
        !keyrec_param(keyrec_field(&r, KEY_TAG('P', 'A', 'R', 'M')), "template", 8, &v, &vl) || vl != s->tl ||
        memcmp(v, s->tmpl, vl) != 0)
        return 0;
    ExplainNear n = {.akey = *akey};
    diff_records(&r, sc->asked, &n.diff);
    if (s->nbest == EXPLAIN_NEAREST && n.diff.count >= s->best[EXPLAIN_NEAREST - 1].diff.count) return 0;
    int at = s->nbest < EXPLAIN_NEAREST ? s->nbest++ : EXPLAIN_NEAREST - 1;
    s->best[at] = n;
    for (int i = at; i > 0 && s->best[i].diff.count < s->best[i - 1].diff.count; i--) {
        ExplainNear t = s->best[i];
        s->best[i] = s->best[i - 1], s->best[i - 1] = t;
    }
    return 0;
}

static bool artifact_present(Cache *c, const CacheKey *k) {
    CacheHit *h;
    if (cache_get(c, k, NULL, 0, CACHE_GET_NOTOUCH, &h) != 0) return false;
    cache_hit_release(h);
    return true;
}

int explain_scan(Cache *c, const TemplatePath *tp, const BuildJob *j, Explain *out, DiagSink *d) {
    memset(out, 0, sizeof *out);
    GenConfig *cfg = job_config(tp, j, d);
    if (!cfg) return MILC_E_INPUT;
    char *params = gen_config_canonical(cfg);
    CacheKeyBuilder db;
    CacheKey dkey;
    int rc = params ? pipeline_direct_record(&(BuildRequest){.config = cfg, .weights = j->weights, .mode = j->mode},
                                             params, &db, &dkey, d)
                    : MILC_E_SYSTEM;
    KeyRecord asked;
    if (rc == MILC_OK && keyrec_parse(db.buf, db.len, &asked) == 0) {
        Scan s = {.asked = &asked, .e = out};
        const char *v;
        size_t vl;
        if (!keyrec_param(keyrec_field(&asked, KEY_TAG('P', 'A', 'R', 'M')), "template", 8, &v, &vl)) v = "?", vl = 1;
        out->tl = vl < sizeof out->tmpl ? vl : sizeof out->tmpl - 1;
        memcpy(out->tmpl, v, out->tl);
        CacheHit *h;
        out->hit = cache_get_direct(c, &dkey, db.buf, db.len, CACHE_GET_NOTOUCH, &h, NULL) == 0;
        if (out->hit)
            cache_hit_release(h);
        else if ((rc = cache_direct_ls(c, scan_one, &s)) != 0) {
            lib_error("cache: %s", cache_errmsg(c));
            rc = MILC_E_SYSTEM;
        }
        for (int i = 0; i < out->nbest; i++) out->best[i].present = artifact_present(c, &out->best[i].akey);
    }
    if (rc == MILC_OK) ckey_free(&db);
    free(params);
    gen_config_free(cfg);
    return rc;
}
