/* jobs.c — one BuildJob per (parameter combination × chunk × mode). */
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

int jobs_expand(const TemplatePath *tp, const JobSpec *spec, JobList *out, DiagSink *d) {
    const char *config = jobs_config(spec);
    const char *modes = spec->modes ? spec->modes : RT_MODE_STR(RT_MODE_DEFAULT_N);
    int nmodes = count_items(modes);
    for (int m = 0; m < nmodes; m++) {
        char buf[16];
        list_item(modes, m, buf, sizeof buf);
        if (strlen(buf) != 1 || buf[0] < '0' || !rt_mode(buf[0] - '0')) {
            diag_error(d, spec->loc, "mode '%s' is not a compile mode (%s)", buf, RT_MODE_TABLE(RT_MODE_HELP_) + 1);
            return -1;
        }
    }
    long combos = 1;
    for (int i = 0; i < spec->nextra; i++) {
        combos *= count_items(spec->extra[i].value);
        if (combos > 100000) { diag_error(d, spec->loc, "too many combinations of parameter lists"); return -1; }
    }
    /* The model's depth, to cut it into chunks: the config's own "layers"
     * unless the request sets it. */
    long model_layers = 0;
    if (spec->chunk) {
        GenConfig *base = gen_config_open(&tp->sp, config, d);
        int64_t L = 0;
        if (!base || gen_config_resolve(base, d) != 0) { gen_config_free(base); return -1; }
        bool has = gen_config_get_int(base, "layers", &L);
        gen_config_free(base);
        if (!has) { diag_error(d, spec->loc, "--chunk: template '%s' has no 'layers' parameter", config); return -1; }
        for (int i = 0; i < spec->nextra; i++)
            if (gen_name_matches("layers", spec->extra[i].name)) L = strtol(spec->extra[i].value, NULL, 10);
        model_layers = L;
        if (model_layers < 1) { diag_error(d, spec->loc, "--chunk: the model has no layers"); return -1; }
    }
    long nchunks = spec->chunk ? (model_layers + spec->chunk - 1) / spec->chunk : 1;
    int first_new = out->n;
    for (long c = 0; c < combos; c++) {
        /* --whole: ch = -1 is the embedding, ch = nchunks the head */
        for (long ch = spec->whole ? -1 : 0; ch < nchunks + (spec->whole ? 1 : 0); ch++) {
            const char *part = ch < 0 ? "embed" : ch == nchunks ? "head" : NULL;
            for (int m = 0; m < nmodes; m++) {
                BuildJob *j = push_job(out);
                if (!j) return -1;
                j->config = strdup(config);
                j->weights = xstrdup(spec->weights);
                char mb[16];
                list_item(modes, m, mb, sizeof mb);
                j->mode = mb[0] - '0';
                j->loc = spec->loc;
                size_t ll = 0;
                long rem = c;
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
                    if (k > 1 && ll < sizeof j->label)
                        ll += (size_t)snprintf(j->label + ll, sizeof j->label - ll, "%s%s=%s", ll ? " " : "", h->name, val);
                }
                if (part) {
                    jobs_param(j, "part", part);
                    if (ll < sizeof j->label)
                        ll += (size_t)snprintf(j->label + ll, sizeof j->label - ll, "%s%s", ll ? " " : "", part);
                } else if (spec->chunk) {
                    char v1[32], v2[32];
                    long first = ch * spec->chunk;
                    long n = model_layers - first < spec->chunk ? model_layers - first : spec->chunk;
                    snprintf(v1, sizeof v1, "%ld", n);
                    snprintf(v2, sizeof v2, "%ld", first);
                    jobs_param(j, "layers", v1);
                    jobs_param(j, "first_layer", v2);
                    if (ll < sizeof j->label)
                        ll += (size_t)snprintf(j->label + ll, sizeof j->label - ll, "%slayers %ld-%ld", ll ? " " : "",
                                               first, first + n - 1);
                }
                if (nmodes > 1 && ll < sizeof j->label)
                    snprintf(j->label + ll, sizeof j->label - ll, "%smode %d", ll ? " " : "", j->mode);
            }
        }
    }
    /* Validate every new job's parameters now (cheap: no generation). */
    for (int i = first_new; i < out->n; i++) {
        int before = d->errors;
        GenConfig *cfg = job_config(tp, &out->v[i], d);
        gen_config_free(cfg);
        if (!cfg) {
            if (spec->loc.file && d->errors > before)
                diag_note(d, spec->loc, "in this request");
            return -1;
        }
    }
    return 0;
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
