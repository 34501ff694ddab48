/* request.c — a whole request remembered.  Finding a program by its direct
 * key still means reading and parsing its template (the key holds the
 * resolved parameters), and parsing means loading libxml2, which on Debian
 * brings ICU and libstdc++: together about 2.5 of the 6.5 ms a warm 3-chunk
 * `milc build` took.  So the request itself gets a key: its record holds
 * everything its programs depend on that is known before a template is read
 * — the key and artifact formats, milc's version, the backend, the request's
 * own words (config, weight source and digest, modes, chunk, each parameter
 * in order) and the template path (its directories and the digest of every
 * template file in them).  Its note lists the jobs with their artifact keys.
 * Any change to any template file, or any other word of the request, is a
 * miss: the ordinary path (direct key, full key, compile) runs and writes the
 * note anew. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "note.h"
#include "milc/request.h"


enum { NOTE_VERSION = 1 };

typedef struct Request {
    CacheKeyBuilder rec;
    CacheKey key;
    uint8_t wdig[16]; /* the weight source's digest, shared with every job */
    bool usable; /* the record could be made: the note may be read and written */
} Request;


/* wdig: the digest of the weights compiled, or NULL: of the file as it is
 * now (to look the note up). */
static void request_init(Request *r, const TemplatePath *tp, const JobSpec *spec, const uint8_t *wdig_of) {
    memset(r, 0, sizeof *r);
    ckey_init(&r->rec);
    uint8_t pdig[16], *wdig = r->wdig;
    const char *weights = spec->weights ? spec->weights : "random:0";
    DiagSink quiet; /* a bad weight source is reported by the ordinary path */
    diag_init(&quiet);
    if (wdig_of) memcpy(wdig, wdig_of, 16);
    bool ok = gen_path_digest(&tp->sp, pdig) == 0 && (wdig_of || gen_weights_digest(weights, wdig, &quiet) == 0);
    diag_free(&quiet);
    if (!ok) return;
    CacheKeyBuilder *b = &r->rec;
    pipeline_key_base(b);
    ckey_add_u64(b, KEY_TAG('R', 'Q', 'S', 'T'), NOTE_VERSION);
    for (int i = 0; i < tp->sp.count; i++) ckey_add_str(b, KEY_TAG('T', 'D', 'I', 'R'), tp->sp.dirs[i]);
    ckey_add(b, KEY_TAG('T', 'D', 'I', 'G'), pdig, 16);
    ckey_add_str(b, KEY_TAG('C', 'O', 'N', 'F'), jobs_config(spec));
    ckey_add_str(b, KEY_TAG('W', 'S', 'R', 'C'), weights);
    ckey_add(b, KEY_TAG('W', 'D', 'I', 'G'), wdig, 16);
    ckey_add_str(b, KEY_TAG('M', 'O', 'D', 'S'), spec->modes ? spec->modes : RT_MODE_STR(RT_MODE_DEFAULT_N));
    ckey_add_u64(b, KEY_TAG('C', 'H', 'N', 'K'), (uint64_t)spec->chunk);
    ckey_add_u64(b, KEY_TAG('W', 'H', 'O', 'L'), spec->whole);
    for (int i = 0; i < spec->nextra; i++) {
        ckey_add_str(b, KEY_TAG('P', 'N', 'A', 'M'), spec->extra[i].name);
        ckey_add_str(b, KEY_TAG('P', 'V', 'A', 'L'), spec->extra[i].value);
    }
    r->usable = ckey_finish(b, &r->key) == 0;
}

/* The note lists the jobs with their artifact keys (note.c). */
static void note_write(Store *s, const Request *r, const BuildJob *jobs, int n, const CacheKey *keys) {
    NoteJob *v = calloc((size_t)n, sizeof *v);
    size_t len;
    uint8_t *buf = NULL;
    if (v) {
        for (int i = 0; i < n; i++) {
            v[i].mode = jobs[i].mode;
            snprintf(v[i].label, sizeof v[i].label, "%s", jobs[i].label);
            v[i].key = keys[i];
        }
        buf = note_encode(v, n, &len);
    }
    /* Best effort: a note that cannot be stored costs the next run its speed,
     * not its result. */
    if (buf) (void)store_note_put(s, &r->key, r->rec.buf, r->rec.len, buf, len);
    free(buf);
    free(v);
}

/* Every program of the note, found directly: 0 with results[], else -1
 * (nothing held). */
static int from_note(Store *s, const Request *r, const RequestOptions *o, long long t0, NoteJob **jobs,
                     BuildResult **results, int *njobs) {
    void *val;
    size_t len;
    if (store_note_get(s, &r->key, r->rec.buf, r->rec.len, &val, &len) != 0) return -1;
    int n = note_decode(val, len, jobs);
    free(val);
    if (n < 0) return -1;
    BuildResult *res = calloc((size_t)n, sizeof *res);
    if (!res) { free(*jobs); return -1; }
    double note_ms = lib_ms_since(t0);
    for (int i = 0; i < n; i++) {
        long long t1 = lib_now_ns();
        StoreEntry *hit;
        if (store_get(s, &(*jobs)[i].key, NULL, 0, verify_store_flags(o->verify_hits) | STORE_GET_COUNT_DIRECT, &hit) != 0)
            goto miss;
        bool ok = pipeline_hit_usable(hit, (*jobs)[i].mode);
        res[i] = (BuildResult){.key = (*jobs)[i].key, .outcome = BUILD_HIT_DIRECT,
                               .artifact_bytes = hit->bytes, .checksummed = hit->checked, .from_note = true};
        store_release(s, hit);
        if (!ok) goto miss;
        res[i].ms_lookup = res[i].ms_total = lib_ms_since(t1) + (i == 0 ? note_ms : 0);
    }
    *results = res, *njobs = n;
    return 0;
miss:
    free(res);
    free(*jobs);
    *jobs = NULL;
    return -1;
}

int build_request(Store *s, const TemplatePath *tp, const JobSpec *spec, const RequestOptions *o, RequestResultFn fn,
                  void *ctx, DiagSink *d) {
    long long t0 = lib_now_ns(); /* the template path's digest is part of the first lookup */
    Request r;
    request_init(&r, tp, spec, NULL);
    NoteJob *nj;
    BuildResult *res;
    int n;
    uint8_t wdig[16];
    if (r.usable && from_note(s, &r, o, t0, &nj, &res, &n) == 0) {
        for (int i = 0; i < n; i++) fn(ctx, i, nj[i].label[0] ? nj[i].label : (jobs_config(spec)), &res[i]);
        free(nj);
        free(res);
        ckey_free(&r.rec);
        return MILC_OK;
    }
    JobList own = {0};
    const JobList *jobs = o->jobs ? o->jobs : &own;
    CacheKey *keys = NULL;
    GenWeights *src = NULL;
    int rc = MILC_OK;
    if (!o->jobs && jobs_expand(tp, spec, &own, d) != 0) rc = MILC_E_INPUT;
    else if (!(keys = calloc((size_t)jobs->n + 1, sizeof *keys))) lib_error("out of memory"), rc = MILC_E_SYSTEM;
    else if (gen_weights_open(spec->weights, &src, d) != 0) rc = d->system_errors ? MILC_E_SYSTEM : MILC_E_INPUT;
    else if (r.usable && (gen_weights_id(src, wdig), memcmp(wdig, r.wdig, 16) != 0)) {
        /* Replaced since the note was looked up: the note names what is compiled. */
        ckey_free(&r.rec);
        request_init(&r, tp, spec, wdig);
    }
    for (int i = 0; i < jobs->n && rc == MILC_OK; i++) {
        GenConfig *cfg = job_config(tp, &jobs->v[i], d);
        if (!cfg) { rc = MILC_E_INPUT; break; }
        BuildResult br;
        rc = pipeline_build(s, &(BuildRequest){.config = cfg, .weights = jobs->v[i].weights, .mode = jobs->v[i].mode,
                                                .source = src, .tmp_root = o->tmp_root, .verify_hits = o->verify_hits,
                                                .max_memory = o->max_memory, .remote = o->remote},
                            &br, d);
        gen_config_free(cfg);
        if (rc != MILC_OK) break;
        keys[i] = br.key;
        fn(ctx, i, jobs->v[i].label[0] ? jobs->v[i].label : jobs->v[i].config, &br);
    }
    if (rc == MILC_OK && r.usable && jobs->n > 0) note_write(s, &r, jobs->v, jobs->n, keys);
    gen_weights_close(src);
    free(keys);
    jobs_free(&own);
    ckey_free(&r.rec);
    return rc;
}

void request_remember(Store *s, const TemplatePath *tp, const JobSpec *spec, const BuildJob *jobs, int n,
                      const CacheKey *keys, const uint8_t wdig[16]) {
    Request r;
    request_init(&r, tp, spec, wdig);
    if (r.usable && n > 0) note_write(s, &r, jobs, n, keys);
    ckey_free(&r.rec);
}
