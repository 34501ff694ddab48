/* api_model.c — the public interface's artifacts and models (milc.h): load
 * from the cache or a file, describe, run on the caller's buffers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "milc/drift.h"

struct MilcModel {
    LoadedModel lm;
    RtTensor *in, *out; /* bound afresh by each run: the caller's buffers */
    int nin, nout;
    bool ran; /* out holds the dims of a run's outputs */
};

/* The entry of key, checked; never one another milc made (it is never
 * served).  MILC_OK with *hit, or the status (message reported). */
static int entry(MilcCache *c, const char *key, unsigned flags, StoreEntry **hit, CacheKey *k) {
    if (!c || !key) return MILC_E_USAGE;
    if (strlen(key) != 32 || cache_key_parse(key, k) != 0) {
        lib_error("'%s' is not a key (32 hex digits)", key);
        return MILC_E_USAGE;
    }
    /* A key from the caller has no key record to compare: the checksum is
     * all that vouches for the bytes. */
    int r = store_get(c->store, k, NULL, 0, verify_store_flags(api_verify_policy(c->o.verify)) | flags, hit);
    if (r == CACHE_ENOTFOUND) {
        lib_error("cache entry %s: no such entry", key);
        return MILC_E_NOTFOUND;
    }
    if (r != 0) {
        lib_error("cache entry %s: %s", key, cache_strerror(r));
        return r == CACHE_ECORRUPT ? MILC_E_INPUT : MILC_E_SYSTEM;
    }
    char why[512];
    if (drift_why((*hit)->record, (*hit)->record_len, why, sizeof why)) {
        lib_error("cache entry %s was made by another milc (%s): build it again", key, why);
        store_release(c->store, *hit);
        return MILC_E_INPUT;
    }
    return MILC_OK;
}

MilcStatus milc_artifact_info(MilcCache *c, const char *key, MilcArtifactInfo *out) {
    ApiCall k;
    api_begin(&k);
    StoreEntry *e;
    CacheKey ck;
    if (!out) return api_end(&k, MILC_E_USAGE);
    int rc = entry(c, key, STORE_GET_NOTOUCH, &e, &ck);
    if (rc != MILC_OK) return api_end(&k, rc);
    *out = (MilcArtifactInfo){.mode = e->meta.variant,
                              .bytes = e->bytes,
                              .sections = e->nsecs,
                              .compile_ns = e->meta.cost_ns,
                              .hits = e->meta.uses};
    snprintf(out->description, sizeof out->description, "%s", e->meta.description ? e->meta.description : "");
    store_release(c->store, e);
    return api_end(&k, MILC_OK);
}

/* lm loaded: the run's tensor arrays. */
static int model_new(LoadedModel *lm, MilcModel **out) {
    MilcModel *m = calloc(1, sizeof *m);
    if (m) {
        m->lm = *lm;
        m->nin = rt_model_ninputs(lm->model), m->nout = rt_model_noutputs(lm->model);
        m->in = calloc((size_t)m->nin + 1, sizeof *m->in);
        m->out = calloc((size_t)m->nout + 1, sizeof *m->out);
    }
    if (!m || !m->in || !m->out) {
        if (m) free(m->in), free(m->out), free(m);
        model_free(lm);
        lib_error("out of memory");
        return MILC_E_SYSTEM;
    }
    *out = m;
    return MILC_OK;
}

MilcStatus milc_model_load(MilcCache *c, const char *key, MilcModel **out) {
    ApiCall k;
    api_begin(&k);
    if (!out) return api_end(&k, MILC_E_USAGE);
    *out = NULL;
    StoreEntry *hit;
    CacheKey ck;
    int rc = entry(c, key, STORE_GET_POPULATE, &hit, &ck);
    if (rc != MILC_OK) return api_end(&k, rc);
    LoadedModel lm;
    long long t0 = lib_now_ns();
    rc = model_load_hit(&lm, c->store, hit, &(ModelLoad){.nthreads = c->o.threads, .max_memory = c->o.max_memory}, key);
    if (rc != MILC_OK) return api_end(&k, rc);
    /* The cost ledger is the LMDB cache's own bookkeeping (store.h). */
    cache_record_load(store_lmdb_cache(c->store), &ck, (uint64_t)(lib_now_ns() - t0));
    return api_end(&k, model_new(&lm, out));
}

MilcStatus milc_model_load_file(const char *path, int threads, MilcModel **out) {
    ApiCall k;
    api_begin(&k);
    if (!out || !path) return api_end(&k, MILC_E_USAGE);
    *out = NULL;
    LoadedModel lm;
    int rc = model_load_file(&lm, path, &(ModelLoad){.nthreads = threads});
    if (rc != MILC_OK) return api_end(&k, rc);
    return api_end(&k, model_new(&lm, out));
}

void milc_model_free(MilcModel *m) {
    if (!m) return;
    model_free(&m->lm);
    free(m->in);
    free(m->out);
    free(m);
}

int milc_model_ninputs(const MilcModel *m) { return m ? m->nin : 0; }
int milc_model_noutputs(const MilcModel *m) { return m ? m->nout : 0; }
int milc_model_mode(const MilcModel *m) { return m ? rt_model_mode(m->lm.model) : -1; }

static void tensor_info(const RtIoInfo *io, MilcTensorInfo *out) {
    memset(out, 0, sizeof *out);
    out->name = io->name;
    out->dtype = (int)io->dtype;
    out->rank = io->rank;
    size_t n = rt_dtype_size(io->dtype);
    for (int d = 0; d < io->rank && d < MILC_MAX_RANK; d++) out->dims[d] = io->dims[d], n *= (size_t)io->dims[d];
    out->bytes = n;
    out->bounded = io->bounded;
}

static int io_info(const MilcModel *m, int i, int output, MilcTensorInfo *out) {
    ApiCall k;
    api_begin(&k);
    RtIoInfo io;
    if (!m || !out || i < 0 || i >= (output ? m->nout : m->nin)) return api_end(&k, MILC_E_USAGE);
    if ((output ? rt_model_output(m->lm.model, i, &io) : rt_model_input(m->lm.model, i, &io)) != 0)
        return api_end(&k, MILC_E_USAGE);
    tensor_info(&io, out);
    return api_end(&k, MILC_OK);
}

MilcStatus milc_model_input(const MilcModel *m, int i, MilcTensorInfo *out) { return io_info(m, i, 0, out); }
MilcStatus milc_model_output(const MilcModel *m, int i, MilcTensorInfo *out) { return io_info(m, i, 1, out); }

int milc_model_find(const MilcModel *m, const char *name, int output) {
    int i = m && name ? rt_model_find(m->lm.model, name, output) : -1;
    return i < 0 ? -1 : i;
}

/* t bound to the caller's buffer p for model io number i. */
static void bind(const MilcModel *m, int i, int output, void *p, RtTensor *t) {
    RtIoInfo io;
    if (output)
        rt_model_output(m->lm.model, i, &io);
    else
        rt_model_input(m->lm.model, i, &io);
    MilcTensorInfo ti;
    tensor_info(&io, &ti);
    *t = (RtTensor){.dtype = io.dtype, .rank = io.rank, .data = p, .size = ti.bytes};
    memcpy(t->dims, io.dims, sizeof t->dims);
}

MilcStatus milc_model_run(MilcModel *m, const void *const *inputs, void *const *outputs, MilcRunStats *stats) {
    ApiCall k;
    api_begin(&k);
    if (!m || (m->nin && !inputs) || (m->nout && !outputs)) return api_end(&k, MILC_E_USAGE);
    for (int i = 0; i < m->nin; i++) {
        if (!inputs[i]) {
            lib_error("input %d has no buffer", i);
            return api_end(&k, MILC_E_USAGE);
        }
        bind(m, i, 0, (void *)inputs[i], &m->in[i]);
    }
    for (int i = 0; i < m->nout; i++) {
        if (!outputs[i]) {
            lib_error("output %d has no buffer", i);
            return api_end(&k, MILC_E_USAGE);
        }
        bind(m, i, 1, outputs[i], &m->out[i]);
    }
    RtRunStats st = {0};
    int r = rt_run(m->lm.model, m->in, m->nin, m->out, m->nout, 0, &st);
    m->ran = r == 0 || r == RT_EINDEX;
    if (stats) *stats = (MilcRunStats){st.dispatches, st.ops, st.seconds};
    if (r == 0) return api_end(&k, MILC_OK);
    lib_error("run failed: %s", rt_strerror(r));
    return api_end(&k, r == RT_EINDEX || r == RT_EBIND || r == RT_ELOOP ? MILC_E_INPUT : MILC_E_SYSTEM);
}

MilcStatus milc_model_output_shape(const MilcModel *m, int i, MilcTensorInfo *out) {
    ApiCall k;
    api_begin(&k);
    RtIoInfo io;
    if (!m || !out || i < 0 || i >= m->nout || rt_model_output(m->lm.model, i, &io) != 0)
        return api_end(&k, MILC_E_USAGE);
    if (io.bounded && m->ran) io.dims[0] = m->out[i].dims[0]; /* rt_run set it */
    tensor_info(&io, out);
    return api_end(&k, MILC_OK);
}

/* ---- states ---- */

int milc_model_nstates(const MilcModel *m) { return m ? rt_model_nstates(m->lm.model) : 0; }

MilcStatus milc_model_state(const MilcModel *m, int i, MilcTensorInfo *out) {
    ApiCall k;
    api_begin(&k);
    RtIoInfo io;
    if (!m || !out || rt_model_state(m->lm.model, i, &io) != 0) {
        lib_error("state %d: no such state", i);
        return api_end(&k, MILC_E_USAGE);
    }
    tensor_info(&io, out);
    return api_end(&k, MILC_OK);
}

/* State i as a tensor over the caller's bytes: exactly the state's size. */
static int state_tensor(const MilcModel *m, int i, void *p, size_t bytes, RtTensor *t) {
    RtIoInfo io;
    if (!m || !p || rt_model_state(m->lm.model, i, &io) != 0) {
        lib_error("state %d: no such state or no buffer", i);
        return MILC_E_USAGE;
    }
    MilcTensorInfo ti;
    tensor_info(&io, &ti);
    if (bytes != ti.bytes) {
        lib_error("state %s: %zu bytes given, it holds %zu (%s)", io.name, bytes, ti.bytes,
                  io.dtype == RT_F16 ? "fp16" : "4 or 1 bytes an element");
        return MILC_E_INPUT;
    }
    *t = (RtTensor){.dtype = io.dtype, .rank = io.rank, .data = p, .size = bytes};
    memcpy(t->dims, io.dims, sizeof t->dims);
    return MILC_OK;
}

MilcStatus milc_model_state_read(MilcModel *m, int i, void *dst, size_t bytes) {
    ApiCall k;
    api_begin(&k);
    RtTensor t;
    int rc = state_tensor(m, i, dst, bytes, &t);
    if (rc == MILC_OK && rt_model_state_get(m->lm.model, i, &t) != 0)
        lib_error("state %d: cannot be read", i), rc = MILC_E_USAGE;
    return api_end(&k, rc);
}

MilcStatus milc_model_state_write(MilcModel *m, int i, const void *src, size_t bytes) {
    ApiCall k;
    api_begin(&k);
    RtTensor t;
    int rc = state_tensor(m, i, (void *)src, bytes, &t);
    if (rc == MILC_OK && rt_model_state_set(m->lm.model, i, &t) != 0)
        lib_error("state %d: cannot be written", i), rc = MILC_E_USAGE;
    return api_end(&k, rc);
}

MilcStatus milc_model_reset_states(MilcModel *m) {
    ApiCall k;
    api_begin(&k);
    if (!m) return api_end(&k, MILC_E_USAGE);
    rt_model_state_reset(m->lm.model);
    return api_end(&k, MILC_OK);
}
