/* request.c — a whole request remembered.  Finding a program by its direct
 * key still means reading and parsing its template (the key holds the
 * resolved parameters), and parsing means loading libxml2, which on Debian
 * brings ICU and libstdc++: about 2.5 ms of a warm `milc build` that
 * otherwise takes 3.  So the request itself gets a key: its record holds
 * everything its programs depend on that is known before a template is read
 * — the key and artifact formats, milc's version, the backend, the request's
 * own words (config, weight source and digest, modes, chunk, each parameter
 * in order) and the template path (its directories and the digest of every
 * template file in them).  Its note lists the jobs with their artifact keys.
 * Any change to any template file, or any other word of the request, is a
 * miss: the ordinary path (direct key, full key, compile) runs and writes the
 * note anew. */
#include <stdlib.h>
#include <string.h>

#include "request.h"

#define TAG(a, b, c, d) ((uint32_t)(a) << 24 | (uint32_t)(b) << 16 | (uint32_t)(c) << 8 | (uint32_t)(d))

enum { NOTE_VERSION = 1, MAX_NOTE_JOBS = 100000 };
static const char note_magic[4] = {'M', 'R', 'Q', '1'};

typedef struct Request {
    CacheKeyBuilder rec;
    CacheKey key;
    bool usable; /* the record could be made: the note may be read and written */
} Request;

static double ms_since(long long t0) { return (double)(cli_now_ns() - t0) / 1e6; }

static void request_init(Request *r, const TemplatePath *tp, const JobSpec *spec) {
    memset(r, 0, sizeof *r);
    ckey_init(&r->rec);
    uint8_t pdig[16], wdig[16];
    const char *weights = spec->weights ? spec->weights : "random:0";
    DiagSink quiet; /* a bad weight source is reported by the ordinary path */
    diag_init(&quiet);
    bool ok = gen_path_digest(&tp->sp, pdig) == 0 && gen_weights_digest(weights, wdig, &quiet) == 0;
    diag_free(&quiet);
    if (!ok) return;
    CacheKeyBuilder *b = &r->rec;
    pipeline_key_base(b);
    ckey_add_u64(b, TAG('R', 'Q', 'S', 'T'), NOTE_VERSION);
    for (int i = 0; i < tp->sp.count; i++) ckey_add_str(b, TAG('T', 'D', 'I', 'R'), tp->sp.dirs[i]);
    ckey_add(b, TAG('T', 'D', 'I', 'G'), pdig, 16);
    ckey_add_str(b, TAG('C', 'O', 'N', 'F'), spec->config ? spec->config : "gpt2");
    ckey_add_str(b, TAG('W', 'S', 'R', 'C'), weights);
    ckey_add(b, TAG('W', 'D', 'I', 'G'), wdig, 16);
    ckey_add_str(b, TAG('M', 'O', 'D', 'S'), spec->modes ? spec->modes : "2");
    ckey_add_u64(b, TAG('C', 'H', 'N', 'K'), (uint64_t)spec->chunk);
    for (int i = 0; i < spec->nextra; i++) {
        ckey_add_str(b, TAG('P', 'N', 'A', 'M'), spec->extra[i].name);
        ckey_add_str(b, TAG('P', 'V', 'A', 'L'), spec->extra[i].value);
    }
    r->usable = ckey_finish(b, &r->key) == 0;
}

/* ---- the note: "MRQ1", u32 LE jobs, then per job: u8 mode, u16 LE label
 * length, the label, the 16-byte artifact key.  Read as untrusted. ---- */

typedef struct NoteJob {
    int mode;
    char label[256];
    CacheKey key;
} NoteJob;

static int note_parse(const uint8_t *p, size_t n, NoteJob **out) {
    *out = NULL;
    if (n < 8 || memcmp(p, note_magic, 4) != 0) return -1;
    uint32_t nj = (uint32_t)p[4] | (uint32_t)p[5] << 8 | (uint32_t)p[6] << 16 | (uint32_t)p[7] << 24;
    if (nj == 0 || nj > MAX_NOTE_JOBS) return -1;
    NoteJob *v = calloc(nj, sizeof *v);
    if (!v) return -1;
    size_t at = 8;
    for (uint32_t i = 0; i < nj; i++) {
        if (n - at < 3) goto bad;
        unsigned mode = p[at], len = (unsigned)p[at + 1] | (unsigned)p[at + 2] << 8;
        at += 3;
        if (mode > 2 || len >= sizeof v[i].label || n - at < (size_t)len + 16) goto bad;
        v[i].mode = (int)mode;
        memcpy(v[i].label, p + at, len);
        memcpy(v[i].key.b, p + at + len, 16);
        at += len + 16;
    }
    if (at != n) goto bad;
    *out = v;
    return (int)nj;
bad:
    free(v);
    return -1;
}

static void note_write(Cache *c, const Request *r, const JobList *jobs, const CacheKey *keys) {
    size_t cap = 8;
    for (int i = 0; i < jobs->n; i++) cap += 3 + strlen(jobs->v[i].label) + 16;
    uint8_t *buf = malloc(cap), *p = buf;
    if (!buf) return; /* the note is an optimisation */
    memcpy(p, note_magic, 4);
    for (int k = 0; k < 4; k++) p[4 + k] = (uint8_t)((uint32_t)jobs->n >> (8 * k));
    p += 8;
    for (int i = 0; i < jobs->n; i++) {
        size_t len = strlen(jobs->v[i].label);
        *p++ = (uint8_t)jobs->v[i].mode;
        *p++ = (uint8_t)len, *p++ = (uint8_t)(len >> 8);
        memcpy(p, jobs->v[i].label, len);
        memcpy(p + len, keys[i].b, 16);
        p += len + 16;
    }
    /* Best effort: a note that cannot be stored costs the next run its speed,
     * not its result. */
    (void)cache_note_put(c, &r->key, r->rec.buf, r->rec.len, buf, (size_t)(p - buf));
    free(buf);
}

/* Every program of the note, found directly: 0 with results[], else -1
 * (nothing held). */
static int from_note(Cache *c, const Request *r, const RequestOptions *o, long long t0, NoteJob **jobs,
                     BuildResult **results, int *njobs) {
    void *val;
    size_t len;
    if (cache_note_get(c, &r->key, r->rec.buf, r->rec.len, &val, &len) != 0) return -1;
    int n = note_parse(val, len, jobs);
    free(val);
    if (n < 0) return -1;
    BuildResult *res = calloc((size_t)n, sizeof *res);
    if (!res) { free(*jobs); return -1; }
    double note_ms = ms_since(t0);
    for (int i = 0; i < n; i++) {
        long long t1 = cli_now_ns();
        CacheHit *hit;
        if (cache_get(c, &(*jobs)[i].key, NULL, 0, verify_get_flags(o->verify_hits) | CACHE_GET_COUNT_DIRECT, &hit) != 0)
            goto miss;
        bool ok = pipeline_hit_usable(hit, (*jobs)[i].mode);
        res[i] = (BuildResult){.key = (*jobs)[i].key, .outcome = BUILD_HIT_DIRECT,
                               .artifact_bytes = cache_hit_info(hit)->bytes,
                               .checksummed = cache_hit_info(hit)->checked};
        cache_hit_release(hit);
        if (!ok) goto miss;
        res[i].ms_lookup = res[i].ms_total = ms_since(t1) + (i == 0 ? note_ms : 0);
    }
    *results = res, *njobs = n;
    return 0;
miss:
    free(res);
    free(*jobs);
    *jobs = NULL;
    return -1;
}

int build_request(Cache *c, const TemplatePath *tp, const JobSpec *spec, const RequestOptions *o, RequestResultFn fn,
                  void *ctx, DiagSink *d) {
    long long t0 = cli_now_ns(); /* the template path's digest is part of the first lookup */
    Request r;
    request_init(&r, tp, spec);
    NoteJob *nj;
    BuildResult *res;
    int n;
    if (r.usable && from_note(c, &r, o, t0, &nj, &res, &n) == 0) {
        for (int i = 0; i < n; i++) fn(ctx, i, nj[i].label[0] ? nj[i].label : (spec->config ? spec->config : "gpt2"), &res[i]);
        free(nj);
        free(res);
        ckey_free(&r.rec);
        return EXIT_OK;
    }
    JobList jobs = {0};
    CacheKey *keys = NULL;
    int rc = EXIT_OK;
    if (jobs_expand(tp, spec, &jobs, d) != 0) rc = EXIT_INPUT;
    else if (!(keys = calloc((size_t)jobs.n + 1, sizeof *keys))) cli_error("out of memory"), rc = EXIT_SYSTEM;
    for (int i = 0; i < jobs.n && rc == EXIT_OK; i++) {
        GenConfig *cfg = job_config(tp, &jobs.v[i], d);
        if (!cfg) { rc = EXIT_INPUT; break; }
        BuildResult br;
        rc = pipeline_build(c, &(BuildRequest){.config = cfg, .weights = jobs.v[i].weights, .mode = jobs.v[i].mode,
                                                .tmp_root = o->tmp_root, .verify_hits = o->verify_hits},
                            &br, d);
        gen_config_free(cfg);
        if (rc != EXIT_OK) break;
        keys[i] = br.key;
        fn(ctx, i, jobs.v[i].label[0] ? jobs.v[i].label : jobs.v[i].config, &br);
    }
    if (rc == EXIT_OK && r.usable && jobs.n > 0) note_write(c, &r, &jobs, keys);
    free(keys);
    jobs_free(&jobs);
    ckey_free(&r.rec);
    return rc;
}
