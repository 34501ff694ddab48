/* jobs.c — one BuildJob per (parameter combination × chunk × mode). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "milc/jobs.h"

static char *xstrdup(const char *s) { return s ? strdup(s) : NULL; }

static int count_items(const char *list) {
    int k = 1;
    for (const char *p = list; *p; p++) k += *p == ',';
    return k;
}

/* Item i of a comma list into buf. */
static void list_item(const char *list, int i, char *buf, size_t n) {
    const char *v = list;
    for (int s = 0; s < i; s++) v = strchr(v, ',') + 1;
    snprintf(buf, n, "%.*s", (int)strcspn(v, ","), v);
}

static BuildJob *push_job(JobList *jl) {
    if (jl->n == jl->cap) {
        jl->cap = jl->cap ? jl->cap * 2 : 16;
        jl->v = realloc(jl->v, sizeof(BuildJob) * (size_t)jl->cap);
        if (!jl->v) return NULL;
    }
    BuildJob *j = &jl->v[jl->n++];
    memset(j, 0, sizeof *j);
    return j;
}

void jobs_param(BuildJob *j, const char *name, const char *value) {
    j->names = realloc(j->names, sizeof(char *) * (size_t)(j->nparams + 1));
    j->values = realloc(j->values, sizeof(char *) * (size_t)(j->nparams + 1));
    j->names[j->nparams] = strdup(name);
    j->values[j->nparams] = strdup(value);
    j->nparams++;
}

BuildJob *jobs_push(JobList *jl, const char *config, const char *weights, int mode) {
    BuildJob *j = push_job(jl);
    if (!j) return NULL;
    j->config = xstrdup(config), j->weights = xstrdup(weights), j->mode = mode;
    return j;
}

GenConfig *job_config(const TemplatePath *tp, const BuildJob *j, DiagSink *d) {
    GenConfig *c = gen_config_open(&tp->sp, j->config, d);
    if (!c) return NULL;
    for (int i = 0; i < j->nparams; i++)
        if (gen_config_set(c, j->names[i], j->values[i], d) != 0) { gen_config_free(c); return NULL; }
    if (gen_config_resolve(c, d) != 0) { gen_config_free(c); return NULL; }
    return c;
}

const char *jobs_config(const JobSpec *spec) { return spec->config ? spec->config : "gpt2"; }

/* Every item of the mode list is a compile mode. */
static int check_modes(const JobSpec *spec, const char *modes, DiagSink *d) {
    for (int m = 0; m < count_items(modes); m++) {
        char buf[16];
        list_item(modes, m, buf, sizeof buf);
        if (strlen(buf) != 1 || buf[0] < '0' || !rt_mode(buf[0] - '0')) {
            diag_error(d, spec->loc, "mode '%s' is not a compile mode (%s)", buf, RT_MODE_TABLE(RT_MODE_HELP_) + 1);
            return -1;
        }
    }
    return 0;
}

/* The model's depth, to cut it into chunks: the config's own "layers"
 * unless the request sets it.  >= 1, or -1 with diagnostics. */
static long model_depth(const TemplatePath *tp, const JobSpec *spec, DiagSink *d) {
    const char *config = jobs_config(spec);
    GenConfig *base = gen_config_open(&tp->sp, config, d);
    int64_t L = 0;
    if (!base || gen_config_resolve(base, d) != 0) { gen_config_free(base); return -1; }
    bool has = gen_config_get_int(base, "layers", &L);
    gen_config_free(base);
    if (!has) { diag_error(d, spec->loc, "--chunk: template '%s' has no 'layers' parameter", config); return -1; }
    for (int i = 0; i < spec->nextra; i++)
        if (gen_name_matches("layers", spec->extra[i].name)) L = strtol(spec->extra[i].value, NULL, 10);
    if (L < 1) { diag_error(d, spec->loc, "--chunk: the model has no layers"); return -1; }
    return (long)L;
}

/* Where a job sits in its request: combination c of the parameter lists,
 * chunk ch of nchunks (--whole: -1 the embedding, nchunks the head) of a
 * model of layers layers. */
typedef struct JobPlace {
    long c, ch, nchunks, layers;
} JobPlace;

/* Append to j's label, space-separated; *ll: its length so far (a label
 * too long is cut). */
__attribute__((format(printf, 3, 4))) static void label_add(BuildJob *j, size_t *ll, const char *fmt, ...) {
    if (*ll >= sizeof j->label - 1) return;
    if (*ll) j->label[(*ll)++] = ' ';
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(j->label + *ll, sizeof j->label - *ll, fmt, ap);
    va_end(ap);
    if (n > 0) *ll += (size_t)n;
}

/* j's parameters and label at place at. */
static void fill_job(BuildJob *j, const JobSpec *spec, const JobPlace *at, bool label_mode) {
    const char *part = at->ch < 0 ? "embed" : at->ch == at->nchunks ? "head" : NULL;
    size_t ll = 0;
    long rem = at->c;
    for (int i = 0; i < spec->nextra; i++) {
        const MilcParam *h = &spec->extra[i];
        int k = count_items(h->value);
        char val[256];
        list_item(h->value, (int)(rem % k), val, sizeof val);
        rem /= k;
        bool depth = gen_name_matches("layers", h->name) || gen_name_matches("first_layer", h->name);
        if ((spec->chunk || part) && depth) continue;
        if (spec->whole && gen_name_matches("part", h->name)) continue;
        jobs_param(j, h->name, val);
        if (k > 1) label_add(j, &ll, "%s=%s", h->name, val);
    }
    if (part) {
        jobs_param(j, "part", part);
        label_add(j, &ll, "%s", part);
    } else if (spec->chunk) {
        char v1[32], v2[32];
        long first = at->ch * spec->chunk;
        long n = at->layers - first < spec->chunk ? at->layers - first : spec->chunk;
        snprintf(v1, sizeof v1, "%ld", n);
        snprintf(v2, sizeof v2, "%ld", first);
        jobs_param(j, "layers", v1);
        jobs_param(j, "first_layer", v2);
        label_add(j, &ll, "layers %ld-%ld", first, first + n - 1);
    }
    if (label_mode) label_add(j, &ll, "mode %d", j->mode);
}

/* Every job from first on resolves against its template (cheap: no
 * generation).  0, or -1 with diagnostics. */
static int check_jobs(const TemplatePath *tp, const JobSpec *spec, const JobList *jl, int first, DiagSink *d) {
    for (int i = first; i < jl->n; i++) {
        int before = d->errors;
        GenConfig *cfg = job_config(tp, &jl->v[i], d);
        gen_config_free(cfg);
        if (!cfg) {
            if (spec->loc.file && d->errors > before) diag_note(d, spec->loc, "in this request");
            return -1;
        }
    }
    return 0;
}

int jobs_expand(const TemplatePath *tp, const JobSpec *spec, JobList *out, DiagSink *d) {
    const char *modes = spec->modes ? spec->modes : RT_MODE_STR(RT_MODE_DEFAULT_N);
    int nmodes = count_items(modes);
    if (check_modes(spec, modes, d) != 0) return -1;
    long combos = 1;
    for (int i = 0; i < spec->nextra; i++) {
        combos *= count_items(spec->extra[i].value);
        if (combos > 100000) { diag_error(d, spec->loc, "too many combinations of parameter lists"); return -1; }
    }
    JobPlace at = {.nchunks = 1};
    if (spec->chunk) {
        if ((at.layers = model_depth(tp, spec, d)) < 0) return -1;
        at.nchunks = (at.layers + spec->chunk - 1) / spec->chunk;
    }
    int first_new = out->n;
    for (at.c = 0; at.c < combos; at.c++)
        for (at.ch = spec->whole ? -1 : 0; at.ch < at.nchunks + (spec->whole ? 1 : 0); at.ch++)
            for (int m = 0; m < nmodes; m++) {
                BuildJob *j = push_job(out);
                if (!j) return -1;
                j->config = strdup(jobs_config(spec));
                j->weights = xstrdup(spec->weights);
                char mb[16];
                list_item(modes, m, mb, sizeof mb);
                j->mode = mb[0] - '0';
                j->loc = spec->loc;
                fill_job(j, spec, &at, nmodes > 1);
            }
    return check_jobs(tp, spec, out, first_new, d);
}

void jobs_free(JobList *jl) {
    for (int i = 0; i < jl->n; i++) {
        BuildJob *j = &jl->v[i];
        free(j->config);
        free(j->weights);
        for (int k = 0; k < j->nparams; k++) { free(j->names[k]); free(j->values[k]); }
        free(j->names);
        free(j->values);
    }
    free(jl->v);
    memset(jl, 0, sizeof *jl);
}
