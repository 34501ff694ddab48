/* state.c — states: the buffers a loaded model keeps from run to run (MIL's
 * state<tensor<...>>, written by write_state / coreml_update_state), the
 * rules of RT_OP_UPDATE, their only writer, and the API that sets and reads
 * them by name. */
#include <string.h>

#include "rt_internal.h"

#define FAIL(...) return rt_errf(err, errlen, RT_EINVAL, __VA_ARGS__)

int rt_check_update(const RtBuf *bufs, const RtOpRec *op, char *err, size_t errlen) {
    const RtBuf *x = &bufs[op->in[0]], *y = &bufs[op->out[0]];
    const RtUpdateParams *p = &op->p.upd;
    if (op->nin == 2) FAIL("update: begin without end");
    bool same = x->dtype == y->dtype || (x->dtype == RT_F32 && y->dtype == RT_F16);
    if (!same || x->dtype == RT_F16 || x->dtype == RT_U8)
        FAIL("update: x dtype %u cannot be written to a %u buffer", x->dtype, y->dtype);
    if (x->rank != y->rank) FAIL("update: x has rank %u, y %u", x->rank, y->rank);
    for (uint32_t a = 0; a < x->rank; a++)
        if (x->dims[a] > y->dims[a])
            FAIL("update: x dim %u is %lld, past y's %lld", a, (long long)x->dims[a], (long long)y->dims[a]);
    uint32_t all = (1u << y->rank) - 1;
    if (((uint32_t)p->begin_mask | (uint32_t)p->end_mask | (uint32_t)p->squeeze_mask) & ~all || p->reserved)
        FAIL("update: bad masks");
    for (uint32_t i = 1; i < op->nin; i++) {
        const RtBuf *b = &bufs[op->in[i]];
        if (b->dtype != RT_I32 || b->numel != (int64_t)y->rank)
            FAIL("update: %s must be int32 [%u]", i == 1 ? "begin" : "end", y->rank);
    }
    /* without begin and end the box is x at the origin: it always fits */
    return RT_OK;
}

bool rt_update_box(const RtBuf *x, const RtBuf *y, const RtUpdateParams *p, const int32_t *begin, const int32_t *end,
                   int64_t *start) {
    for (uint32_t a = 0; a < y->rank; a++) {
        int64_t d = y->dims[a], b = begin ? begin[a] : 0, e;
        if (b < 0) b += d;
        if (p->begin_mask >> a & 1) b = 0;
        if (p->squeeze_mask >> a & 1)
            e = b + 1;
        else if (p->end_mask >> a & 1)
            e = d;
        else if (end)
            e = end[a] < 0 ? end[a] + d : end[a];
        else
            e = b + x->dims[a];
        if (b < 0 || e > d || e - b != x->dims[a]) return false;
        start[a] = b;
    }
    return true;
}

/* ---- the model's states ---- */

int rt_model_nstates(const RtModel *m) { return (int)m->nstates; }

int rt_model_state(const RtModel *m, int i, RtIoInfo *info) {
    if (i < 0 || (uint32_t)i >= m->nstates) return RT_EINVAL;
    const RtBuf *b = &m->bufs[m->states[i].buf];
    info->name = m->states[i].name;
    info->dtype = (RtDType)b->dtype;
    info->rank = (int)b->rank;
    memset(info->dims, 0, sizeof info->dims);
    for (uint32_t a = 0; a < b->rank; a++) info->dims[a] = b->dims[a];
    return RT_OK;
}

int rt_model_find_state(const RtModel *m, const char *name) {
    for (uint32_t i = 0; i < m->nstates; i++)
        if (strcmp(m->states[i].name, name) == 0) return (int)i;
    return RT_EINVAL;
}

/* State i's buffer and bytes, checked against t (dtype, shape, room). */
static int state_bind(const RtModel *m, int i, const RtTensor *t, const RtBuf **bo, unsigned char **data) {
    if (i < 0 || (uint32_t)i >= m->nstates || !m->state_mem) return RT_EINVAL;
    const RtBuf *b = &m->bufs[m->states[i].buf];
    if (!t || !t->data || (uint32_t)t->dtype != b->dtype || t->rank != (int)b->rank) return RT_EBIND;
    for (uint32_t a = 0; a < b->rank; a++)
        if (t->dims[a] != b->dims[a]) return RT_EBIND;
    if (t->size < b->bytes) return RT_EBIND;
    *bo = b;
    *data = m->state_mem + m->state_off[i];
    return RT_OK;
}

int rt_model_state_set(RtModel *m, int i, const RtTensor *t) {
    const RtBuf *b;
    unsigned char *d;
    int rc = state_bind(m, i, t, &b, &d);
    if (rc) return rc;
    if (b->dtype == RT_BOOL) /* kernels rely on bools being 0 or 1 */
        for (int64_t k = 0; k < b->numel; k++) d[k] = ((const unsigned char *)t->data)[k] != 0;
    else
        memcpy(d, t->data, (size_t)b->bytes);
    return RT_OK;
}

int rt_model_state_get(const RtModel *m, int i, RtTensor *t) {
    const RtBuf *b;
    unsigned char *d;
    int rc = state_bind(m, i, t, &b, &d);
    if (rc) return rc;
    memcpy(t->data, d, (size_t)b->bytes);
    return RT_OK;
}

void rt_model_state_reset(RtModel *m) {
    for (uint32_t i = 0; m->state_mem && i < m->nstates; i++)
        memset(m->state_mem + m->state_off[i], 0, (size_t)m->bufs[m->states[i].buf].bytes);
}
