/* explain.c — why a build misses.  A request's direct record (key format,
 * milc version, backend, artifact format, CPU features, mode, template
 * digest, parameters, weight source and digest) is compared with every
 * stored direct record of the same template; the nearest (fewest differing
 * fields, each parameter counted alone) are shown with what differs. */
#include <stdlib.h>
#include <string.h>

#include "explain.h"

enum { NEAREST = 3 };

int keyrec_parse(const uint8_t *rec, size_t len, KeyRecord *r) {
    size_t pos = 0;
    int k;
    r->n = 0;
    while (r->n < KEYREC_MAX_FIELDS && (k = ckey_record_next(rec, len, &pos, &r->f[r->n].tag, &r->f[r->n].p, &r->f[r->n].n)) == 1)
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
    if (!f) { snprintf(out, n, "(none)"); return; }
    bool num = tag == KEY_TAG('K', 'F', 'M', 'T') || tag == KEY_TAG('A', 'F', 'M', 'T') || tag == KEY_TAG('M', 'O', 'D', 'E');
    if (num && f->n == 8) {
        uint64_t v = 0;
        for (int i = 7; i >= 0; i--) v = v << 8 | f->p[i];
        snprintf(out, n, "%llu", (unsigned long long)v);
    } else if (tag == KEY_TAG('T', 'M', 'P', 'L') || tag == KEY_TAG('W', 'D', 'I', 'G')) {
        snprintf(out, n, "%02x%02x%02x%02x...", f->n > 0 ? f->p[0] : 0, f->n > 1 ? f->p[1] : 0, f->n > 2 ? f->p[2] : 0,
                 f->n > 3 ? f->p[3] : 0);
    } else snprintf(out, n, "%.*s", (int)(f->n < 60 ? f->n : 60), (const char *)f->p);
}

typedef struct Diff {
    int count;
    char text[1024]; /* "seq 64 → 32, milc version 0.3 → 0.4" */
    char json[2048];
} Diff;

static void diff_add(Diff *d, const char *what, const char *stored, const char *asked) {
    size_t tl = strlen(d->text), jl = strlen(d->json);
    snprintf(d->text + tl, sizeof d->text - tl, "%s%s %s -> %s", d->count ? ", " : "", what, stored, asked);
    snprintf(d->json + jl, sizeof d->json - jl, "%s{\"field\":\"%s\",\"stored\":\"%s\",\"asked\":\"%s\"}", d->count ? "," : "",
             what, stored, asked);
    d->count++;
}

/* Each parameter of either side that the other lacks or sets differently. */
static void diff_params(const KeyField *s, const KeyField *a, Diff *d) {
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
                    if (side == 0) diff_add(d, name, v2, v1);
                    else diff_add(d, name, v1, "(none)");
                }
            }
            p = eol + 1;
        }
    }
}

static void diff_records(const KeyRecord *s, const KeyRecord *a, Diff *d) {
    memset(d, 0, sizeof *d);
    for (int i = 0; i < a->n; i++) {
        uint32_t tag = a->f[i].tag;
        const KeyField *sf = keyrec_field(s, tag);
        if (tag == KEY_TAG('P', 'A', 'R', 'M')) { diff_params(sf, &a->f[i], d); continue; }
        if (sf && sf->n == a->f[i].n && memcmp(sf->p, a->f[i].p, sf->n) == 0) continue;
        char v1[80], v2[80];
        keyrec_show(sf, tag, v1, sizeof v1), keyrec_show(&a->f[i], tag, v2, sizeof v2);
        diff_add(d, keyrec_label(tag), v1, v2);
    }
}

typedef struct Near {
    CacheKey akey;
    Diff diff;
    bool present;
} Near;

typedef struct Scan {
    Cache *c;
    const KeyRecord *asked;
    const char *tmpl;
    size_t tl;
    Near best[NEAREST];
    int nbest;
} Scan;

static int scan_one(void *ctx, const CacheKey *dkey, const uint8_t *rec, size_t len, const CacheKey *akey) {
    (void)dkey;
    Scan *s = ctx;
    KeyRecord r;
    const char *v;
    size_t vl;
    if (keyrec_parse(rec, len, &r) != 0 || !keyrec_param(keyrec_field(&r, KEY_TAG('P', 'A', 'R', 'M')), "template", 8, &v, &vl) ||
        vl != s->tl || memcmp(v, s->tmpl, vl) != 0)
        return 0;
    Near n = {.akey = *akey};
    diff_records(&r, s->asked, &n.diff);
    if (s->nbest == NEAREST && n.diff.count >= s->best[NEAREST - 1].diff.count) return 0;
    int at = s->nbest < NEAREST ? s->nbest++ : NEAREST - 1;
    s->best[at] = n;
    for (int i = at; i > 0 && s->best[i].diff.count < s->best[i - 1].diff.count; i--) {
        Near t = s->best[i];
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

static void print_job(const Scan *s, const char *label, bool hit, bool json, int idx, FILE *f) {
    char hex[33];
    if (json) {
        printf("%s{\"job\":\"%s\",\"hit\":%s,\"nearest\":[", idx ? "," : "", label, hit ? "true" : "false");
        for (int i = 0; i < s->nbest; i++) {
            cache_key_hex(&s->best[i].akey, hex);
            printf("%s{\"key\":\"%s\",\"present\":%s,\"differs\":[%s]}", i ? "," : "", hex,
                   s->best[i].present ? "true" : "false", s->best[i].diff.json);
        }
        printf("]}");
        return;
    }
    if (hit) { fprintf(f, "%s: in the cache\n", label); return; }
    fprintf(f, "%s: not in the cache; ", label);
    if (!s->nbest) { fprintf(f, "no stored entry of template %.*s\n", (int)s->tl, s->tmpl); return; }
    fprintf(f, "nearest stored entries of template %.*s (stored -> asked):\n", (int)s->tl, s->tmpl);
    for (int i = 0; i < s->nbest; i++) {
        cache_key_hex(&s->best[i].akey, hex);
        fprintf(f, "  %s  %d %s: %s%s\n", hex, s->best[i].diff.count, s->best[i].diff.count == 1 ? "field differs" : "fields differ",
                s->best[i].diff.count ? s->best[i].diff.text : "none",
                s->best[i].present ? "" : " (its artifact is gone: evicted or removed)");
    }
}

static int explain_job(Cache *c, const TemplatePath *tp, const BuildJob *j, bool json, int idx, FILE *f, DiagSink *d) {
    GenConfig *cfg = job_config(tp, j, d);
    if (!cfg) return EXIT_INPUT;
    char *params = gen_config_canonical(cfg);
    CacheKeyBuilder db;
    CacheKey dkey;
    int rc = params ? pipeline_direct_record(&(BuildRequest){.config = cfg, .weights = j->weights, .mode = j->mode},
                                             params, &db, &dkey, d)
                    : EXIT_SYSTEM;
    KeyRecord asked;
    if (rc == EXIT_OK && keyrec_parse(db.buf, db.len, &asked) == 0) {
        Scan s = {.c = c, .asked = &asked};
        const char *v;
        if (!keyrec_param(keyrec_field(&asked, KEY_TAG('P', 'A', 'R', 'M')), "template", 8, &v, &s.tl)) v = "?", s.tl = 1;
        s.tmpl = v;
        CacheHit *h;
        bool hit = cache_get_direct(c, &dkey, db.buf, db.len, CACHE_GET_NOTOUCH, &h, NULL) == 0;
        if (hit) cache_hit_release(h);
        else if ((rc = cache_direct_ls(c, scan_one, &s)) != 0) {
            cli_error("cache: %s", cache_errmsg(c));
            rc = EXIT_SYSTEM;
        }
        for (int i = 0; i < s.nbest; i++) s.best[i].present = artifact_present(c, &s.best[i].akey);
        if (rc == EXIT_OK) print_job(&s, j->label[0] ? j->label : j->config, hit, json, idx, f);
    }
    if (rc == EXIT_OK) ckey_free(&db);
    free(params);
    gen_config_free(cfg);
    return rc;
}

int explain_jobs(Cache *c, const TemplatePath *tp, const JobList *jobs, bool json, FILE *f, DiagSink *d) {
    int rc = EXIT_OK;
    if (json) printf("{\"explain\":[");
    for (int i = 0; i < jobs->n && rc == EXIT_OK; i++) rc = explain_job(c, tp, &jobs->v[i], json, i, f, d);
    if (json) printf("]}\n");
    return rc;
}

static const OptSpec why_opts[] = {
    GEN_COMMON_OPTS,
    {"mode", 0, OPT_VALUE, "N[,N]", "compile mode: 2 bonded (default), 1 non-bonded, 0 both"},
    {"chunk", 0, OPT_VALUE, "K", "the whole model in chunks of K layers"},
    {0},
};

int explain_cmd(Cli *cli, int argc, char **argv) {
    Args a;
    if (!args_parse("cache", why_opts, argc - 1, argv + 1, true, &a)) return EXIT_USAGE;
    long chunk = 0;
    int rc = EXIT_USAGE;
    if (a.npos) { cli_usage_error("cache", "why: unexpected argument '%s'", a.pos[0]); args_free(&a); return rc; }
    if (args_get(&a, "chunk") && !args_int("cache", "chunk", args_get(&a, "chunk"), 1, 4096, &chunk)) {
        args_free(&a);
        return rc;
    }
    TemplatePath tp;
    DiagSink d;
    diag_init(&d);
    JobList jobs = {0};
    Cache *c = NULL;
    char err[512] = "";
    JobSpec spec = {.config = cli_config_name(&a), .weights = args_get(&a, "weights"), .modes = args_get(&a, "mode"),
                    .chunk = chunk, .extra = a.extra, .nextra = a.nextra};
    if (tpath_init(&tp, cli) != 0) { cli_error("out of memory"); rc = EXIT_SYSTEM; goto out; }
    if (jobs_expand(&tp, &spec, &jobs, &d) != 0) rc = EXIT_INPUT;
    else if (cache_open(&c, cli->cache_dir, NULL, err, sizeof err) != 0) { cli_error("%s", err); rc = EXIT_SYSTEM; }
    else rc = explain_jobs(c, &tp, &jobs, cli->json, stdout, &d);
    int drc = cli_report(cli, &d);
    if (rc == EXIT_OK) rc = drc;
    tpath_free(&tp);
out:
    if (c) cache_close(c);
    jobs_free(&jobs);
    diag_free(&d);
    args_free(&a);
    return rc;
}
