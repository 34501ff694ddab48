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

#include "pipeline.h"
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
    if (req->source) gen_weights_id(req->source, wdig);
    else if (req->weights_digest) memcpy(wdig, req->weights_digest, 16);
    else if (gen_weights_digest(weights, wdig, d) != 0) { ckey_init(db); ckey_free(db); return failed_rc(d); }
    if (direct_key(req, params, wdig, db, dkey) != 0) { ckey_free(db); lib_error("out of memory"); return MILC_E_SYSTEM; }
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
    if (ok && req->hit_out) *req->hit_out = hit;
    else store_release(s, hit);
    if (ok) res->outcome = BUILD_HIT_DIRECT;
    return ok;
}

/* Store a compiled artifact under key (its record in fb). 0, or -1 with a
 * message printed. */
static int store(Store *s, const CacheKey *key, const CacheKeyBuilder *fb, const RtArtifact *art, int mode,
                 long long t_all, BuildResult *res) {
    const RtSection *secs;
    int n;
    rt_artifact_sections(art, &secs, &n);
    CacheSection *cs = calloc((size_t)n, sizeof *cs);
    if (!cs) { lib_error("out of memory"); return -1; }
    for (int i = 0; i < n; i++) {
        cs[i] = (CacheSection){secs[i].data, secs[i].size};
        res->artifact_bytes += secs[i].size;
    }
    uint64_t compile_ns = (uint64_t)(lib_now_ns() - t_all);
    StoreMeta meta = {.description = res->description, .producer = "cpu", .variant = mode, .cost_ns = compile_ns};
    int r = store_put(s, key, fb->buf, fb->len, &meta, cs, n, 0);
    free(cs);
    if (r != 0) { lib_error("cache store failed: %s: %s", cache_strerror(r), store_errmsg(s)); return -1; }
    return 0;
}

/* The entry just stored, for a caller that runs it next. */
static int read_back(Store *s, const CacheKeyBuilder *fb, BuildResult *res, StoreEntry **hit_out) {
    int r;
    if (hit_out && (r = store_get(s, &res->key, fb->buf, fb->len, STORE_GET_TRUSTED, hit_out)) != 0) {
        lib_error("cannot read back what was stored: %s: %s", cache_strerror(r), store_errmsg(s));
        return MILC_E_SYSTEM;
    }
    return MILC_OK;
}

/* The full key's weight part: the digest of each weight file the program
 * names, in order of first use (a generated chunk names one). */
static int add_blob_digests(CacheKeyBuilder *fb, const IrProgram *p, const char *model_dir, DiagSink *d) {
    const char *seen[64];
    int nseen = 0;
    for (int f = 0; f < p->nfuncs; f++)
        IR_FOR_EACH_OP(op, p->funcs[f]) {
            for (int i = 0; i < op->nattrs + op->nargs; i++) {
                const IrLiteral *l = i < op->nattrs ? op->attrs[i].lit
                                     : op->args[i - op->nattrs].kind == IR_ARG_LITERAL ? op->args[i - op->nattrs].lit
                                                                                        : NULL;
                bool dup = false;
                if (!l || l->kind != IR_LIT_BLOBFILE) continue;
                for (int k = 0; k < nseen; k++) dup |= strcmp(seen[k], l->blob_path) == 0;
                if (dup) continue;
                if (nseen == 64) { diag_error(d, l->loc, "more than 64 weight files"); return -1; }
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
    if (!text) { lib_error("out of memory"); goto out; }
    key_common(&fb, req->mode);
    ckey_add(&fb, KEY_TAG('M', 'I', 'L', ' '), text, len);
    if (add_blob_digests(&fb, p, model_dir, d) != 0) { rc = failed_rc(d); goto out; }
    if (ckey_finish(&fb, &res->key) != 0) { lib_error("out of memory"); goto out; }
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
    if (!CACHE_IS_MISS(r)) { lib_error("cache lookup failed: %s: %s", cache_strerror(r), store_errmsg(s)); goto out; }
    BackendStats bs = {0};
    if (backend_compile((IrProgram *)p, &(BackendOptions){.mode = req->mode, .model_path = model_dir}, &art, &bs, d) != 0) {
        rc = failed_rc(d);
        goto out;
    }
    if (store(s, &res->key, &fb, art, req->mode, t_all, res) != 0) goto out;
    res->outcome = BUILD_MISS;
    rc = read_back(s, &fb, res, req->hit_out);
out:
    res->ms_total = lib_ms_since(t_all);
    if (art) rt_artifact_free(art);
    free(text);
    ckey_free(&fb);
    return rc;
}

struct PipelineKept {
    CacheKeyBuilder fb, db; /* the full and direct key records */
    CacheKey dkey;
    RtArtifact *art;
    int mode;
    unsigned gflags;
    long long t_all;
    Store *remote;
};

void pipeline_kept_free(PipelineKept *k) {
    if (!k) return;
    if (k->art) rt_artifact_free(k->art);
    ckey_free(&k->fb);
    ckey_free(&k->db);
    free(k);
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
    if (r == 0) { /* made by someone else meanwhile, or the same program under another direct key */
        res->artifact_bytes = hit->bytes;
        res->checksummed = hit->checked;
        store_release(s, hit);
        res->outcome = BUILD_HIT_FULL;
    } else if (!CACHE_IS_MISS(r)) {
        lib_error("cache lookup failed: %s: %s", cache_strerror(r), store_errmsg(s));
        goto out;
    } else {
        if (store(s, &res->key, &k->fb, k->art, k->mode, k->t_all, res) != 0) goto out;
        res->from_remote = false;
        res->outcome = BUILD_MISS;
    }
    if ((r = store_alias_put(s, &k->dkey, k->db.buf, k->db.len, &res->key)) != 0) {
        lib_error("cache store failed: %s: %s", cache_strerror(r), store_errmsg(s));
        goto out;
    }
    if (res->outcome == BUILD_MISS) tier_push(k->remote, s, &res->key, &k->dkey, k->db.buf, k->db.len);
    rc = MILC_OK;
out:
    res->ms_store = lib_ms_since(t0);
    res->ms_total = lib_ms_since(k->t_all);
    pipeline_kept_free(k);
    return rc;
}

int pipeline_build(Store *s, const BuildRequest *req, BuildResult *res, DiagSink *d) {
    long long t_all = lib_now_ns(), t0 = t_all;
    memset(res, 0, sizeof *res);
    if (req->hit_out) *req->hit_out = NULL;
    const char *weights = req->weights ? req->weights : "random:0";
    int rc = MILC_E_SYSTEM;
    char *params = gen_config_canonical(req->config);
    if (!params) { lib_error("out of memory"); return MILC_E_SYSTEM; }
    snprintf(res->description, sizeof res->description, "%s", params);
    /* One line for `cache ls`: the parameters, newline-separated, as k=v k=v. */
    for (char *p = res->description; *p; p++)
        if (*p == '\n') *p = ' ';

    /* ---- direct key ---- */
    CacheKeyBuilder db;
    CacheKey dkey;
    GenWeights *own = NULL;
    const GenWeights *src = req->source;
    uint8_t *wdig = res->wdig;
    if (!src && !req->weights_digest) {
        /* Opened now: its digest keys the lookup and, on a miss, names the
         * bytes built (one pass over a checkpoint, not one per use). */
        if (gen_weights_open(weights, &own, d) != 0) { free(params); return failed_rc(d); }
        src = own;
    }
    if (src) gen_weights_id(src, wdig);
    else memcpy(wdig, req->weights_digest, 16);
    if (direct_key(req, params, wdig, &db, &dkey) != 0) {
        gen_weights_close(own);
        ckey_free(&db);
        free(params);
        lib_error("out of memory");
        return MILC_E_SYSTEM;
    }
    unsigned gflags = verify_store_flags(req->verify_hits);
    if (req->hit_out) gflags |= STORE_GET_POPULATE; /* the caller runs it next */
    StoreEntry *hit = NULL;
    int r = req->known_miss ? 0 : direct_hit(s, req, &db, &dkey, gflags, res);
    if (r == 0 && req->missed) {
        *req->missed = true;
        r = 2; /* looked up only: nothing more */
    }
    if (r == 0 && !src) {
        /* A miss compiles: read the weights once, and key what was read.  A
         * checkpoint replaced since its digest was taken is looked up anew
         * under the bytes it now holds. */
        uint8_t looked[16];
        memcpy(looked, wdig, 16);
        if (gen_weights_open(weights, &own, d) != 0) r = -2;
        else if (gen_weights_id(own, wdig), memcmp(wdig, looked, 16) != 0) {
            ckey_free(&db);
            if (direct_key(req, params, wdig, &db, &dkey) != 0) r = -1, lib_error("out of memory");
            else r = direct_hit(s, req, &db, &dkey, gflags, res);
        }
        src = own;
    }
    if (r != 0) {
        if (r == 1) res->ms_lookup = lib_ms_since(t0);
        res->ms_total = lib_ms_since(t_all);
        gen_weights_close(own);
        ckey_free(&db);
        free(params);
        return r >= 1 ? MILC_OK : r == -2 ? failed_rc(d) : MILC_E_SYSTEM;
    }
    res->ms_lookup = lib_ms_since(t0);

    /* ---- generate into a scratch directory ---- */
    char dir[4096];
    if (lib_scratch_make(req->tmp_root, "tmp-build", dir, sizeof dir) != 0) {
        lib_error("cannot create a scratch directory in '%s': %s", req->tmp_root, strerror(errno));
        ckey_free(&db);
        gen_weights_close(own);
        free(params);
        return MILC_E_SYSTEM;
    }
    Arena arena;
    arena_init(&arena);
    CacheKeyBuilder fb;
    ckey_init(&fb);
    RtArtifact *art = NULL;
    GenResult gr = {0};
    MilBlobFile wf = {0};
    t0 = lib_now_ns();
    if (gen_generate(req->config, &(GenOptions){.weights = weights, .source = src, .compile_mode = req->mode,
                                                      .max_memory = req->max_memory, .in_memory = true},
                     dir, &gr, d) != 0) {
        rc = failed_rc(d);
        goto out;
    }
    res->ms_generate = lib_ms_since(t0);

    /* ---- full key: canonical text + weight digest ---- */
    t0 = lib_now_ns();
    /* The weights were made in memory, their digest as they were made: no
     * file, nothing read back. */
    const uint8_t *blobdig = gr.weights_digest;
    key_common(&fb, req->mode);
    ckey_add(&fb, KEY_TAG('M', 'I', 'L', ' '), gr.mil, gr.mil_len);
    ckey_add(&fb, KEY_TAG('W', 'B', 'L', 'B'), blobdig, 16);
    if (ckey_finish(&fb, &res->key) != 0) { lib_error("out of memory"); goto out; }
    bool defer = req->kept && !req->hit_out;
    /* Deferred, the full key is looked up by pipeline_keep: the Store may be
     * busy with the previous program's store on another thread. */
    r = defer ? CACHE_ENOTFOUND : store_get(s, &res->key, fb.buf, fb.len, gflags, &hit);
    if (CACHE_IS_MISS(r) && (res->from_remote = tier_pull(req->remote, s, &res->key, fb.buf, fb.len)))
        r = store_get(s, &res->key, fb.buf, fb.len, gflags, &hit);
    if (r == 0 && !pipeline_hit_usable(hit, req->mode)) {
        store_release(s, hit);
        r = CACHE_ENOTFOUND; /* compile and replace it */
    }
    if (r == 0) {
        /* The direct key is written with no hit held (a live hit stops the
         * map from growing), and the caller gets a hit only on success:
         * on any failure nothing is handed out, so nothing leaks. */
        res->artifact_bytes = hit->bytes;
        res->checksummed = hit->checked;
        store_release(s, hit);
        res->outcome = BUILD_HIT_FULL;
        res->ms_lookup += lib_ms_since(t0);
        if ((r = store_alias_put(s, &dkey, db.buf, db.len, &res->key)) != 0) {
            lib_error("cache store failed: %s: %s", cache_strerror(r), store_errmsg(s));
            goto out;
        }
        rc = MILC_OK;
        goto read_back;
    }
    if (!CACHE_IS_MISS(r)) { lib_error("cache lookup failed: %s: %s", cache_strerror(r), store_errmsg(s)); goto out; }
    res->ms_lookup += lib_ms_since(t0);

    /* ---- parse, check, compile ---- */
    t0 = lib_now_ns();
    char mpath[4200];
    snprintf(mpath, sizeof mpath, "%s/model.mil", dir);
    IrProgram *p = mil_parse(&arena, d, mpath, gr.mil, gr.mil_len);
    if (milblob_parse(&wf, "weights/weight.bin", gr.weights.bytes, gr.weights.size, d) != 0) { rc = failed_rc(d); goto out; }
    if (!p || !mil_check(p, &(MilCheckOptions){.target = MIL_TARGET_CPU, .model_path = dir, .weights = &wf}, d)) { rc = failed_rc(d); goto out; }
    res->ms_check = lib_ms_since(t0);
    BackendStats bs = {0};
    /* Each weight's memory goes back as it is packed, and the rest before
     * the store: the artifact is the one copy of the weights in memory. */
    BackendOptions bo = {.mode = req->mode, .model_path = dir, .weights = &wf, .weights_image = &gr.weights};
    int brc = backend_compile(p, &bo, &art, &bs, d);
    milblob_close(&wf);
    milblob_image_free(&gr.weights);
    if (brc != 0) {
        rc = failed_rc(d);
        goto out;
    }
    res->ms_passes = bs.ms_passes;
    res->ms_lower = bs.ms_lower + bs.ms_pack;
    res->dispatches = bs.dispatches;

    if (defer) {
        PipelineKept *k = calloc(1, sizeof *k);
        if (!k) { lib_error("out of memory"); goto out; }
        *k = (PipelineKept){.fb = fb, .db = db, .dkey = dkey, .art = art, .mode = req->mode, .gflags = gflags,
                            .t_all = t_all, .remote = req->remote};
        ckey_init(&fb), ckey_init(&db), art = NULL; /* moved into k */
        *req->kept = k;
        rc = MILC_OK;
        goto out;
    }

    /* ---- store: artifact, then the direct mapping ---- */
    t0 = lib_now_ns();
    if (store(s, &res->key, &fb, art, req->mode, t_all, res) != 0) goto out;
    if ((r = store_alias_put(s, &dkey, db.buf, db.len, &res->key)) != 0) {
        lib_error("cache store failed: %s: %s", cache_strerror(r), store_errmsg(s));
        goto out;
    }
    res->ms_store = lib_ms_since(t0);
    res->from_remote = false;
    tier_push(req->remote, s, &res->key, &dkey, db.buf, db.len);
    res->outcome = BUILD_MISS;
    rc = MILC_OK;
read_back: /* checked above (a hit) or just written (a miss): no checksum again */
    if (req->hit_out &&
        (r = store_get(s, &res->key, fb.buf, fb.len, STORE_GET_TRUSTED | STORE_GET_POPULATE, req->hit_out)) != 0) {
        *req->hit_out = NULL;
        lib_error("cannot read back what was stored: %s: %s", cache_strerror(r), store_errmsg(s));
        rc = MILC_E_SYSTEM;
    }
out:
    res->ms_total = lib_ms_since(t_all);
    if (art) rt_artifact_free(art);
    milblob_close(&wf);
    gen_result_free(&gr);
    arena_free(&arena);
    ckey_free(&fb);
    ckey_free(&db);
    gen_weights_close(own);
    free(params);
    lib_scratch_remove(dir);
    return rc;
}
