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
        if (gen_config_set(c, j->names[i], j->values[i], d) != 0) {
            gen_config_free(c);
            return NULL;
        }
    if (gen_config_resolve(c, d) != 0) {
        gen_config_free(c);
        return NULL;
    }
    return c;
}

const char *jobs_config(const JobSpec *spec) { return spec->config ? spec->config : "gpt2"; }

/* The model's depth, to cut it into chunks: the config's own "layers"
 * unless the request sets it.  0, or -1 with diagnostics. */
static int model_depth(const TemplatePath *tp, const JobSpec *spec, long *out, DiagSink *d) {
    const char *config = jobs_config(spec);
    GenConfig *base = gen_config_open(&tp->sp, config, d);
    int64_t L = 0;
    if (!base || gen_config_resolve(base, d) != 0) {
        gen_config_free(base);
        return -1;
    }
    bool has = gen_config_get_int(base, "layers", &L);
    gen_config_free(base);
    if (!has) {
        diag_error(d, spec->loc, "--chunk: template '%s' has no 'layers' parameter", config);
        return -1;
    }
    for (int i = 0; i < spec->nextra; i++)
        if (gen_name_matches("layers", spec->extra[i].name)) L = strtol(spec->extra[i].value, NULL, 10);
    if (L < 1) {
        diag_error(d, spec->loc, "--chunk: the model has no layers");
        return -1;
    }
    *out = (long)L;
    return 0;
}

/* Weight-file bytes of layers [first, first + n) of base's combination. */
static int span_bytes(const TemplatePath *tp, BuildJob *base, long first, long n, uint64_t *out, DiagSink *d) {
    char v1[32], v2[32];
    snprintf(v1, sizeof v1, "%ld", n);
    snprintf(v2, sizeof v2, "%ld", first);
    jobs_param(base, "layers", v1);
    jobs_param(base, "first_layer", v2);
    GenConfig *c = job_config(tp, base, d);
    int rc = c ? gen_config_weight_bytes(c, out, d) : -1;
    gen_config_free(c);
    for (int k = 0; k < 2; k++) {
        base->nparams--;
        free(base->names[base->nparams]);
        free(base->values[base->nparams]);
    }
    return rc;
}

static JobChunk *push_chunk(JobSplit *sp) {
    JobChunk *v = realloc(sp->v, sizeof *v * (size_t)(sp->n + 1));
    if (!v) return NULL;
    sp->v = v;
    return &v[sp->n++];
}

/* --chunk auto: one layer's bytes each (with the weights every chunk has,
 * counted once per chunk), then chunks as deep as fit, each checked whole
 * (a template whose weights do not add up layer by layer is still kept
 * under the ceiling: the chunk shrinks until it fits). */
static int split_auto(const TemplatePath *tp, const JobSpec *spec, BuildJob *base, long L, JobSplit *sp, DiagSink *d) {
    uint64_t max = spec->max_chunk_bytes ? spec->max_chunk_bytes : JOBS_DEFAULT_MAX_CHUNK_BYTES;
    uint64_t *one = calloc((size_t)L, sizeof *one), shared = 0, two = 0;
    int rc = one ? 0 : -1;
    for (long i = 0; i < L && rc == 0; i++) rc = span_bytes(tp, base, i, 1, &one[i], d);
    if (rc == 0 && L > 1) rc = span_bytes(tp, base, 0, 2, &two, d);
    if (rc == 0 && L > 1 && one[0] + one[1] >= two) shared = one[0] + one[1] - two;
    for (long f = 0; f < L && rc == 0;) {
        if (one[f] > max) {
            diag_error(d, spec->loc,
                       "--chunk auto: layer %ld alone takes %llu bytes of weights (with what every chunk holds), more "
                       "than --max-chunk-bytes %llu",
                       f, (unsigned long long)one[f], (unsigned long long)max);
            rc = -1;
            break;
        }
        long n = 1;
        for (uint64_t sum = one[f]; f + n < L && sum + one[f + n] - shared <= max; n++) sum += one[f + n] - shared;
        uint64_t bytes = one[f];
        while (n > 1 && (rc = span_bytes(tp, base, f, n, &bytes, d)) == 0 && bytes > max) n--;
        if (n == 1) bytes = one[f];
        JobChunk *c = rc == 0 ? push_chunk(sp) : NULL;
        if (!c) {
            rc = -1;
            break;
        }
        *c = (JobChunk){f, n, bytes};
        f += n;
    }
    free(one);
    return rc;
}

static int split_fixed(long K, long L, JobSplit *sp) {
    for (long f = 0; f < L; f += K) {
        JobChunk *c = push_chunk(sp);
        if (!c) return -1;
        *c = (JobChunk){f, L - f < K ? L - f : K, 0};
    }
    return 0;
}

static JobSplit *push_split(JobList *out) {
    JobSplit *v = realloc(out->splits, sizeof *v * (size_t)(out->nsplits + 1));
    if (!v) return NULL;
    out->splits = v;
    memset(&v[out->nsplits], 0, sizeof *v);
    return &v[out->nsplits++];
}

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

static bool is_depth(const char *name) {
    return gen_name_matches("layers", name) || gen_name_matches("first_layer", name);
}

static void job_clear(BuildJob *j) {
    free(j->config);
    free(j->weights);
    for (int k = 0; k < j->nparams; k++) {
        free(j->names[k]);
        free(j->values[k]);
    }
    free(j->names);
    free(j->values);
}

/* The combination's own parameters (comma lists picked by c) into base,
 * without the depth a split sets and the part --whole sets. */
static int combo_base(const JobSpec *spec, long c, bool split, BuildJob *base) {
    base->config = strdup(jobs_config(spec));
    base->weights = xstrdup(spec->weights);
    base->loc = spec->loc;
    size_t ll = 0;
    for (int i = 0; i < spec->nextra; i++) {
        const MilcParam *h = &spec->extra[i];
        int k = count_items(h->value);
        char val[256];
        list_item(h->value, (int)(c % k), val, sizeof val);
        c /= k;
        if (split && is_depth(h->name)) continue;
        if (spec->whole && gen_name_matches("part", h->name)) continue;
        jobs_param(base, h->name, val);
        if (k > 1) label_add(base, &ll, "%s=%s", h->name, val);
    }
    return base->config ? 0 : -1;
}

/* One job of the combination base: part "embed"/"head", or chunk ch (NULL
 * chunk: one program with the request's depth), in mode. */
static int push_part(JobList *out, const BuildJob *base, const char *part, const JobChunk *ch, int mode,
                     bool many_modes) {
    BuildJob *j = jobs_push(out, base->config, base->weights, mode);
    if (!j) return -1;
    j->loc = base->loc;
    for (int k = 0; k < base->nparams; k++)
        if (!part || !is_depth(base->names[k])) jobs_param(j, base->names[k], base->values[k]);
    memcpy(j->label, base->label, sizeof j->label);
    size_t ll = strlen(j->label);
    if (part) {
        jobs_param(j, "part", part);
        label_add(j, &ll, "%s", part);
    } else if (ch) {
        char v1[32], v2[32];
        snprintf(v1, sizeof v1, "%ld", ch->layers);
        snprintf(v2, sizeof v2, "%ld", ch->first);
        jobs_param(j, "layers", v1);
        jobs_param(j, "first_layer", v2);
        label_add(j, &ll, "layers %ld-%ld", ch->first, ch->first + ch->layers - 1);
    }
    if (many_modes) label_add(j, &ll, "mode %d", mode);
    return 0;
}

static int check_modes(const JobSpec *spec, const char *modes, DiagSink *d) {
    int nmodes = count_items(modes);
    for (int m = 0; m < nmodes; m++) {
        char buf[16];
        list_item(modes, m, buf, sizeof buf);
        if (strlen(buf) != 1 || buf[0] < '0' || !rt_mode(buf[0] - '0')) {
            diag_error(d, spec->loc, "mode '%s' is not a compile mode (%s)", buf, RT_MODE_TABLE(RT_MODE_HELP_) + 1);
            return -1;
        }
    }
    return nmodes;
}

/* Every job of combination c; its split (a --chunk request) into out. */
static int expand_combo(const TemplatePath *tp, const JobSpec *spec, long c, long L, const char *modes, int nmodes,
                        JobList *out, DiagSink *d) {
    BuildJob base = {0};
    JobSplit *sp = NULL;
    int rc = combo_base(spec, c, spec->chunk != 0, &base);
    if (rc == 0 && spec->chunk) {
        if (!(sp = push_split(out)))
            rc = -1;
        else {
            memcpy(sp->label, base.label, sizeof sp->label);
            sp->chosen = spec->chunk == JOBS_CHUNK_AUTO;
            rc = sp->chosen ? split_auto(tp, spec, &base, L, sp, d) : split_fixed(spec->chunk, L, sp);
        }
    }
    int nparts = sp ? sp->n : 1;
    for (int ch = spec->whole ? -1 : 0; rc == 0 && ch < nparts + (spec->whole ? 1 : 0); ch++) {
        const char *part = ch < 0 ? "embed" : ch == nparts ? "head" : NULL;
        for (int m = 0; m < nmodes && rc == 0; m++) {
            char mb[16];
            list_item(modes, m, mb, sizeof mb);
            rc = push_part(out, &base, part, sp && !part ? &sp->v[ch] : NULL, mb[0] - '0', nmodes > 1);
        }
    }
    job_clear(&base);
    return rc;
}

int jobs_expand(const TemplatePath *tp, const JobSpec *spec, JobList *out, DiagSink *d) {
    const char *modes = spec->modes ? spec->modes : RT_MODE_STR(RT_MODE_DEFAULT_N);
    int nmodes = check_modes(spec, modes, d);
    if (nmodes < 0) return -1;
    long combos = 1;
    for (int i = 0; i < spec->nextra; i++) {
        combos *= count_items(spec->extra[i].value);
        if (combos > 100000) {
            diag_error(d, spec->loc, "too many combinations of parameter lists");
            return -1;
        }
    }
    long model_layers = 0;
    if (spec->chunk && model_depth(tp, spec, &model_layers, d) != 0) return -1;
    int first_new = out->n;
    for (long c = 0; c < combos; c++)
        if (expand_combo(tp, spec, c, model_layers, modes, nmodes, out, d) != 0) return -1;
    /* Validate every new job's parameters now (cheap: no generation). */
    for (int i = first_new; i < out->n; i++) {
        int before = d->errors;
        GenConfig *cfg = job_config(tp, &out->v[i], d);
        gen_config_free(cfg);
        if (!cfg) {
            if (spec->loc.file && d->errors > before) diag_note(d, spec->loc, "in this request");
            return -1;
        }
    }
    return 0;
}

void jobs_free(JobList *jl) {
    for (int i = 0; i < jl->n; i++) job_clear(&jl->v[i]);
    free(jl->v);
    for (int i = 0; i < jl->nsplits; i++) free(jl->splits[i].v);
    free(jl->splits);
    memset(jl, 0, sizeof *jl);
}
