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
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "note.h"
#include "milc/request.h"
#include "milc/ossys.h"

enum { NOTE_VERSION = 2 }; /* 2: a --chunk request's note holds its splits */

typedef struct Request {
    CacheKeyBuilder rec;
    CacheKey key;
    uint8_t wdig[16]; /* the weight source's digest, shared with every job */
    bool usable;      /* the record could be made: the note may be read and written */
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
    /* Only auto's ceiling: every other request keeps the key it had. */
    if (spec->chunk == JOBS_CHUNK_AUTO)
        ckey_add_u64(b, KEY_TAG('C', 'M', 'A', 'X'),
                     spec->max_chunk_bytes ? spec->max_chunk_bytes : JOBS_DEFAULT_MAX_CHUNK_BYTES);
    ckey_add_u64(b, KEY_TAG('W', 'H', 'O', 'L'), spec->whole);
    for (int i = 0; i < spec->nextra; i++) {
        ckey_add_str(b, KEY_TAG('P', 'N', 'A', 'M'), spec->extra[i].name);
        ckey_add_str(b, KEY_TAG('P', 'V', 'A', 'L'), spec->extra[i].value);
    }
    r->usable = ckey_finish(b, &r->key) == 0;
}

/* The note lists the jobs with their artifact keys (note.c). */
static void note_write(Store *s, const Request *r, const BuildJob *jobs, int n, const JobList *splits,
                       const CacheKey *keys) {
    NoteJob *v = calloc((size_t)n, sizeof *v);
    size_t len;
    uint8_t *buf = NULL;
    if (v) {
        for (int i = 0; i < n; i++) {
            v[i].mode = jobs[i].mode;
            snprintf(v[i].label, sizeof v[i].label, "%s", jobs[i].label);
            v[i].key = keys[i];
        }
        buf = note_encode(v, n, splits, &len);
    }
    /* Best effort: a note that cannot be stored costs the next run its speed,
     * not its result. */
    if (buf) (void)store_note_put(s, &r->key, r->rec.buf, r->rec.len, buf, len);
    free(buf);
    free(v);
}

/* Every program of the note, found directly: 0 with results[] and the
 * note's splits (the caller jobs_frees them), else -1 (nothing held).  A
 * caller that reports splits (o->on_split) misses on a note without them. */
static int from_note(Store *s, const Request *r, const RequestOptions *o, const JobSpec *spec, long long t0,
                     NoteJob **jobs, JobList *splits, BuildResult **results, int *njobs) {
    void *val;
    size_t len;
    if (store_note_get(s, &r->key, r->rec.buf, r->rec.len, &val, &len) != 0) return -1;
    int n = note_decode(val, len, jobs, splits);
    free(val);
    if (n < 0) return -1;
    if (o->on_split && spec->chunk && !splits->nsplits) {
        free(*jobs);
        *jobs = NULL;
        return -1;
    }
    BuildResult *res = calloc((size_t)n, sizeof *res);
    if (!res) {
        free(*jobs);
        return -1;
    }
    double note_ms = lib_ms_since(t0);
    for (int i = 0; i < n; i++) {
        long long t1 = lib_now_ns();
        StoreEntry *hit;
        if (store_get(s, &(*jobs)[i].key, NULL, 0, verify_store_flags(o->verify_hits) | STORE_GET_COUNT_DIRECT, &hit) !=
            0)
            goto miss;
        bool ok = pipeline_hit_usable(hit, (*jobs)[i].mode);
        res[i] = (BuildResult){.key = (*jobs)[i].key,
                               .outcome = BUILD_HIT_DIRECT,
                               .artifact_bytes = hit->bytes,
                               .checksummed = hit->checked,
                               .from_note = true};
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
    jobs_free(splits);
    return -1;
}

/* ---- a request's programs: one stored while the next is made ----
 *
 * Every job is looked up first, in order.  The misses are then made (generate,
 * check, compile) on this thread while a storer thread stores the one made
 * before: on two cores the disk's part and the CPU's part of consecutive
 * programs overlap.  The storer is the Store's only user while it runs (a
 * Store has one user at a time; this thread touches it again only after
 * waiting for the storer).  Two programs share memory: the one being stored
 * hands its pages back as the cache copies them, at the disk's pace, and the
 * one being made may touch new bytes only while the two fit in the stored
 * one's size and BUDGET_SLACK (BuildBudget).  So the making follows the
 * store instead of racing ahead to a second whole program, and a cold
 * build's peak stays near one program's (lib/README.md, "Overlap"). */

enum { BUDGET_SLACK = 16u << 20 }; /* a few of the cache's 2 MiB copy blocks */

typedef struct Storer {
    Store *s;
    const LibSink *sink; /* the caller's thread sink: the storer's messages go where its would */
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    PipelineKept *job; /* handed, not yet stored */
    BuildResult *res;
    int rc; /* of the last job stored */
    bool busy, quit;
    /* The budget, under mu: bytes of the job being stored not handed back
     * yet, bytes the program being made has touched, and their limit while
     * busy. */
    uint64_t stored, made, limit;
} Storer;

static void *storer_main(void *arg) {
    Storer *st = arg;
    lib_sink_push(st->sink);
    pthread_mutex_lock(&st->mu);
    for (;;) {
        while (!st->job && !st->quit) pthread_cond_wait(&st->cv, &st->mu);
        if (!st->job) break;
        PipelineKept *k = st->job;
        BuildResult *res = st->res;
        pthread_mutex_unlock(&st->mu);
        int rc = pipeline_keep(st->s, k, res);
        pthread_mutex_lock(&st->mu);
        st->job = NULL, st->rc = rc, st->busy = false, st->stored = 0;
        pthread_cond_broadcast(&st->cv);
    }
    pthread_mutex_unlock(&st->mu);
    return NULL;
}

static bool storer_start(Storer *st, Store *s) {
    memset(st, 0, sizeof *st);
    st->s = s;
    st->sink = lib_sink_push(NULL);
    lib_sink_pop(st->sink);
    if (pthread_mutex_init(&st->mu, NULL) != 0) return false;
    if (pthread_cond_init(&st->cv, NULL) != 0) {
        pthread_mutex_destroy(&st->mu);
        return false;
    }
    if (pthread_create(&st->th, NULL, storer_main, st) != 0) {
        pthread_cond_destroy(&st->cv);
        pthread_mutex_destroy(&st->mu);
        return false; /* then each is stored on this thread */
    }
    return true;
}

/* BuildBudget.take: wait while the storer is busy and n more bytes would
 * not fit beside what it still holds. */
static void budget_take(void *ctx, uint64_t n) {
    Storer *st = ctx;
    pthread_mutex_lock(&st->mu);
    while (st->busy && st->stored + st->made + n > st->limit) pthread_cond_wait(&st->cv, &st->mu);
    st->made += n;
    pthread_mutex_unlock(&st->mu);
}

/* BuildBudget.give, on the storer's thread as its put copies. */
static void budget_give(void *ctx, uint64_t n) {
    Storer *st = ctx;
    pthread_mutex_lock(&st->mu);
    st->stored -= n < st->stored ? n : st->stored;
    pthread_cond_broadcast(&st->cv);
    pthread_mutex_unlock(&st->mu);
}

/* A new program is about to be made: what the one before touched is
 * either handed to the storer (counted there) or gone. */
static void budget_next(Storer *st) {
    pthread_mutex_lock(&st->mu);
    st->made = 0;
    pthread_mutex_unlock(&st->mu);
}

static void storer_hand(Storer *st, PipelineKept *k, BuildResult *res) {
    uint64_t bytes = pipeline_kept_bytes(k);
    pthread_mutex_lock(&st->mu);
    st->job = k, st->res = res, st->busy = true;
    st->stored = bytes, st->limit = bytes + BUDGET_SLACK; /* the made bytes are stored ones now: budget_next */
    pthread_cond_broadcast(&st->cv);
    pthread_mutex_unlock(&st->mu);
}

/* The job handed last, stored: its pipeline_keep's code. */
static int storer_wait(Storer *st) {
    pthread_mutex_lock(&st->mu);
    while (st->busy) pthread_cond_wait(&st->cv, &st->mu);
    int rc = st->rc;
    pthread_mutex_unlock(&st->mu);
    return rc;
}

/* BuildRequest.store_busy: the storer still storing the program handed
 * last.  Idle, its result is collected here (*prev -1), so the Store is the
 * caller's again before it looks up the next program's full key. */
typedef struct StorerPoll {
    Storer *st;
    int *prev, *rc;
    bool *done;
} StorerPoll;

static bool storer_busy(void *ctx) {
    StorerPoll *sp = ctx;
    if (*sp->prev < 0) return false;
    pthread_mutex_lock(&sp->st->mu);
    bool busy = sp->st->busy;
    int pr = sp->st->rc;
    pthread_mutex_unlock(&sp->st->mu);
    if (busy) return true;
    sp->done[*sp->prev] = pr == MILC_OK;
    if (pr != MILC_OK && *sp->rc == MILC_OK) *sp->rc = pr;
    *sp->prev = -1;
    return false;
}

static void storer_stop(Storer *st) {
    pthread_mutex_lock(&st->mu);
    st->quit = true;
    pthread_cond_broadcast(&st->cv);
    pthread_mutex_unlock(&st->mu);
    pthread_join(st->th, NULL);
    pthread_cond_destroy(&st->cv);
    pthread_mutex_destroy(&st->mu);
}

typedef struct Jobs {
    const JobList *jobs;
    BuildResult *res;
    bool *done;
    int reported;
    RequestResultFn fn;
    void *ctx;
    CacheKey *keys;
} Jobs;

/* Report, in job order, every job finished with all before it. */
static void report_ready(Jobs *j) {
    for (; j->reported < j->jobs->n && j->done[j->reported]; j->reported++) {
        const BuildJob *b = &j->jobs->v[j->reported];
        j->keys[j->reported] = j->res[j->reported].key;
        j->fn(j->ctx, j->reported, b->label[0] ? b->label : b->config, &j->res[j->reported]);
    }
}

static int build_jobs(Store *s, const TemplatePath *tp, const JobList *jobs, const RequestOptions *o,
                      const GenWeights *src, RequestResultFn fn, void *ctx, CacheKey *keys, DiagSink *d) {
    int n = jobs->n, rc = MILC_OK, limit = n, nmiss = 0, prev = -1;
    BuildResult *res = calloc((size_t)n + 1, sizeof *res);
    GenConfig **cfg = calloc((size_t)n + 1, sizeof *cfg);
    bool *miss = calloc((size_t)n + 1, 1), *done = calloc((size_t)n + 1, 1);
    Jobs j = {jobs, res, done, 0, fn, ctx, keys};
    if (!res || !cfg || !miss || !done) {
        lib_error("out of memory");
        rc = MILC_E_SYSTEM;
        goto out;
    }
#define JOB_REQUEST(i)                                                                                                 \
    .config = cfg[i], .weights = jobs->v[i].weights, .mode = jobs->v[i].mode, .source = src, .tmp_root = o->tmp_root,  \
    .verify_hits = o->verify_hits, .max_memory = o->max_memory, .remote = o->remote
    for (int i = 0; i < n; i++) { /* every job looked up, up to the first that fails */
        if (!(cfg[i] = job_config(tp, &jobs->v[i], d))) {
            rc = MILC_E_INPUT, limit = i;
            break;
        }
        int r = pipeline_build(s, &(BuildRequest){JOB_REQUEST(i), .missed = &miss[i]}, &res[i], d);
        if (r != MILC_OK) {
            rc = r, limit = i;
            break;
        }
        if (miss[i])
            nmiss++;
        else
            done[i] = true;
    }
    Storer st;
    bool threaded =
        nmiss >= 2 && (o->overlap ? o->overlap >= 2 : os_cpu_count() >= 2) && storer_start(&st, s);
    StorerPoll poll = {&st, &prev, &rc, done};
    BuildBudget budget = {budget_take, budget_give, &st};
    for (int i = 0; i < limit; i++) {
        if (!miss[i]) continue;
        double looked = res[i].ms_lookup;
        PipelineKept *k = NULL;
        if (threaded) budget_next(&st);
        int r = pipeline_build(s,
                               &(BuildRequest){JOB_REQUEST(i), .known_miss = true, .kept = &k,
                                               .store_busy = threaded ? storer_busy : NULL, .store_busy_ctx = &poll,
                                               .budget = threaded ? &budget : NULL},
                               &res[i], d);
        res[i].ms_lookup += looked;
        if (prev >= 0) { /* the Store is this thread's again */
            int pr = storer_wait(&st);
            done[prev] = pr == MILC_OK;
            if (pr != MILC_OK) rc = pr;
            prev = -1;
        }
        if (r != MILC_OK || rc != MILC_OK) {
            pipeline_kept_free(k);
            if (rc == MILC_OK) rc = r;
            break;
        }
        if (k && threaded) {
            storer_hand(&st, k, &res[i]);
            prev = i;
        } else if (k && (r = pipeline_keep(s, k, &res[i])) != MILC_OK) {
            rc = r;
            break;
        } else {
            done[i] = true;
        }
        report_ready(&j);
    }
#undef JOB_REQUEST
    if (prev >= 0) {
        int pr = storer_wait(&st);
        done[prev] = pr == MILC_OK;
        if (pr != MILC_OK && rc == MILC_OK) rc = pr;
    }
    if (threaded) storer_stop(&st);
    report_ready(&j);
out:
    if (cfg)
        for (int i = 0; i < n; i++) gen_config_free(cfg[i]);
    free(cfg);
    free(res);
    free(miss);
    free(done);
    return rc;
}

int build_request(Store *s, const TemplatePath *tp, const JobSpec *spec, const RequestOptions *o, RequestResultFn fn,
                  void *ctx, DiagSink *d) {
    long long t0 = lib_now_ns(); /* the template path's digest is part of the first lookup */
    Request r;
    uint8_t wdig[16];
    /* The weights opened first: their digest looks the note up and keys
     * every program (one pass over a checkpoint's bytes).  A source that
     * cannot be opened is reported below, where the ordinary path meets it. */
    GenWeights *src = NULL;
    DiagSink quiet;
    diag_init(&quiet);
    if (gen_weights_open(spec->weights, &src, &quiet) == 0) gen_weights_id(src, wdig);
    diag_free(&quiet);
    request_init(&r, tp, spec, src ? wdig : NULL);
    NoteJob *nj;
    JobList splits;
    BuildResult *res;
    int n;
    if (r.usable && from_note(s, &r, o, spec, t0, &nj, &splits, &res, &n) == 0) {
        if (o->on_split) o->on_split(ctx, &splits);
        jobs_free(&splits);
        for (int i = 0; i < n; i++) fn(ctx, i, nj[i].label[0] ? nj[i].label : (jobs_config(spec)), &res[i]);
        free(nj);
        free(res);
        ckey_free(&r.rec);
        gen_weights_close(src);
        return MILC_OK;
    }
    JobList own = {0};
    const JobList *jobs = o->jobs ? o->jobs : &own;
    CacheKey *keys = NULL;
    int rc = MILC_OK;
    if (!o->jobs && jobs_expand(tp, spec, &own, d) != 0)
        rc = MILC_E_INPUT;
    else if (!(keys = calloc((size_t)jobs->n + 1, sizeof *keys)))
        lib_error("out of memory"), rc = MILC_E_SYSTEM;
    else if (!src && gen_weights_open(spec->weights, &src, d) != 0)
        rc = d->system_errors ? MILC_E_SYSTEM : MILC_E_INPUT;
    else if (r.usable && (gen_weights_id(src, wdig), memcmp(wdig, r.wdig, 16) != 0)) {
        /* Replaced since the note was looked up: the note names what is compiled. */
        ckey_free(&r.rec);
        request_init(&r, tp, spec, wdig);
    }
    if (rc == MILC_OK && o->on_split) o->on_split(ctx, jobs);
    if (rc == MILC_OK) rc = build_jobs(s, tp, jobs, o, src, fn, ctx, keys, d);
    if (rc == MILC_OK && r.usable && jobs->n > 0) note_write(s, &r, jobs->v, jobs->n, jobs, keys);
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
    /* The splits, for a `build --chunk` that reports them from the note: the
     * caller's jobs may be several requests', so they are expanded anew. */
    JobList own = {0};
    DiagSink quiet;
    diag_init(&quiet);
    bool split = spec->chunk && jobs_expand(tp, spec, &own, &quiet) == 0;
    diag_free(&quiet);
    if (r.usable && n > 0) note_write(s, &r, jobs, n, split ? &own : NULL, keys);
    jobs_free(&own);
    ckey_free(&r.rec);
}
