/* loader.c — rt_model_load: turns untrusted sections into a runnable model.
 * Every count, size, index, shape, parameter, arena offset and overlap is
 * checked before anything is used; then all run-time memory is allocated
 * here so rt_run never allocates. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rt_internal.h"

enum { RT_MAX_BUFS = 1 << 20, RT_MAX_OPS = 1 << 20 };
#define RT_MAX_ARENA (UINT64_C(1) << 40)

#define BAD(...)                                                                                                       \
    do {                                                                                                               \
        rc = rt_errf(err, errlen, RT_EFORMAT, __VA_ARGS__);                                                            \
        goto fail;                                                                                                     \
    } while (0)

static bool io_compatible(uint32_t buf_dtype, uint32_t io) {
    if (buf_dtype == RT_F32) return io == RT_F16 || io == RT_F32;
    if (buf_dtype == RT_F16) return io == RT_F16; /* bound in place */
    if (buf_dtype == RT_I32) return io == RT_I32 || rt_dtype_narrow_int((RtDType)io);
    return buf_dtype == RT_BOOL && io == buf_dtype;
}

static int parse_meta(RtModel *m, const RtSection *s, char *err, size_t errlen) {
    int rc;
    RtMetaHead mh;
    if (s->size < sizeof mh) BAD("meta section too short");
    memcpy(&mh, s->data, sizeof mh);
    if (mh.nbuf > RT_MAX_BUFS || mh.ninputs > mh.nbuf || mh.noutputs > RT_MAX_BUFS || mh.noutputs == 0 ||
        mh.nstates > mh.nbuf)
        BAD("meta: counts %u/%u/%u/%u invalid", mh.nbuf, mh.ninputs, mh.noutputs, mh.nstates);
    uint64_t want = sizeof mh + (uint64_t)mh.nbuf * sizeof(RtBufRec) +
                    (uint64_t)(mh.ninputs + mh.noutputs + mh.nstates) * sizeof(RtIoRec);
    if (s->size != want) BAD("meta section is %zu bytes, its counts need %llu", s->size, (unsigned long long)want);
    m->nbuf = mh.nbuf;
    m->ninputs = mh.ninputs;
    m->noutputs = mh.noutputs;
    m->nstates = mh.nstates;
    m->states = calloc(mh.nstates ? mh.nstates : 1, sizeof(RtIoRec));
    m->state_off = calloc(mh.nstates ? mh.nstates : 1, sizeof(uint64_t));
    m->bufs = calloc(mh.nbuf ? mh.nbuf : 1, sizeof(RtBuf));
    m->inputs = calloc(mh.ninputs ? mh.ninputs : 1, sizeof(RtIoRec));
    m->outputs = calloc(mh.noutputs, sizeof(RtIoRec));
    m->weight = calloc(mh.nbuf ? mh.nbuf : 1, sizeof(void *));
    m->ex.rows = calloc(mh.nbuf ? mh.nbuf : 1, sizeof(int64_t));
    if (!m->bufs || !m->inputs || !m->outputs || !m->weight || !m->states || !m->state_off || !m->ex.rows)
        return rt_errf(err, errlen, RT_ENOMEM, "out of memory");
    const unsigned char *p = (const unsigned char *)s->data + sizeof mh;
    for (uint32_t i = 0; i < mh.nbuf; i++, p += sizeof(RtBufRec)) {
        RtBufRec r;
        memcpy(&r, p, sizeof r);
        char msg[160];
        if (rt_buf_init(&m->bufs[i], &r, msg, sizeof msg)) BAD("buffer %u: %s", i, msg);
    }
    memcpy(m->inputs, p, mh.ninputs * sizeof(RtIoRec));
    p += mh.ninputs * sizeof(RtIoRec);
    memcpy(m->outputs, p, mh.noutputs * sizeof(RtIoRec));
    p += mh.noutputs * sizeof(RtIoRec);
    memcpy(m->states, p, mh.nstates * sizeof(RtIoRec));
    uint32_t ninput_bufs = 0, nstate_bufs = 0;
    for (uint32_t i = 0; i < mh.nbuf; i++)
        ninput_bufs += m->bufs[i].kind == RT_BUF_INPUT, nstate_bufs += m->bufs[i].kind == RT_BUF_STATE;
    if (ninput_bufs != mh.ninputs) BAD("meta: %u input buffers but %u input records", ninput_bufs, mh.ninputs);
    if (nstate_bufs != mh.nstates) BAD("meta: %u state buffers but %u state records", nstate_bufs, mh.nstates);
    uint64_t soff = 0;
    for (uint32_t i = 0; i < mh.nstates; i++) {
        RtIoRec *r = &m->states[i];
        if (!memchr(r->name, 0, RT_NAME_MAX) || !rt_name_ok(r->name)) BAD("state %u: name is not an identifier", i);
        if (r->buf >= mh.nbuf || m->bufs[r->buf].kind != RT_BUF_STATE)
            BAD("state %s: buffer %u is not a state", r->name, r->buf);
        if (r->io_dtype != m->bufs[r->buf].dtype || m->bufs[r->buf].flags)
            BAD("state %s: dtype %u is not its buffer's", r->name, r->io_dtype);
        for (uint32_t j = 0; j < i; j++)
            if (m->states[j].buf == r->buf || !strcmp(m->states[j].name, r->name))
                BAD("state %s: declared twice", r->name);
        m->state_off[i] = soff;
        soff += (m->bufs[r->buf].bytes + RT_ARENA_ALIGN - 1) & ~(uint64_t)(RT_ARENA_ALIGN - 1);
    }
    for (uint32_t i = 0; i < mh.ninputs + mh.noutputs; i++) {
        bool isin = i < mh.ninputs;
        RtIoRec *r = isin ? &m->inputs[i] : &m->outputs[i - mh.ninputs];
        if (!memchr(r->name, 0, RT_NAME_MAX) || !r->name[0]) BAD("%s %u: bad name", isin ? "input" : "output", i);
        if (!rt_name_ok(r->name)) {
            char shown[4 * RT_NAME_MAX];
            rt_name_show(r->name, shown, sizeof shown);
            BAD("%s %u: name \"%s\" is not an identifier ([A-Za-z_][A-Za-z0-9_]*)", isin ? "input" : "output",
                isin ? i : i - mh.ninputs, shown);
        }
        if (r->buf >= mh.nbuf) BAD("%s %s: buffer %u out of range", isin ? "input" : "output", r->name, r->buf);
        const RtBuf *b = &m->bufs[r->buf];
        if (isin && b->kind != RT_BUF_INPUT) BAD("input %s: buffer %u is not an input", r->name, r->buf);
        if (!io_compatible(b->dtype, r->io_dtype) || (b->flags & ~(uint32_t)(isin ? 0 : RT_BUFF_ROWS)))
            BAD("%s %s: dtype %u incompatible", isin ? "input" : "output", r->name, r->io_dtype);
        /* fp16 is storage only: a weight, or an input the run binds in place
         * and lets go of before it copies outputs out. */
        if (!isin && b->dtype == RT_F16) BAD("output %s: buffer %u is fp16 storage", r->name, r->buf);
        if (!isin && b->kind == RT_BUF_STATE) BAD("output %s: buffer %u is a state", r->name, r->buf);
        if (isin)
            for (uint32_t j = 0; j < i; j++)
                if (m->inputs[j].buf == r->buf) BAD("input %s: buffer %u bound twice", r->name, r->buf);
    }
    return RT_OK;
fail:
    return rc;
}

typedef struct {
    uint32_t buf;
    int64_t first, last;
    uint64_t off, end;
} LiveRange;

static int cmp_lr(const void *a, const void *b) {
    const LiveRange *x = a, *y = b;
    return x->off < y->off ? -1 : x->off > y->off;
}

/* The rightmost set leaf below q of a count tree over size leaves, or -1. */
static int64_t tree_last_below(const uint32_t *cnt, uint32_t size, uint32_t q) {
    if (q == 0) return -1;
    uint32_t n = size + q - 1;
    while (!cnt[n]) {
        while (n > 1 && !((n & 1) && cnt[n - 1])) n >>= 1;
        if (n == 1) return -1;
        n--; /* the left sibling holds one: its rightmost leaf is the answer */
        while (n < size) n = cnt[2 * n + 1] ? 2 * n + 1 : 2 * n;
    }
    return (int64_t)(n - size);
}

static void tree_add(uint32_t *cnt, uint32_t size, uint32_t leaf, int d) {
    for (uint32_t n = size + leaf; n; n >>= 1) cnt[n] += (uint32_t)d;
}

typedef struct {
    int64_t t;
    uint32_t i;
} TimeIdx;
static int cmp_time(const void *a, const void *b) {
    const TimeIdx *x = a, *y = b;
    return x->t != y->t ? (x->t < y->t ? -1 : 1) : (x->i > y->i) - (x->i < y->i);
}

/* Two ranges of lr (sorted by offset) that share arena bytes while both
 * live, into *a and *b: 1, else 0; -1 out of memory.  A sweep over time
 * keeps the live ranges — disjoint, or the sweep has already stopped — in a
 * count tree over the distinct offsets, and a new range can only meet the
 * live one starting last before its end: O(n log n).  (Comparing each range
 * with every one at a lower offset was quadratic in the op count, as a long
 * chain reuses the same few offsets.) */
static int find_shared(const LiveRange *lr, uint32_t nl, uint32_t *a, uint32_t *b) {
    uint32_t *slot = malloc(sizeof(uint32_t) * (nl + 1)), *own = malloc(sizeof(uint32_t) * (nl + 1));
    TimeIdx *byfirst = malloc(sizeof(TimeIdx) * (nl + 1)), *bylast = malloc(sizeof(TimeIdx) * (nl + 1));
    uint64_t *offs = malloc(sizeof(uint64_t) * (nl + 1));
    uint32_t size = 1, ns = 0, *cnt = NULL;
    int found = -1;
    while (size < nl) size *= 2;
    if (!slot || !own || !byfirst || !bylast || !offs || !(cnt = calloc(2 * (size_t)size, sizeof *cnt))) goto out;
    for (uint32_t i = 0; i < nl; i++) {
        if (ns == 0 || offs[ns - 1] != lr[i].off) offs[ns++] = lr[i].off;
        slot[i] = ns - 1;
        byfirst[i] = (TimeIdx){lr[i].first, i};
        bylast[i] = (TimeIdx){lr[i].last, i};
    }
    qsort(byfirst, nl, sizeof *byfirst, cmp_time);
    qsort(bylast, nl, sizeof *bylast, cmp_time);
    found = 0;
    for (uint32_t i = 0, gone = 0; i < nl && !found; i++) {
        uint32_t ri = byfirst[i].i;
        const LiveRange *r = &lr[ri];
        /* those no longer live; each was added, its first use being earlier */
        for (; gone < nl && bylast[gone].t < r->first; gone++) tree_add(cnt, size, slot[bylast[gone].i], -1);
        uint32_t lo = 0, hi = ns; /* slots starting before r's end */
        while (lo < hi) {
            uint32_t mid = lo + (hi - lo) / 2;
            if (offs[mid] < r->end)
                lo = mid + 1;
            else
                hi = mid;
        }
        int64_t k = tree_last_below(cnt, size, lo);
        if (k >= 0 && lr[own[k]].end > r->off) *a = lr[own[k]].buf, *b = r->buf, found = 1;
        tree_add(cnt, size, slot[ri], 1);
        own[slot[ri]] = ri;
    }
out:
    free(slot), free(own), free(byfirst), free(bylast), free(offs), free(cnt);
    return found;
}

static int parse_plan(RtModel *m, int pi, const RtSection *s, char *err, size_t errlen) {
    int rc = RT_OK;
    RtPlanHead ph;
    int64_t *first = NULL, *last = NULL;
    LiveRange *lr = NULL;
    if (s->size < sizeof ph) BAD("plan section too short");
    memcpy(&ph, s->data, sizeof ph);
    if (ph.program != (uint32_t)pi || ph.nops > RT_MAX_OPS || ph.arena_size > RT_MAX_ARENA)
        BAD("plan %d: header invalid", pi);
    uint64_t want = sizeof ph + (uint64_t)m->nbuf * 8 + (uint64_t)ph.nops * sizeof(RtOpRec);
    if (s->size != want) BAD("plan %d is %zu bytes, its counts need %llu", pi, s->size, (unsigned long long)want);
    RtProg *pr = &m->prog[pi];
    pr->nops = ph.nops;
    pr->arena_size = ph.arena_size;
    pr->offset = malloc(sizeof(uint64_t) * (m->nbuf ? m->nbuf : 1));
    pr->ops = malloc(sizeof(RtOpRec) * (ph.nops ? ph.nops : 1));
    first = malloc(sizeof(int64_t) * (m->nbuf ? m->nbuf : 1));
    last = malloc(sizeof(int64_t) * (m->nbuf ? m->nbuf : 1));
    lr = malloc(sizeof(LiveRange) * (m->nbuf ? m->nbuf : 1));
    if (!pr->offset || !pr->ops || !first || !last || !lr) {
        rc = rt_errf(err, errlen, RT_ENOMEM, "out of memory");
        goto fail;
    }
    const unsigned char *p = (const unsigned char *)s->data + sizeof ph;
    memcpy(pr->offset, p, m->nbuf * 8);
    memcpy(pr->ops, p + m->nbuf * 8, ph.nops * sizeof(RtOpRec));
    for (uint32_t i = 0; i < m->nbuf; i++) first[i] = INT64_MAX, last[i] = -2;
    for (uint32_t i = 0; i < m->ninputs; i++) first[m->inputs[i].buf] = last[m->inputs[i].buf] = -1;
    for (uint32_t i = 0; i < m->nstates; i++) first[m->states[i].buf] = last[m->states[i].buf] = -1;
    for (uint32_t i = 0; i < ph.nops; i++) {
        const RtOpRec *op = &pr->ops[i];
        char msg[200];
        if (rt_op_check(m->bufs, m->nbuf, op, true, msg, sizeof msg)) BAD("plan %d op %u: %s", pi, i, msg);
        for (uint32_t j = 0; j < op->nin + op->nout; j++) {
            int id = j < op->nin ? op->in[j] : op->out[j - op->nin];
            if (m->bufs[id].kind == RT_BUF_WEIGHT) continue;
            if (first[id] > (int64_t)i) first[id] = i;
            if (last[id] < (int64_t)i) last[id] = i;
            if (j < op->nin && first[id] == (int64_t)i)
                BAD("plan %d op %u reads buffer %d before it is written", pi, i, id);
        }
    }
    for (uint32_t i = 0; i < m->noutputs; i++) {
        uint32_t id = m->outputs[i].buf;
        if (m->bufs[id].kind == RT_BUF_WEIGHT) continue;
        if (last[id] == -2) BAD("plan %d never writes output %s", pi, m->outputs[i].name);
        last[id] = ph.nops;
    }
    {
        uint32_t *jump = malloc(sizeof(uint32_t) * 2 * (ph.nops ? ph.nops : 1));
        if (!jump) {
            rc = rt_errf(err, errlen, RT_ENOMEM, "out of memory");
            goto fail;
        }
        char msg[200];
        int nl = rt_loops(pr->ops, ph.nops, jump, msg, sizeof msg);
        if (nl <= 0) free(jump);
        if (nl < 0) BAD("plan %d: %s", pi, msg);
        if (nl > 0) {
            pr->jump = jump, pr->iters = jump + ph.nops;
            rt_loops_extend(pr->ops, ph.nops, jump, m->nbuf, first, last);
        }
    }
    /* Arena: every live buffer inside it, aligned; overlapping ones must not be live at once. */
    uint32_t nl = 0;
    for (uint32_t i = 0; i < m->nbuf; i++) {
        if (last[i] == -2 || rt_buf_external(&m->bufs[i])) {
            pr->offset[i] = UINT64_MAX;
            continue;
        }
        uint64_t off = pr->offset[i], bytes = m->bufs[i].bytes;
        if (off % RT_ARENA_ALIGN || off > ph.arena_size || bytes > ph.arena_size - off)
            BAD("plan %d: buffer %u at arena offset %llu (%llu bytes) outside the %llu-byte arena", pi, i,
                (unsigned long long)off, (unsigned long long)bytes, (unsigned long long)ph.arena_size);
        lr[nl++] = (LiveRange){i, first[i], last[i], off, off + bytes};
    }
    /* No plan needs more arena than all its buffers side by side; a bigger
     * claim is corruption and must not make us allocate it. */
    uint64_t total = 0;
    for (uint32_t i = 0; i < nl; i++)
        total += (m->bufs[lr[i].buf].bytes + RT_ARENA_ALIGN - 1) & ~(uint64_t)(RT_ARENA_ALIGN - 1);
    if (ph.arena_size > total)
        BAD("plan %d: arena of %llu bytes exceeds its buffers' %llu", pi, (unsigned long long)ph.arena_size,
            (unsigned long long)total);
    qsort(lr, nl, sizeof *lr, cmp_lr);
    uint32_t ba, bb;
    int shared = find_shared(lr, nl, &ba, &bb);
    if (shared < 0) {
        rc = rt_errf(err, errlen, RT_ENOMEM, "out of memory");
        goto fail;
    }
    if (shared) BAD("plan %d: buffers %u and %u share arena bytes while both live", pi, ba, bb);
fail:
    free(first);
    free(last);
    free(lr);
    return rc;
}

void rt_model_free(RtModel *m) {
    if (!m) return;
    if (m->own_pool) rt_pool_free(m->pool);
    free(m->bufs);
    free(m->ex.rows);
    free(m->inputs);
    free(m->outputs);
    free(m->states);
    free(m->state_off);
    free(m->state_mem);
    free(m->weight);
    for (int p = 0; p < 2; p++) {
        free(m->prog[p].offset);
        free(m->prog[p].ops);
        free(m->prog[p].parts);
        free(m->prog[p].sync);
        free(m->prog[p].jump);
        free(m->ptr[p]);
    }
    free(m);
}

/* Points the model's temps into its pool's arena as it is now (a later
 * model of a shared pool may have grown it). */
void rt_model_bind_memory(RtModel *m) {
    rt_pool_memory_get(m->pool, &m->arena, &m->ex.scratch, &m->mem_gen);
    for (int p = 0; p < 2; p++) {
        if (!m->has_prog[p]) continue;
        for (uint32_t i = 0; i < m->nbuf; i++) {
            if (m->bufs[i].kind == RT_BUF_WEIGHT)
                m->ptr[p][i] = (void *)m->weight[i];
            else if (m->prog[p].offset[i] != UINT64_MAX)
                m->ptr[p][i] = m->arena + m->prog[p].offset[i];
        }
        for (uint32_t i = 0; i < m->nstates; i++) m->ptr[p][m->states[i].buf] = m->state_mem + m->state_off[i];
    }
}

int rt_model_load(RtModel **out, const RtSection *secs, int n, const RtLoadOptions *opts, char *err, size_t errlen) {
    *out = NULL;
    RtHeader h;
    RtEntry *ent = NULL;
    int rc;
    if (!secs || n < 1) return rt_errf(err, errlen, RT_EINVAL, "no sections");
    rc = rt_manifest_read(&secs[0], &h, &ent, err, errlen);
    if (rc) return rc;
    RtModel *m = calloc(1, sizeof *m);
    if (!m) {
        free(ent);
        return rt_errf(err, errlen, RT_ENOMEM, "out of memory");
    }
    if ((rc = rt_cpu_kernels(opts ? opts->cpu : RT_CPU_AUTO, &m->kern, err, errlen))) goto fail;
    if ((uint64_t)n != h.nsections + 1ull) BAD("%d sections given, the manifest lists %u", n - 1, h.nsections);
    for (uint32_t i = 0; i < h.nsections; i++)
        if (secs[i + 1].size != ent[i].size || (!secs[i + 1].data && ent[i].size))
            BAD("section %u: %zu bytes given, manifest says %llu", i, secs[i + 1].size,
                (unsigned long long)ent[i].size);
    if (opts && (opts->flags & RT_LOAD_VERIFY) && (rc = rt_artifact_verify(secs, n, err, errlen))) goto fail;
    m->mode = (int)h.mode;

    /* Find the sections by kind; each at most once (weights once per id). */
    int meta = -1, plan[2] = {-1, -1}, source = 0;
    for (uint32_t i = 0; i < h.nsections; i++) {
        switch (ent[i].kind) {
        case RT_SEC_META:
            if (meta >= 0 || ent[i].id) BAD("duplicate meta section");
            meta = (int)i + 1;
            break;
        case RT_SEC_PLAN:
            if (ent[i].id > 1 || plan[ent[i].id] >= 0) BAD("bad or duplicate plan section id %u", ent[i].id);
            plan[ent[i].id] = (int)i + 1;
            break;
        case RT_SEC_SOURCE:
            if (source) BAD("duplicate source section");
            source = 1;
            break;
        case RT_SEC_WEIGHT: break;
        default: BAD("section %u: unknown kind %u", i, ent[i].kind);
        }
    }
    if (meta < 0) BAD("no meta section");
    if ((rc = parse_meta(m, &secs[meta], err, errlen))) goto fail;
    for (uint32_t i = 0; i < h.nsections; i++) {
        if (ent[i].kind != RT_SEC_WEIGHT) continue;
        uint32_t id = ent[i].id;
        if (id >= m->nbuf || m->bufs[id].kind != RT_BUF_WEIGHT)
            BAD("weight section %u: buffer %u is not a weight", i, id);
        if (m->weight[id]) BAD("weight %u given twice", id);
        if (ent[i].size != m->bufs[id].bytes)
            BAD("weight %u: %llu bytes, its shape needs %llu", id, (unsigned long long)ent[i].size,
                (unsigned long long)m->bufs[id].bytes);
        if ((uintptr_t)secs[i + 1].data % 16) BAD("weight %u is not 16-byte aligned", id);
        m->weight[id] = secs[i + 1].data;
    }
    for (uint32_t i = 0; i < m->nbuf; i++)
        if (m->bufs[i].kind == RT_BUF_WEIGHT && !m->weight[i]) BAD("weight %u has no section", i);
    bool need[2] = {rt_mode((int)h.mode)->bonded, rt_mode((int)h.mode)->nonbonded};
    for (int p = 0; p < 2; p++) {
        if (need[p] != (plan[p] >= 0))
            BAD("mode %u artifact %s a %s plan", h.mode, need[p] ? "lacks" : "has", p ? "non-bonded" : "bonded");
        if (!need[p]) continue;
        if ((rc = parse_plan(m, p, &secs[plan[p]], err, errlen))) goto fail;
        m->has_prog[p] = 1;
        RtProg *pr = &m->prog[p];
        pr->parts = malloc(sizeof(uint32_t) * 2 * (pr->nops ? pr->nops : 1));
        pr->ahead = pr->parts ? pr->parts + pr->nops : NULL;
        pr->sync = aligned_alloc(64, sizeof(RtOpSync) * (pr->nops ? pr->nops : 1));
        if (!pr->parts || !pr->sync) {
            rc = rt_errf(err, errlen, RT_ENOMEM, "out of memory");
            goto fail;
        }
        memset(pr->sync, 0, sizeof(RtOpSync) * (pr->nops ? pr->nops : 1));
        if (m->prog[p].arena_size > m->arena_size) m->arena_size = m->prog[p].arena_size;
    }

    /* Described only: everything checked, nothing allocated to run (the
     * memory limit is checked when it is loaded to run). */
    if (opts && (opts->flags & RT_LOAD_DESCRIBE)) {
        free(ent);
        *out = m;
        return RT_OK;
    }

    if (opts && opts->max_arena && m->arena_size > opts->max_arena) {
        rc = rt_errf(err, errlen, RT_ENOMEM, "arena of %llu bytes exceeds the limit of %llu",
                     (unsigned long long)m->arena_size, (unsigned long long)opts->max_arena);
        goto fail;
    }
    /* Run-time memory, all of it now: the threads, and the arena and scratch
     * they run in, which belong to the pool (its own, or a chain's). */
    if (opts && opts->pool) {
        m->pool = opts->pool;
    } else if ((rc = rt_pool_new(&m->pool, opts ? opts->nthreads : 0)) != RT_OK) {
        rt_errf(err, errlen, rc, "cannot start the runtime's worker threads");
        goto fail;
    } else {
        m->own_pool = true;
    }
    m->nthreads = rt_pool_threads(m->pool);
    for (int p = 0; p < 2; p++) {
        RtProg *pr = &m->prog[p];
        for (uint32_t i = 0; m->has_prog[p] && i < pr->nops; i++)
            pr->parts[i] = rt_op_parts(m->bufs, &pr->ops[i], m->nthreads);
        for (uint32_t i = m->has_prog[p] ? pr->nops : 0, next = i; i-- > 0;) {
            pr->ahead[i] = next;
            if (pr->parts[i] > 1) next = i;
        }
    }
    size_t asz = (size_t)((m->arena_size + RT_ARENA_ALIGN - 1) & ~(uint64_t)(RT_ARENA_ALIGN - 1));
    size_t scratch = 0;
    for (int p = 0; p < 2; p++)
        for (uint32_t i = 0; m->has_prog[p] && i < m->prog[p].nops; i++) {
            const RtOpInfo *oi = rt_op_info(m->prog[p].ops[i].kind);
            if (oi->scratch) {
                size_t s = oi->scratch(m->bufs, &m->prog[p].ops[i]);
                if (s > scratch) scratch = s;
            }
        }
    scratch = (scratch + 63) & ~(size_t)63;
    m->ex.scratch_per_thread = scratch;
    /* kernels index scratch by part: up to RT_PARTS_PER_THREAD per thread */
    size_t slots = m->nthreads > 1 ? (size_t)m->nthreads * RT_PARTS_PER_THREAD : 1;
    size_t ssz = scratch ? scratch * slots : 64;
    if (opts && opts->max_arena && (ssz > opts->max_arena || asz > opts->max_arena - ssz)) {
        rc = rt_errf(err, errlen, RT_ENOMEM, "a %llu-byte arena and %llu bytes of scratch exceed the limit of %llu",
                     (unsigned long long)asz, (unsigned long long)ssz, (unsigned long long)opts->max_arena);
        goto fail;
    }
    m->ptr[0] = calloc(m->nbuf ? m->nbuf : 1, sizeof(void *));
    m->ptr[1] = calloc(m->nbuf ? m->nbuf : 1, sizeof(void *));
    if (!m->ptr[0] || !m->ptr[1] || rt_pool_memory(m->pool, asz, ssz) != RT_OK) {
        rc = rt_errf(err, errlen, RT_ENOMEM, "out of memory allocating a %llu-byte arena",
                     (unsigned long long)m->arena_size);
        goto fail;
    }
    /* States live as long as the model, outside the arena the pool's models
     * share, zero until a run or the caller writes them. */
    uint64_t sbytes = 0;
    for (uint32_t i = 0; i < m->nstates; i++)
        sbytes = m->state_off[i] +
                 ((m->bufs[m->states[i].buf].bytes + RT_ARENA_ALIGN - 1) & ~(uint64_t)(RT_ARENA_ALIGN - 1));
    if (sbytes && (opts && opts->max_arena && sbytes > opts->max_arena)) {
        rc = rt_errf(err, errlen, RT_ENOMEM, "states of %llu bytes exceed the limit of %llu",
                     (unsigned long long)sbytes, (unsigned long long)opts->max_arena);
        goto fail;
    }
    /* calloc: big states come as untouched zero pages (16-byte aligned, as
     * the kernels need; each state at a 64-byte offset in it) */
    if (sbytes && !(m->state_mem = calloc(1, (size_t)sbytes))) {
        rc = rt_errf(err, errlen, RT_ENOMEM, "out of memory allocating %llu bytes of states",
                     (unsigned long long)sbytes);
        goto fail;
    }
    rt_model_bind_memory(m);
    m->ex.bufs = m->bufs;
    m->last_prog = m->has_prog[0] ? 0 : 1;
    free(ent);
    *out = m;
    return RT_OK;
fail:
    free(ent);
    rt_model_free(m);
    return rc;
}

int rt_model_ninputs(const RtModel *m) { return (int)m->ninputs; }
int rt_model_noutputs(const RtModel *m) { return (int)m->noutputs; }
int rt_model_mode(const RtModel *m) { return m->mode; }

bool rt_name_ok(const char *name) {
    size_t n = 0;
    for (; name[n]; n++) {
        unsigned char c = (unsigned char)name[n];
        bool alpha = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
        if (!alpha && !(n > 0 && c >= '0' && c <= '9')) return false;
    }
    return n > 0 && n < RT_NAME_MAX;
}

void rt_name_show(const char *name, char *out, size_t cap) {
    size_t k = 0;
    for (const unsigned char *p = (const unsigned char *)name; *p && k + 5 < cap; p++)
        k += (size_t)(*p >= 0x20 && *p < 0x7f && *p != '"' && *p != '\\' ? snprintf(out + k, cap - k, "%c", *p)
                                                                         : snprintf(out + k, cap - k, "\\x%02x", *p));
    out[k < cap ? k : 0] = 0;
}

int rt_model_find(const RtModel *m, const char *name, int output) {
    const RtIoRec *r = output ? m->outputs : m->inputs;
    uint32_t n = output ? m->noutputs : m->ninputs;
    for (uint32_t i = 0; i < n; i++)
        if (strcmp(r[i].name, name) == 0) return (int)i;
    return RT_EINVAL;
}

static int io_info(const RtModel *m, const RtIoRec *r, RtIoInfo *info) {
    const RtBuf *b = &m->bufs[r->buf];
    info->name = r->name;
    info->dtype = (RtDType)r->io_dtype;
    info->rank = (int)b->rank;
    memset(info->dims, 0, sizeof info->dims);
    for (uint32_t i = 0; i < b->rank; i++) info->dims[i] = b->dims[i];
    info->bounded = (b->flags & RT_BUFF_ROWS) != 0;
    return RT_OK;
}

int rt_model_input(const RtModel *m, int i, RtIoInfo *info) {
    if (i < 0 || (uint32_t)i >= m->ninputs) return RT_EINVAL;
    return io_info(m, &m->inputs[i], info);
}

int rt_model_output(const RtModel *m, int i, RtIoInfo *info) {
    if (i < 0 || (uint32_t)i >= m->noutputs) return RT_EINVAL;
    return io_info(m, &m->outputs[i], info);
}

int rt_model_buffer(const RtModel *m, int buf, const void **data, RtDType *dtype, int *rank, int64_t *dims) {
    if (buf < 0 || (uint32_t)buf >= m->nbuf) return RT_EINVAL;
    const RtBuf *b = &m->bufs[buf];
    void *p = m->ptr[m->last_prog][buf];
    if (!p || (b->flags & RT_BUFF_PANELS)) return RT_EINVAL;
    *data = p;
    if (dtype) *dtype = (RtDType)b->dtype;
    if (rank) *rank = (int)b->rank;
    if (dims)
        for (uint32_t i = 0; i < b->rank; i++) dims[i] = b->dims[i];
    if (dims && (b->flags & RT_BUFF_ROWS)) dims[0] = m->ex.rows[buf];
    return RT_OK;
}
