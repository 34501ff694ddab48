/* pipeline.c — generate → parse → check → compile → store, behind two cache
 * lookups.  The direct key (template digest + resolved parameters + weight
 * source + mode) lets a repeated build skip generation and parsing; the full
 * key (canonical MIL text + weight digest + mode) lets two different requests
 * that produce the same program share one artifact.  Both key records are
 * stored and compared on every hit, so a collision is a miss, never a wrong
 * artifact. */
#include <stdio.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "milc/pipeline.h"
#include "tier_io.h"
#include "milc/arena.h"
#include "milc/backend.h"
#include "milc/blob.h"
#include "milc/mil.h"
#include "milc/rt.h"

/* A failed stage: the input's fault, unless the diagnostics say the system's. */
static int failed_rc(const DiagSink *d) { return d->system_errors ? MILC_E_SYSTEM : MILC_E_INPUT; }

void pipeline_key_base(CacheKeyBuilder *b) {
    ckey_add_u64(b, KEY_TAG('K', 'F', 'M', 'T'), MILC_KEY_FORMAT);
    ckey_add_str(b, KEY_TAG('M', 'V', 'E', 'R'), MILC_VERSION);
    ckey_add_str(b, KEY_TAG('B', 'K', 'N', 'D'), "cpu");
    ckey_add_u64(b, KEY_TAG('A', 'F', 'M', 'T'), RT_FORMAT_VERSION);
    ckey_add_u64(b, KEY_TAG('O', 'P', 'T', 'B'), rt_op_table_digest());
    /* The kernel variant that will run the artifact: today's artifacts (64-
     * column panels, fp16 widened at run time) run on every variant, but an
     * artifact laid out for one (a wider panel, AVX512-FP16 weights) must not
     * meet another CPU as a hit, so entries are per variant from the start. */
    ckey_add_str(b, KEY_TAG('K', 'V', 'A', 'R'), rt_cpu_name((RtCpu)lib_cpu()));
    ckey_add_str(b, KEY_TAG('C', 'P', 'U', 'F'), pipeline_cpu_features());
}

/* What every program key shares: the base, then the mode. */
static void key_common(CacheKeyBuilder *b, int mode) {
    pipeline_key_base(b);
    ckey_add_u64(b, KEY_TAG('M', 'O', 'D', 'E'), (uint64_t)mode);
}

/* A hit is served only if its artifact is one this runtime reads, of the
 * mode asked for: a checksum-clean entry of another format (an older milc
 * that kept its version string) is rebuilt, not served. */
bool pipeline_hit_usable(const StoreEntry *e, int mode) {
    RtArtifactInfo ai;
    char err[256];
    return e->nsecs > 0 &&
           rt_artifact_info(&(RtSection){0, 0, e->secs[0].data, (size_t)e->secs[0].size}, &ai, err, sizeof err) == 0 &&
           (int)ai.mode == mode;
}

unsigned verify_get_flags(int policy) {
    return policy == BUILD_VERIFY_FULL ? CACHE_GET_VERIFY : policy == BUILD_VERIFY_ONCE ? CACHE_GET_VERIFY_ONCE : 0;
}

unsigned verify_store_flags(int policy) {
    return policy == BUILD_VERIFY_FULL ? STORE_GET_VERIFY : policy == BUILD_VERIFY_ONCE ? 0 : STORE_GET_TRUSTED;
}

/* The direct key record: template digest, resolved parameters, weight
 * source and the digest of its bytes. */
static int direct_key(const BuildRequest *req, const char *params, const uint8_t wdig[16], CacheKeyBuilder *db,
                      CacheKey *dkey) {
    uint8_t tdig[16];
    ckey_init(db);
    key_common(db, req->mode);
    gen_template_digest(gen_config_template(req->config), tdig);
    ckey_add(db, KEY_TAG('T', 'M', 'P', 'L'), tdig, 16);
    ckey_add_str(db, KEY_TAG('P', 'A', 'R', 'M'), params);
    ckey_add_str(db, KEY_TAG('W', 'S', 'R', 'C'), req->weights ? req->weights : "random:0");
    ckey_add(db, KEY_TAG('W', 'D', 'I', 'G'), wdig, 16);
    return ckey_finish(db, dkey);
}

int pipeline_direct_record(const BuildRequest *req, const char *params, CacheKeyBuilder *db, CacheKey *dkey,
                           DiagSink *d) {
    const char *weights = req->weights ? req->weights : "random:0";
    uint8_t wdig[16];
    if (req->source)
        gen_weights_id(req->source, wdig);
    else if (req->weights_digest)
        memcpy(wdig, req->weights_digest, 16);
    else if (gen_weights_digest(weights, wdig, d) != 0) {
        ckey_init(db);
        ckey_free(db);
        return failed_rc(d);
    }
    if (direct_key(req, params, wdig, db, dkey) != 0) {
        ckey_free(db);
        lib_error("out of memory");
        return MILC_E_SYSTEM;
    }
    return MILC_OK;
}

/* A usable artifact under the direct key: 1 (res filled, the hit handed to
 * req->hit_out or released), 0 a miss, -1 a cache failure (printed). */
static int direct_hit(Store *s, const BuildRequest *req, const CacheKeyBuilder *db, const CacheKey *dkey,
                      unsigned gflags, BuildResult *res) {
    StoreEntry *hit = NULL;
    int r = store_alias_get(s, dkey, db->buf, db->len, gflags, &hit);
    if (CACHE_IS_MISS(r) && (res->from_remote = tier_pull_direct(req->remote, s, dkey, db->buf, db->len)))
        r = store_alias_get(s, dkey, db->buf, db->len, gflags, &hit);
    if (r != 0 && !CACHE_IS_MISS(r)) {
        lib_error("cache lookup failed: %s: %s", cache_strerror(r), store_errmsg(s));
        return -1;
    }
    if (r != 0) return 0;
    res->key = hit->key;
    res->artifact_bytes = hit->bytes;
    res->checksummed = hit->checked;
    bool ok = pipeline_hit_usable(hit, req->mode);
    if (ok && req->hit_out)
        *req->hit_out = hit;
    else
        store_release(s, hit);
    if (ok) res->outcome = BUILD_HIT_DIRECT;
    return ok;
}

/* Store a compiled artifact under key (its record in fb), consuming it: its
 * pages go back as they are copied (the caller frees it next, and a hit is
 * read from the cache), so a program being stored shrinks while the next
 * one is made.  0, or -1 with a message printed. */
static int store(Store *s, const CacheKey *key, const CacheKeyBuilder *fb, const RtArtifact *art, int mode,
                 long long t_all, const BuildBudget *budget, BuildResult *res) {
    const RtSection *secs;
    int n;
    rt_artifact_sections(art, &secs, &n);
    CacheSection *cs = calloc((size_t)n, sizeof *cs);
    if (!cs) {
        lib_error("out of memory");
        return -1;
    }
    for (int i = 0; i < n; i++) {
        cs[i] = (CacheSection){secs[i].data, secs[i].size};
        res->artifact_bytes += secs[i].size;
    }
    uint64_t compile_ns = (uint64_t)(lib_now_ns() - t_all);
    StoreMeta meta = {.description = res->description, .producer = "cpu", .variant = mode, .cost_ns = compile_ns};
    StorePut how = {STORE_PUT_CONSUME, budget ? budget->give : NULL, budget ? budget->ctx : NULL};
    int r = store_put_how(s, key, fb->buf, fb->len, &meta, cs, n, &how);
    free(cs);
    if (r != 0) {
        lib_error("cache store failed: %s: %s", cache_strerror(r), store_errmsg(s));
        return -1;
    }
    return 0;
}

/* The entry just stored or found, for a caller that runs it next (checked
 * already, or just written: no checksum again). */
static int read_back(Store *s, const CacheKeyBuilder *fb, BuildResult *res, StoreEntry **hit_out) {
    int r;
    if (hit_out &&
        (r = store_get(s, &res->key, fb->buf, fb->len, STORE_GET_TRUSTED | STORE_GET_POPULATE, hit_out)) != 0) {
        *hit_out = NULL;
        lib_error("cannot read back what was stored: %s: %s", cache_strerror(r), store_errmsg(s));
        return MILC_E_SYSTEM;
    }
    return MILC_OK;
}

/* Map the direct key to the artifact key (after a full-key hit or a store). */
static int put_alias(Store *s, const CacheKey *dkey, const CacheKeyBuilder *db, const CacheKey *key) {
    int r = store_alias_put(s, dkey, db->buf, db->len, key);
    if (r != 0) {
        lib_error("cache store failed: %s: %s", cache_strerror(r), store_errmsg(s));
        return MILC_E_SYSTEM;
    }
    return MILC_OK;
}

/* The full key's weight part: the digest of each weight file the program
 * names, in order of first use (a generated chunk names one). */
static int add_blob_digests(CacheKeyBuilder *fb, const IrProgram *p, const char *model_dir, DiagSink *d) {
    const char *seen[64];
    int nseen = 0;
    for (int f = 0; f < p->nfuncs; f++) IR_FOR_EACH_OP(op, p->funcs[f]) {
            for (int i = 0; i < op->nattrs + op->nargs; i++) {
                const IrLiteral *l = i < op->nattrs                                    ? op->attrs[i].lit
                                     : op->args[i - op->nattrs].kind == IR_ARG_LITERAL ? op->args[i - op->nattrs].lit
                                                                                       : NULL;
                bool dup = false;
                if (!l || l->kind != IR_LIT_BLOBFILE) continue;
                for (int k = 0; k < nseen; k++) dup |= strcmp(seen[k], l->blob_path) == 0;
                if (dup) continue;
                if (nseen == 64) {
                    diag_error(d, l->loc, "more than 64 weight files");
                    return -1;
                }
                seen[nseen++] = l->blob_path;
                char path[4096];
                const char *why;
                MilBlobFile wf;
                uint8_t dig[16];
                if (mil_blob_path(model_dir, l->blob_path, path, sizeof path, &why) != 0) {
                    diag_error(d, l->loc, "%s: %s", l->blob_path, why);
                    return -1;
                }
                if (milblob_open(&wf, path, d) != 0) return -1;
                milblob_file_digest(&wf, dig);
                milblob_close(&wf);
                ckey_add(fb, KEY_TAG('W', 'B', 'L', 'B'), dig, 16);
            }
        }
    return 0;
}

int pipeline_program(Store *s, const IrProgram *p, const char *model_dir, const ProgramRequest *req, BuildResult *res,
                     DiagSink *d) {
    long long t_all = lib_now_ns();
    memset(res, 0, sizeof *res);
    snprintf(res->description, sizeof res->description, "%s", req->what);
    CacheKeyBuilder fb;
    ckey_init(&fb);
    RtArtifact *art = NULL;
    int rc = MILC_E_SYSTEM;
    size_t len;
    char *text = mil_print(p, &len);
    if (!text) {
        lib_error("out of memory");
        goto out;
    }
    key_common(&fb, req->mode);
    ckey_add(&fb, KEY_TAG('M', 'I', 'L', ' '), text, len);
    if (req->function) ckey_add_str(&fb, KEY_TAG('F', 'U', 'N', 'C'), req->function);
    if (add_blob_digests(&fb, p, model_dir, d) != 0) {
        rc = failed_rc(d);
        goto out;
    }
    if (ckey_finish(&fb, &res->key) != 0) {
        lib_error("out of memory");
        goto out;
    }
    StoreEntry *hit = NULL;
    unsigned gflags = verify_store_flags(req->verify_hits) | STORE_GET_POPULATE;
    int r = store_get(s, &res->key, fb.buf, fb.len, gflags, &hit);
    if (r == 0 && !pipeline_hit_usable(hit, req->mode)) {
        store_release(s, hit);
        r = CACHE_ENOTFOUND;
    }
    if (r == 0) {
        res->outcome = BUILD_HIT_FULL;
        *req->hit_out = hit;
        rc = MILC_OK;
        goto out;
    }
    if (!CACHE_IS_MISS(r)) {
        lib_error("cache lookup failed: %s: %s", cache_strerror(r), store_errmsg(s));
        goto out;
    }
    BackendStats bs = {0};
    if (backend_compile((IrProgram *)p,
                        &(BackendOptions){.mode = req->mode, .model_path = model_dir, .function = req->function}, &art,
                        &bs, d) != 0) {
        rc = failed_rc(d);
        goto out;
    }
    if (store(s, &res->key, &fb, art, req->mode, t_all, NULL, res) != 0) goto out;
    res->outcome = BUILD_MISS;
    rc = read_back(s, &fb, res, req->hit_out);
out:
    res->ms_total = lib_ms_since(t_all);
    if (art) rt_artifact_free(art);
    free(text);
    ckey_free(&fb);
    return rc;
}

/* One pipeline_build across its stages: what each makes, and what the end
 * frees. */
typedef struct Build {
    Store *s;
    const BuildRequest *req;
    BuildResult *res;
    DiagSink *d;
    long long t_all;
    const char *weights;    /* req->weights, or random:0 */
    char *params;           /* the canonical parameters (the direct key's) */
    CacheKeyBuilder db, fb; /* the direct and the full key records */
    CacheKey dkey;
    unsigned gflags;       /* store_get flags for a hit */
    GenWeights *own;       /* the weights, when read here */
    const GenWeights *src; /* req->source, or own */
    char dir[4096];        /* the scratch directory, "" until made */
    GenResult gr;
    MilBlobFile wf;
    Arena arena;
    RtArtifact *art;
} Build;

/* A stage's result besides MILC_OK (go on) and a failure: the build is
 * done, with the hit handed out (a direct hit) or to read back (a full one). */
enum { STAGE_DONE = -1, STAGE_FOUND = -2 };

/* The direct key.  On a miss without req->source the weights are read once,
 * here, and keyed by what was read: a checkpoint replaced since its digest
 * was taken is looked up anew under the bytes it now holds. */
static int build_direct(Build *b) {
    const BuildRequest *req = b->req;
    uint8_t *wdig = b->res->wdig;
    if (!b->src && !req->weights_digest) {
        /* Opened now: its digest keys the lookup and, on a miss, names the
         * bytes built (one pass over a checkpoint, not one per use). */
        if (gen_weights_open(b->weights, &b->own, b->d) != 0) return failed_rc(b->d);
        b->src = b->own;
    }
    if (b->src)
        gen_weights_id(b->src, wdig);
    else
        memcpy(wdig, req->weights_digest, 16);
    if (direct_key(req, b->params, wdig, &b->db, &b->dkey) != 0) {
        lib_error("out of memory");
        return MILC_E_SYSTEM;
    }
    int r = req->known_miss ? 0 : direct_hit(b->s, req, &b->db, &b->dkey, b->gflags, b->res);
    if (r == 0 && req->missed) {
        *req->missed = true; /* looked up only */
        b->res->ms_lookup = lib_ms_since(b->t_all);
        return STAGE_DONE;
    }
    if (r == 0 && !b->src) {
        uint8_t looked[16];
        memcpy(looked, wdig, 16);
        if (gen_weights_open(b->weights, &b->own, b->d) != 0) return failed_rc(b->d);
        b->src = b->own;
        gen_weights_id(b->own, wdig);
        if (memcmp(wdig, looked, 16) != 0) {
            ckey_free(&b->db);
            if (direct_key(req, b->params, wdig, &b->db, &b->dkey) != 0) {
                lib_error("out of memory");
                return MILC_E_SYSTEM;
            }
            r = direct_hit(b->s, req, &b->db, &b->dkey, b->gflags, b->res);
        }
    }
    b->res->ms_lookup = lib_ms_since(b->t_all);
    return r == 1 ? STAGE_DONE : r == 0 ? MILC_OK : MILC_E_SYSTEM;
}

/* Generate the program into a scratch directory, its weights in memory. */
static int build_generate(Build *b) {
    const BuildRequest *req = b->req;
    if (lib_scratch_make(req->tmp_root, "tmp-build", b->dir, sizeof b->dir) != 0) {
        lib_error("cannot create a scratch directory in '%s': %s", req->tmp_root, strerror(errno));
        b->dir[0] = 0;
        return MILC_E_SYSTEM;
    }
    long long t0 = lib_now_ns();
    GenOptions go = {.weights = b->weights,
                     .source = b->src,
                     .compile_mode = req->mode,
                     .max_memory = req->max_memory,
                     .in_memory = true,
                     .grow = req->budget ? req->budget->take : NULL,
                     .grow_ctx = req->budget ? req->budget->ctx : NULL};
    if (gen_generate(req->config, &go, b->dir, &b->gr, b->d) != 0) return failed_rc(b->d);
    b->res->ms_generate = lib_ms_since(t0);
    return MILC_OK;
}

/* The full key: the canonical text and the weights' digest as they were
 * made (no file, nothing read back).  A hit maps the direct key to it. */
static int build_full(Build *b) {
    Store *s = b->s;
    BuildResult *res = b->res;
    long long t0 = lib_now_ns();
    key_common(&b->fb, b->req->mode);
    ckey_add(&b->fb, KEY_TAG('M', 'I', 'L', ' '), b->gr.mil, b->gr.mil_len);
    ckey_add(&b->fb, KEY_TAG('W', 'B', 'L', 'B'), b->gr.weights_digest, 16);
    if (ckey_finish(&b->fb, &res->key) != 0) {
        lib_error("out of memory");
        return MILC_E_SYSTEM;
    }
    /* Deferred to pipeline_keep only while the Store is busy with the
     * previous program's store on another thread: whenever it is free, a
     * full-key hit is found before the compile it makes unnecessary. */
    const BuildRequest *req = b->req;
    if (req->kept && !req->hit_out && req->store_busy && req->store_busy(req->store_busy_ctx)) return MILC_OK;
    StoreEntry *hit = NULL;
    int r = store_get(s, &res->key, b->fb.buf, b->fb.len, b->gflags, &hit);
    if (CACHE_IS_MISS(r) && (res->from_remote = tier_pull(b->req->remote, s, &res->key, b->fb.buf, b->fb.len)))
        r = store_get(s, &res->key, b->fb.buf, b->fb.len, b->gflags, &hit);
    if (r == 0 && !pipeline_hit_usable(hit, b->req->mode)) {
        store_release(s, hit);
        r = CACHE_ENOTFOUND; /* compile and replace it */
    }
    if (r != 0 && !CACHE_IS_MISS(r)) {
        lib_error("cache lookup failed: %s: %s", cache_strerror(r), store_errmsg(s));
        return MILC_E_SYSTEM;
    }
    res->ms_lookup += lib_ms_since(t0);
    if (r != 0) return MILC_OK;
    /* The direct key is written with no hit held (a live hit stops the map
     * from growing), and the caller gets a hit only on success: on any
     * failure nothing is handed out, so nothing leaks. */
    res->artifact_bytes = hit->bytes;
    res->checksummed = hit->checked;
    store_release(s, hit);
    res->outcome = BUILD_HIT_FULL;
    int rc = put_alias(s, &b->dkey, &b->db, &res->key);
    return rc == MILC_OK ? STAGE_FOUND : rc;
}

/* Parse, check and compile the generated program.  Each weight's memory
 * goes back as it is packed, and the rest before the store: the artifact is
 * the one copy of the weights in memory. */
static int build_compile(Build *b) {
    BuildResult *res = b->res;
    long long t0 = lib_now_ns();
    char mpath[4200];
    snprintf(mpath, sizeof mpath, "%s/model.mil", b->dir);
    IrProgram *p = mil_parse(&b->arena, b->d, mpath, b->gr.mil, b->gr.mil_len);
    if (milblob_parse(&b->wf, "weights/weight.bin", b->gr.weights.bytes, b->gr.weights.size, b->d) != 0)
        return failed_rc(b->d);
    MilCheckOptions co = {.target = MIL_TARGET_CPU, .model_path = b->dir, .weights = &b->wf};
    if (!p || !mil_check(p, &co, b->d)) return failed_rc(b->d);
    res->ms_check = lib_ms_since(t0);
    BackendStats bs = {0};
    BackendOptions bo = {
        .mode = b->req->mode, .model_path = b->dir, .weights = &b->wf, .weights_image = &b->gr.weights};
    int brc = backend_compile(p, &bo, &b->art, &bs, b->d);
    milblob_close(&b->wf);
    milblob_image_free(&b->gr.weights);
    if (brc != 0) return failed_rc(b->d);
    res->ms_passes = bs.ms_passes;
    res->ms_lower = bs.ms_lower + bs.ms_pack;
    res->dispatches = bs.dispatches;
    return MILC_OK;
}

/* Store the artifact, then the direct mapping; then the remote's copy. */
static int build_store(Build *b) {
    BuildResult *res = b->res;
    long long t0 = lib_now_ns();
    if (store(b->s, &res->key, &b->fb, b->art, b->req->mode, b->t_all, NULL, res) != 0) return MILC_E_SYSTEM;
    int rc = put_alias(b->s, &b->dkey, &b->db, &res->key);
    if (rc != MILC_OK) return rc;
    res->ms_store = lib_ms_since(t0);
    res->from_remote = false;
    tier_push(b->req->remote, b->s, &res->key, &b->dkey, b->db.buf, b->db.len);
    res->outcome = BUILD_MISS;
    return MILC_OK;
}

struct PipelineKept {
    CacheKeyBuilder fb, db; /* the full and direct key records */
    CacheKey dkey;
    RtArtifact *art;
    int mode;
    unsigned gflags;
    long long t_all;
    Store *remote;
    const BuildBudget *budget;
};

void pipeline_kept_free(PipelineKept *k) {
    if (!k) return;
    if (k->art) rt_artifact_free(k->art);
    ckey_free(&k->fb);
    ckey_free(&k->db);
    free(k);
}

/* The compiled artifact handed out (req->kept), its store left to
 * pipeline_keep. */
static int build_defer(Build *b) {
    PipelineKept *k = calloc(1, sizeof *k);
    if (!k) {
        lib_error("out of memory");
        return MILC_E_SYSTEM;
    }
    *k = (PipelineKept){.fb = b->fb,
                        .db = b->db,
                        .dkey = b->dkey,
                        .art = b->art,
                        .mode = b->req->mode,
                        .gflags = b->gflags,
                        .t_all = b->t_all,
                        .remote = b->req->remote,
                        .budget = b->req->budget};
    ckey_init(&b->fb), ckey_init(&b->db), b->art = NULL; /* moved into k */
    *b->req->kept = k;
    return STAGE_DONE;
}

uint64_t pipeline_kept_bytes(const PipelineKept *k) {
    const RtSection *secs;
    int n;
    uint64_t sum = 0;
    rt_artifact_sections(k->art, &secs, &n);
    for (int i = 0; i < n; i++) sum += secs[i].size;
    return sum;
}

int pipeline_keep(Store *s, PipelineKept *k, BuildResult *res) {
    long long t0 = lib_now_ns();
    int rc = MILC_E_SYSTEM;
    StoreEntry *hit = NULL;
    int r = store_get(s, &res->key, k->fb.buf, k->fb.len, k->gflags, &hit);
    if (CACHE_IS_MISS(r) && (res->from_remote = tier_pull(k->remote, s, &res->key, k->fb.buf, k->fb.len)))
        r = store_get(s, &res->key, k->fb.buf, k->fb.len, k->gflags, &hit);
    if (r == 0 && !pipeline_hit_usable(hit, k->mode)) {
        store_release(s, hit);
        r = CACHE_ENOTFOUND; /* replace it */
    }
    if (r == 0) { /* stored meanwhile by someone else, or the same program under another direct key */
        res->artifact_bytes = hit->bytes;
        res->checksummed = hit->checked;
        store_release(s, hit);
        res->outcome = BUILD_HIT_FULL;
    } else if (!CACHE_IS_MISS(r)) {
        lib_error("cache lookup failed: %s: %s", cache_strerror(r), store_errmsg(s));
        goto out;
    } else if (store(s, &res->key, &k->fb, k->art, k->mode, k->t_all, k->budget, res) != 0) {
        goto out;
    } else {
        res->from_remote = false;
        res->outcome = BUILD_MISS;
    }
    if (put_alias(s, &k->dkey, &k->db, &res->key) != MILC_OK) goto out;
    if (res->outcome == BUILD_MISS) tier_push(k->remote, s, &res->key, &k->dkey, k->db.buf, k->db.len);
    rc = MILC_OK;
out:
    res->ms_store = lib_ms_since(t0);
    res->ms_total = lib_ms_since(k->t_all);
    pipeline_kept_free(k);
    return rc;
}

int pipeline_build(Store *s, const BuildRequest *req, BuildResult *res, DiagSink *d) {
    memset(res, 0, sizeof *res);
    if (req->hit_out) *req->hit_out = NULL;
    Build b = {.s = s,
               .req = req,
               .res = res,
               .d = d,
               .t_all = lib_now_ns(),
               .src = req->source,
               .weights = req->weights ? req->weights : "random:0"};
    ckey_init(&b.db);
    ckey_init(&b.fb);
    arena_init(&b.arena);
    b.gflags = verify_store_flags(req->verify_hits);
    if (req->hit_out) b.gflags |= STORE_GET_POPULATE; /* the caller runs it next */
    int rc = MILC_E_SYSTEM;
    if (!(b.params = gen_config_canonical(req->config)))
        lib_error("out of memory");
    else {
        /* One line for `cache ls`: the parameters, newline-separated, as k=v k=v. */
        snprintf(res->description, sizeof res->description, "%s", b.params);
        for (char *p = res->description; *p; p++)
            if (*p == '\n') *p = ' ';
        rc = build_direct(&b);
    }
    if (rc == MILC_OK) rc = build_generate(&b);
    if (rc == MILC_OK) rc = build_full(&b);
    if (rc == MILC_OK) rc = build_compile(&b);
    if (rc == MILC_OK && req->kept && !req->hit_out) rc = build_defer(&b);
    if (rc == MILC_OK) rc = build_store(&b);
    if (rc == MILC_OK || rc == STAGE_FOUND) rc = read_back(s, &b.fb, res, req->hit_out);
    if (rc == STAGE_DONE) rc = MILC_OK;
    res->ms_total = lib_ms_since(b.t_all);
    if (b.art) rt_artifact_free(b.art);
    milblob_close(&b.wf);
    gen_result_free(&b.gr);
    arena_free(&b.arena);
    ckey_free(&b.fb);
    ckey_free(&b.db);
    gen_weights_close(b.own);
    free(b.params);
    if (b.dir[0]) lib_scratch_remove(b.dir);
    return rc;
}
