/* api.c — the public interface (milc.h) over the library's modules: the
 * cache handle, builds and prewarm.  Models are api_model.c.  Every entry
 * point runs with the calling thread's messages captured (api_begin), so
 * what the modules report becomes milc_last_error, never output. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api.h"
#include "milc/osfile.h"
#include "milc/manifest.h"
#include "milc/request.h"

static _Thread_local char last_err[4096];

static void capture(void *ctx, int level, const char *msg) {
    (void)ctx;
    if (level != MILC_MSG_ERROR) return; /* warnings (a remote tier's) have no reader here */
    size_t l = strlen(last_err);
    snprintf(last_err + l, sizeof last_err - l, "%s%s", l ? "\n" : "", msg);
}

static const LibSink capture_sink = {capture, NULL};

void api_begin(ApiCall *k) {
    last_err[0] = 0;
    k->prev = lib_sink_push(&capture_sink);
}

int api_end(ApiCall *k, int rc) {
    lib_sink_pop(k->prev);
    if (rc != MILC_OK && !last_err[0]) snprintf(last_err, sizeof last_err, "%s", milc_strerror(rc));
    return rc;
}

int api_diags(DiagSink *d, int rc) {
    char *text = d->count ? diag_render(d) : NULL;
    if (text) {
        size_t l = strlen(text);
        while (l && text[l - 1] == '\n') text[--l] = 0;
        lib_error("%s", text);
    }
    free(text);
    diag_free(d);
    return rc;
}

const char *milc_last_error(void) { return last_err; }

const char *milc_version(void) { return MILC_VERSION; }

const char *milc_strerror(int status) {
    switch (status) {
    case MILC_OK: return "success";
    case MILC_E_INPUT: return "invalid input";
    case MILC_E_USAGE: return "invalid call";
    case MILC_E_SYSTEM: return "system failure";
    case MILC_E_UNSUPPORTED: return "not supported";
    case MILC_E_NOTFOUND: return "not found";
    }
    return "unknown status";
}

int64_t milc_now_ns(void) { return lib_now_ns(); }

/* ---- the cache ----------------------------------------------------------- */

/* The installed templates when they are there, else the source tree's. */
static const char *default_templates(void) {
    static const char installed[] = MILC_INSTALL_PREFIX "/share/milc/templates";
    return access(installed, R_OK) == 0 ? installed : MILC_BUILTIN_TEMPLATE_DIR;
}

int api_verify_policy(int verify) {
    return verify == MILC_VERIFY_ALWAYS  ? BUILD_VERIFY_FULL
           : verify == MILC_VERIFY_NEVER ? BUILD_VERIFY_NONE
                                         : BUILD_VERIFY_ONCE;
}

MilcStatus milc_cache_open(MilcCache **out, const char *dir, const MilcCacheOptions *o) {
    ApiCall k;
    api_begin(&k);
    if (!out || !dir || !*dir) return api_end(&k, MILC_E_USAGE);
    *out = NULL;
    MilcCache *c = calloc(1, sizeof *c);
    if (c && o) c->o = *o;
    if (!c || !(c->dir = strdup(dir))) {
        free(c);
        lib_error("out of memory");
        return api_end(&k, MILC_E_SYSTEM);
    }
    if (c->o.verify < MILC_VERIFY_ONCE || c->o.verify > MILC_VERIFY_NEVER) {
        lib_error("verify option %d is not a MILC_VERIFY_* value", c->o.verify);
        free(c->dir), free(c);
        return api_end(&k, MILC_E_USAGE);
    }
    if (tpath_init(&c->tp, c->o.template_dirs ? c->o.template_dirs : default_templates()) != 0) {
        free(c->dir), free(c);
        lib_error("out of memory");
        return api_end(&k, MILC_E_SYSTEM);
    }
    c->o.template_dirs = NULL; /* the caller's string: not kept */
    char err[512] = "";
    int r = store_lmdb_open(&c->store, dir, NULL, err, sizeof err);
    if (r != 0) {
        lib_error("%s", err[0] ? err : cache_strerror(r));
        tpath_free(&c->tp);
        free(c->dir), free(c);
        return api_end(&k, MILC_E_SYSTEM);
    }
    *out = c;
    return api_end(&k, MILC_OK);
}

void milc_cache_close(MilcCache *c) {
    if (!c) return;
    store_close(c->store);
    tpath_free(&c->tp);
    free(c->dir);
    free(c);
}

/* ---- builds -------------------------------------------------------------- */

struct MilcBuild {
    MilcProgramInfo *v;
    int n, cap;
};

_Static_assert((int)MILC_MODE_BOTH == (int)RT_MODE_BOTH && (int)MILC_MODE_NONBONDED == (int)RT_MODE_NONBONDED &&
                   (int)MILC_MODE_BONDED == (int)RT_MODE_BONDED && RT_NMODES == 3,
               "milc.h's modes are the runtime's table");

const char *milc_mode_name(int mode) { return rt_mode(mode) ? rt_mode(mode)->name : NULL; }

/* req as the jobs' spec; modes holds the mode's text.  MILC_OK or MILC_E_USAGE. */
static int request_spec(const MilcRequest *req, char modes[16], JobSpec *spec) {
    int mode = req->mode == MILC_MODE_DEFAULT ? RT_MODE_DEFAULT : req->mode;
    if (!milc_mode_name(mode)) {
        lib_error("mode %d is not a compile mode", req->mode);
        return MILC_E_USAGE;
    }
    if (req->nparams < 0 || (req->nparams && !req->params) || req->chunk < 0) {
        lib_error("a request with %d parameters at %p, chunk %ld", req->nparams, (const void *)req->params, req->chunk);
        return MILC_E_USAGE;
    }
    for (int i = 0; i < req->nparams; i++)
        if (!req->params[i].name || !req->params[i].value) {
            lib_error("parameter %d has no name or no value", i);
            return MILC_E_USAGE;
        }
    snprintf(modes, 16, "%d", mode);
    *spec = (JobSpec){.config = req->model,
                      .weights = req->weights,
                      .modes = modes,
                      .chunk = req->chunk,
                      .extra = req->params,
                      .nextra = req->nparams};
    return MILC_OK;
}

static void collect(void *ctx, int idx, const char *label, const BuildResult *r) {
    MilcBuild *b = ctx;
    if (b->n == b->cap) {
        int cap = b->cap ? 2 * b->cap : 8;
        MilcProgramInfo *v = realloc(b->v, (size_t)cap * sizeof *v);
        if (!v) return; /* counted short: milc_build reports it */
        b->v = v, b->cap = cap;
    }
    MilcProgramInfo *p = &b->v[b->n++];
    memset(p, 0, sizeof *p);
    (void)idx;
    cache_key_hex(&r->key, p->key);
    snprintf(p->label, sizeof p->label, "%s", label);
    p->outcome = r->outcome == BUILD_MISS         ? MILC_BUILT
                 : r->outcome == BUILD_HIT_DIRECT ? MILC_HIT_DIRECT
                                                  : MILC_HIT_FULL;
    p->artifact_bytes = r->artifact_bytes;
    p->ms_total = r->ms_total;
    p->ms_compile = r->ms_generate + r->ms_check + r->ms_passes + r->ms_lower;
}

MilcStatus milc_compile_file_with(const char *path, const char *out_path, const MilcCompileOptions *mo) {
    ApiCall k;
    api_begin(&k);
    MilcCompileOptions def = {.mode = MILC_MODE_DEFAULT};
    if (!mo) mo = &def;
    if (!path || !out_path || mo->nshapes < 0 || (mo->nshapes && !mo->shapes)) return api_end(&k, MILC_E_USAGE);
    CompileFileOptions o = {.mode = mo->mode == MILC_MODE_DEFAULT ? RT_MODE_DEFAULT : mo->mode,
                            .function = mo->function};
    if (!milc_mode_name(o.mode)) {
        lib_error("mode %d is not a compile mode", mo->mode);
        return api_end(&k, MILC_E_USAGE);
    }
    MilInputShape *shapes = calloc((size_t)mo->nshapes + 1, sizeof *shapes);
    if (!shapes) return api_end(&k, MILC_E_SYSTEM);
    for (int i = 0; i < mo->nshapes; i++) {
        const MilcShape *s = &mo->shapes[i];
        if (!s->name || s->rank < 0 || s->rank > MILC_MAX_RANK) {
            lib_error("shape %d: a name and a rank from 0 to %d", i, MILC_MAX_RANK);
            free(shapes);
            return api_end(&k, MILC_E_USAGE);
        }
        shapes[i].name = s->name, shapes[i].rank = s->rank;
        memcpy(shapes[i].dims, s->dims, sizeof(int64_t) * (size_t)s->rank);
    }
    o.shapes = shapes, o.nshapes = mo->nshapes;
    DiagSink d;
    diag_init(&d);
    CompileFileResult r;
    int rc = pipeline_compile_file(path, out_path, &o, &r, &d);
    free(r.dump);
    free(shapes);
    return api_end(&k, api_diags(&d, rc));
}

MilcStatus milc_compile_file(const char *path, const char *out_path, int mode) {
    return milc_compile_file_with(path, out_path, &(MilcCompileOptions){.mode = mode});
}

MilcStatus milc_build(MilcCache *c, const MilcRequest *req, MilcBuild **out) {
    ApiCall k;
    api_begin(&k);
    if (!c || !req || !out) return api_end(&k, MILC_E_USAGE);
    *out = NULL;
    char modes[16];
    JobSpec spec;
    int rc = request_spec(req, modes, &spec);
    if (rc != MILC_OK) return api_end(&k, rc);
    MilcBuild *b = calloc(1, sizeof *b);
    if (!b) {
        lib_error("out of memory");
        return api_end(&k, MILC_E_SYSTEM);
    }
    DiagSink d;
    diag_init(&d);
    RequestOptions o = {
        .verify_hits = api_verify_policy(c->o.verify), .tmp_root = c->dir, .max_memory = c->o.max_memory};
    rc = build_request(c->store, &c->tp, &spec, &o, collect, b, &d);
    rc = api_diags(&d, rc);
    if (rc == MILC_OK && b->n == 0) lib_error("the request makes no program"), rc = MILC_E_INPUT;
    if (rc != MILC_OK) {
        milc_build_free(b);
        return api_end(&k, rc);
    }
    for (int i = 0; i < b->n; i++) b->v[i].mode = atoi(modes);
    *out = b;
    return api_end(&k, MILC_OK);
}

int milc_build_count(const MilcBuild *b) { return b ? b->n : 0; }

MilcStatus milc_build_program(const MilcBuild *b, int i, MilcProgramInfo *out) {
    ApiCall k;
    api_begin(&k);
    if (!b || !out || i < 0 || i >= b->n) return api_end(&k, MILC_E_USAGE);
    *out = b->v[i];
    return api_end(&k, MILC_OK);
}

void milc_build_free(MilcBuild *b) {
    if (!b) return;
    free(b->v);
    free(b);
}

MilcStatus milc_request_param(MilcCache *c, const MilcRequest *req, const char *name, char *out, size_t n) {
    ApiCall k;
    api_begin(&k);
    if (!c || !req || !name || !out || !n) return api_end(&k, MILC_E_USAGE);
    char modes[16];
    JobSpec spec;
    int rc = request_spec(req, modes, &spec);
    if (rc != MILC_OK) return api_end(&k, rc);
    BuildJob j = {.config = (char *)jobs_config(&spec), .nparams = req->nparams};
    char **names = calloc((size_t)req->nparams + 1, sizeof *names),
         **values = calloc((size_t)req->nparams + 1, sizeof *values);
    if (!names || !values) {
        free(names), free(values);
        lib_error("out of memory");
        return api_end(&k, MILC_E_SYSTEM);
    }
    for (int i = 0; i < req->nparams; i++)
        names[i] = (char *)req->params[i].name, values[i] = (char *)req->params[i].value;
    j.names = names, j.values = values;
    DiagSink d;
    diag_init(&d);
    GenConfig *cfg = job_config(&c->tp, &j, &d);
    free(names), free(values);
    rc = api_diags(&d, cfg ? MILC_OK : MILC_E_INPUT);
    if (rc != MILC_OK) return api_end(&k, rc);
    int64_t v;
    double f;
    const char *s;
    if (gen_config_get_int(cfg, name, &v))
        snprintf(out, n, "%lld", (long long)v);
    else if (gen_config_get_float(cfg, name, &f))
        snprintf(out, n, "%.17g", f);
    else if (gen_config_get_str(cfg, name, &s))
        snprintf(out, n, "%s", s);
    else
        lib_error("template '%s' has no parameter '%s'", j.config, name), rc = MILC_E_NOTFOUND;
    gen_config_free(cfg);
    return api_end(&k, rc);
}

/* ---- prewarm ------------------------------------------------------------- */

static void tally(void *ctx, int idx, const char *label, const BuildResult *r) {
    MilcPrewarmResult *t = ctx;
    (void)idx, (void)label;
    t->programs++;
    if (r->outcome == BUILD_MISS)
        t->built++;
    else
        t->hits++;
}

/* Every line of the manifest text (cut in place) as a spec, checked; then
 * each built.  The counts in *t. */
static int prewarm_text(MilcCache *c, char *text, const char *file, MilcPrewarmResult *t, DiagSink *d) {
    ManifestLine *lines = NULL;
    int nlines = 0, lineno = 0, rc = MILC_OK;
    for (char *p = text, *next; p && *p; p = next) {
        lineno++;
        next = strchr(p, '\n');
        if (next) *next++ = 0;
        ManifestLine ln;
        if (manifest_parse_line(p, (SrcLoc){file, lineno, 1}, &ln, d) != 0 ||
            (!ln.config && !ln.nextra && !ln.chunk && !ln.modes && !ln.weights)) {
            manifest_line_free(&ln);
            continue;
        }
        ManifestLine *nl = realloc(lines, sizeof *nl * (size_t)(nlines + 1));
        if (!nl) {
            manifest_line_free(&ln);
            lib_error("out of memory");
            rc = MILC_E_SYSTEM;
            break;
        }
        lines = nl;
        lines[nlines++] = ln;
        JobList jl = {0}; /* checked now: a bad line fails before anything is built */
        JobSpec spec = manifest_line_spec(&ln, (SrcLoc){file, lineno, 1});
        jobs_expand(&c->tp, &spec, &jl, d);
        jobs_free(&jl);
    }
    if (rc == MILC_OK && diag_failed(d)) rc = MILC_E_INPUT;
    RequestOptions o = {
        .verify_hits = api_verify_policy(c->o.verify), .tmp_root = c->dir, .max_memory = c->o.max_memory};
    for (int i = 0; i < nlines && rc == MILC_OK; i++) {
        JobSpec spec = {.config = lines[i].config,
                        .weights = lines[i].weights,
                        .modes = lines[i].modes,
                        .chunk = lines[i].chunk,
                        .max_chunk_bytes = lines[i].max_chunk_bytes,
                        .extra = lines[i].extra,
                        .nextra = lines[i].nextra};
        int brc = build_request(c->store, &c->tp, &spec, &o, tally, t, d);
        if (brc == MILC_E_SYSTEM)
            rc = brc;
        else if (brc != MILC_OK)
            t->failed++; /* a request that fails reports none of its programs */
    }
    if (rc == MILC_OK && t->failed) rc = MILC_E_INPUT;
    for (int i = 0; i < nlines; i++) manifest_line_free(&lines[i]);
    free(lines);
    return rc;
}

MilcStatus milc_prewarm(MilcCache *c, const char *manifest_path, MilcPrewarmResult *done) {
    ApiCall k;
    api_begin(&k);
    MilcPrewarmResult t = {0};
    if (done) *done = t;
    if (!c || !manifest_path) return api_end(&k, MILC_E_USAGE);
    char oerr[600];
    void *buf;
    size_t len;
    int orc = os_read_file(manifest_path, 0, &buf, &len, oerr, sizeof oerr);
    if (orc) {
        lib_error("%s", oerr);
        return api_end(&k, orc == -EINVAL ? MILC_E_INPUT : MILC_E_SYSTEM);
    }
    char *text = realloc(buf, len + 1);
    if (!text) {
        free(buf);
        lib_error("out of memory");
        return api_end(&k, MILC_E_SYSTEM);
    }
    text[len] = 0;
    DiagSink d;
    diag_init(&d);
    const char *file = diag_add_source(&d, manifest_path, text, len);
    int rc = prewarm_text(c, text, file, &t, &d);
    rc = api_diags(&d, rc);
    free(text);
    if (done) *done = t;
    return api_end(&k, rc);
}
