/* builder.c — RtPlanBuilder: records buffers and ops for one or two programs,
 * then rtb_finish packs GEMM weights for their kernels, plans each program's
 * arena from buffer lifetimes, and serialises the artifact sections. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "milc/half.h"
#include "rt_internal.h"
#include "milc/ossys.h"

typedef struct {
    RtBufRec rec;
    char name[RT_NAME_MAX];
    void *data;    /* weights: owned copy, or the caller's bytes if borrowed */
    bool borrowed; /* rtb_weight_ref: never freed here; copied or packed by rtb_finish */
    bool shared;   /* borrowed bytes another buffer reads too: never reported consumed */
} BBuf;

typedef struct {
    RtOpRec *ops;
    uint32_t n, cap;
} BProg;

typedef struct {
    int w;
    RtDType src;
    int64_t n, k;
} PackJob;

struct RtPlanBuilder {
    int mode, cur;
    BBuf *bufs;
    RtBuf *rb; /* parallel to bufs: what the checkers read */
    uint32_t nbuf, capbuf;
    RtIoRec *inputs, *outputs, *states;
    uint32_t nin, nout, capin, capout, nstate, capstate;
    BProg prog[2];
    PackJob *packs; /* queued by pack_weights, run by run_packs */
    uint32_t npack, cappack;
    int rc;
    char err[256];
    void (*consumed)(void *ctx, const void *data, size_t n); /* rtb_on_consumed */
    void *consumed_ctx;
};

static int fail(RtPlanBuilder *b, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(RtPlanBuilder *b, int code, const char *fmt, ...) {
    if (b->rc) return b->rc;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b->err, sizeof b->err, fmt, ap);
    va_end(ap);
    b->rc = code;
    return code;
}

static bool grow(void **p, uint32_t *cap, uint32_t need, size_t elem) {
    if (need <= *cap) return true;
    uint32_t nc = *cap ? *cap * 2 : 16;
    while (nc < need) nc *= 2;
    void *q = realloc(*p, nc * elem);
    if (!q) return false;
    *p = q;
    *cap = nc;
    return true;
}

RtPlanBuilder *rtb_new(int mode) {
    if (!rt_mode(mode)) return NULL;
    RtPlanBuilder *b = calloc(1, sizeof *b);
    if (!b) return NULL;
    b->mode = mode;
    b->cur = mode == RT_MODE_NONBONDED ? RT_PROG_NONBONDED : RT_PROG_BONDED;
    return b;
}

void rtb_free(RtPlanBuilder *b) {
    if (!b) return;
    for (uint32_t i = 0; i < b->nbuf; i++)
        if (!b->bufs[i].borrowed) free(b->bufs[i].data);
    free(b->bufs);
    free(b->rb);
    free(b->inputs);
    free(b->outputs);
    free(b->states);
    free(b->prog[0].ops);
    free(b->prog[1].ops);
    free(b->packs);
    free(b);
}

const char *rtb_error(const RtPlanBuilder *b) { return b->err; }

static int add_buf(RtPlanBuilder *b, uint32_t kind, RtDType dt, int rank, const int64_t *dims, const char *name) {
    if (b->rc) return b->rc;
    if (rank < 0 || rank > RT_MAX_RANK || (rank && !dims)) return fail(b, RT_EINVAL, "buffer rank %d invalid", rank);
    if (name && strlen(name) >= RT_NAME_MAX)
        return fail(b, RT_EINVAL, "name '%.40s...' longer than %d", name, RT_NAME_MAX - 1);
    if (b->nbuf >= INT32_MAX / 2) return fail(b, RT_EINVAL, "too many buffers");
    uint32_t cap = b->capbuf;
    if (!grow((void **)&b->bufs, &cap, b->nbuf + 1, sizeof(BBuf)) ||
        !grow((void **)&b->rb, &b->capbuf, b->nbuf + 1, sizeof(RtBuf)))
        return fail(b, RT_ENOMEM, "out of memory");
    b->capbuf = cap;
    BBuf *bb = &b->bufs[b->nbuf];
    memset(bb, 0, sizeof *bb);
    bb->rec.kind = kind;
    bb->rec.dtype = (uint32_t)dt;
    bb->rec.rank = (uint32_t)rank;
    for (int i = 0; i < rank; i++) bb->rec.dims[i] = dims[i];
    if (name) snprintf(bb->name, sizeof bb->name, "%s", name);
    char msg[160];
    int rc = rt_buf_init(&b->rb[b->nbuf], &bb->rec, msg, sizeof msg);
    if (rc) return fail(b, RT_EINVAL, "%s%s%s", name ? name : "", name ? ": " : "", msg);
    return (int)b->nbuf++;
}

/* Callers bind inputs and outputs by name: names must be unique among each. */
static bool name_taken(const RtIoRec *recs, uint32_t n, const char *name) {
    for (uint32_t i = 0; i < n; i++)
        if (strcmp(recs[i].name, name) == 0) return true;
    return false;
}

int rtb_input(RtPlanBuilder *b, const char *name, RtDType io, int rank, const int64_t *dims) {
    if (!name || !rt_name_ok(name)) return fail(b, RT_EINVAL, "input needs an identifier for a name");
    if (name_taken(b->inputs, b->nin, name)) return fail(b, RT_EINVAL, "input %s declared twice", name);
    RtDType in = io == RT_F16 ? RT_F32 : rt_dtype_narrow_int(io) ? RT_I32 : io;
    if (io != RT_F16 && io != RT_F32 && io != RT_I32 && io != RT_BOOL && !rt_dtype_narrow_int(io))
        return fail(b, RT_EINVAL, "%s: bad dtype", name);
    int id = add_buf(b, RT_BUF_INPUT, in, rank, dims, name);
    if (id < 0) return id;
    if (!grow((void **)&b->inputs, &b->capin, b->nin + 1, sizeof(RtIoRec))) return fail(b, RT_ENOMEM, "out of memory");
    RtIoRec *r = &b->inputs[b->nin++];
    memset(r, 0, sizeof *r);
    r->buf = (uint32_t)id;
    r->io_dtype = (uint32_t)io;
    snprintf(r->name, sizeof r->name, "%s", name);
    return id;
}

int rtb_input_f16(RtPlanBuilder *b, const char *name, int rank, const int64_t *dims) {
    if (b->rc) return b->rc;
    if (!name || !rt_name_ok(name))
        return fail(b, RT_EINVAL, "input needs an identifier shorter than %d for a name", RT_NAME_MAX);
    if (name_taken(b->inputs, b->nin, name)) return fail(b, RT_EINVAL, "input %s declared twice", name);
    int id = add_buf(b, RT_BUF_INPUT, RT_F16, rank, dims, name);
    if (id < 0) return id;
    if (!grow((void **)&b->inputs, &b->capin, b->nin + 1, sizeof(RtIoRec))) return fail(b, RT_ENOMEM, "out of memory");
    RtIoRec *r = &b->inputs[b->nin++];
    memset(r, 0, sizeof *r);
    r->buf = (uint32_t)id;
    r->io_dtype = RT_F16;
    snprintf(r->name, sizeof r->name, "%s", name);
    return id;
}

int rtb_state(RtPlanBuilder *b, const char *name, RtDType dt, int rank, const int64_t *dims) {
    if (b->rc) return b->rc;
    if (!name || !rt_name_ok(name))
        return fail(b, RT_EINVAL, "state needs an identifier shorter than %d for a name", RT_NAME_MAX);
    if (name_taken(b->states, b->nstate, name)) return fail(b, RT_EINVAL, "state %s declared twice", name);
    if (dt != RT_F16 && dt != RT_F32 && dt != RT_I32 && dt != RT_BOOL)
        return fail(b, RT_EINVAL, "state %s: bad dtype", name);
    int id = add_buf(b, RT_BUF_STATE, dt, rank, dims, name);
    if (id < 0) return id;
    if (!grow((void **)&b->states, &b->capstate, b->nstate + 1, sizeof(RtIoRec)))
        return fail(b, RT_ENOMEM, "out of memory");
    RtIoRec *r = &b->states[b->nstate++];
    memset(r, 0, sizeof *r);
    r->buf = (uint32_t)id;
    r->io_dtype = (uint32_t)dt;
    snprintf(r->name, sizeof r->name, "%s", name);
    return id;
}

int rtb_weight(RtPlanBuilder *b, const char *name, RtDType dt, int rank, const int64_t *dims, const void *data) {
    if (!data) return fail(b, RT_EINVAL, "weight %s: no data", name ? name : "");
    int id = add_buf(b, RT_BUF_WEIGHT, dt, rank, dims, name);
    if (id < 0) return id;
    size_t bytes = (size_t)b->rb[id].bytes;
    void *copy = malloc(bytes ? bytes : 1);
    if (!copy) return fail(b, RT_ENOMEM, "out of memory copying weight");
    memcpy(copy, data, bytes);
    b->bufs[id].data = copy;
    return id;
}

int rtb_weight_ref(RtPlanBuilder *b, const char *name, RtDType dt, int rank, const int64_t *dims, const void *data) {
    if (!data) return fail(b, RT_EINVAL, "weight %s: no data", name ? name : "");
    int id = add_buf(b, RT_BUF_WEIGHT, dt, rank, dims, name);
    if (id < 0) return id;
    b->bufs[id].data = (void *)data; /* only read: packing and widening write new memory */
    b->bufs[id].borrowed = true;
    return id;
}

void rtb_on_consumed(RtPlanBuilder *b, void (*fn)(void *ctx, const void *data, size_t n), void *ctx) {
    b->consumed = fn, b->consumed_ctx = ctx;
}

/* Borrowed bytes read for the last time: their owner may drop them. */
static void consumed(RtPlanBuilder *b, const BBuf *bb, const void *data, size_t n) {
    if (b->consumed && bb->borrowed && !bb->shared) b->consumed(b->consumed_ctx, data, n);
}

typedef struct {
    const uint8_t *p;
    uint64_t n;
    uint32_t buf;
} Span;

static int cmp_span(const void *x, const void *y) {
    const Span *a = x, *b = y;
    return a->p < b->p ? -1 : a->p > b->p;
}

/* Borrowed weights whose bytes overlap (one blob lowered twice: as a GEMM W
 * and as a plain operand) are shared: neither may report them consumed. */
static void mark_shared(RtPlanBuilder *b) {
    if (!b->consumed) return;
    Span *sp = malloc(sizeof *sp * (b->nbuf ? b->nbuf : 1));
    if (!sp) { /* then nothing is reported consumed: only memory is kept */
        b->consumed = NULL;
        return;
    }
    uint32_t n = 0;
    for (uint32_t i = 0; i < b->nbuf; i++)
        if (b->rb[i].kind == RT_BUF_WEIGHT && b->bufs[i].borrowed) sp[n++] = (Span){b->bufs[i].data, b->rb[i].bytes, i};
    qsort(sp, n, sizeof *sp, cmp_span);
    const uint8_t *end = NULL; /* the furthest end so far */
    uint32_t last = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (i && sp[i].p < end) b->bufs[sp[i].buf].shared = b->bufs[last].shared = true;
        if (!i || sp[i].p + sp[i].n > end) end = sp[i].p + sp[i].n, last = sp[i].buf;
    }
    free(sp);
}

int rtb_temp(RtPlanBuilder *b, RtDType dt, int rank, const int64_t *dims) {
    if (dt == RT_F16) return fail(b, RT_EINVAL, "temps are fp32, int32 or bool");
    return add_buf(b, RT_BUF_TEMP, dt, rank, dims, NULL);
}

int rtb_temp_rows(RtPlanBuilder *b, int rank, const int64_t *dims) {
    int id = add_buf(b, RT_BUF_TEMP, RT_I32, rank, dims, NULL);
    if (id < 0) return id;
    BBuf *bb = &b->bufs[id];
    bb->rec.flags |= RT_BUFF_ROWS;
    char msg[160];
    if (rt_buf_init(&b->rb[id], &bb->rec, msg, sizeof msg)) return fail(b, RT_EINVAL, "%s", msg);
    return id;
}

int rtb_program(RtPlanBuilder *b, RtProgram p) {
    if (b->rc) return b->rc;
    if (p != RT_PROG_BONDED && p != RT_PROG_NONBONDED) return fail(b, RT_EINVAL, "bad program %d", (int)p);
    if ((p == RT_PROG_BONDED && !rt_mode(b->mode)->bonded) || (p == RT_PROG_NONBONDED && !rt_mode(b->mode)->nonbonded))
        return fail(b, RT_EINVAL, "mode %d has no %s program", b->mode, p == RT_PROG_BONDED ? "bonded" : "non-bonded");
    b->cur = (int)p;
    return RT_OK;
}

/* An fp16 weight feeding anything but its op's f16_in (ops.c) becomes fp32
 * now: only those kernels read fp16 storage. */
static void widen_weight(RtPlanBuilder *b, int id) {
    BBuf *bb = &b->bufs[id];
    int64_t n = b->rb[id].numel;
    float *f = malloc((size_t)n * 4);
    if (!f) {
        fail(b, RT_ENOMEM, "out of memory");
        return;
    }
    half_to_float_n(bb->data, f, (size_t)n);
    if (!bb->borrowed) free(bb->data);
    bb->data = f;
    bb->borrowed = false;
    bb->rec.dtype = RT_F32;
    rt_buf_init(&b->rb[id], &bb->rec, NULL, 0);
}

int rtb_op(RtPlanBuilder *b, RtOpKind kind, const int *in, int nin, const int *out, int nout, const void *params,
           size_t plen) {
    if (b->rc) return b->rc;
    const RtOpInfo *oi = rt_op_info((uint32_t)kind);
    if (!oi) return fail(b, RT_EINVAL, "op kind %d unknown", (int)kind);
    if (nin < 0 || nin > RT_MAX_IN || nout < 0 || nout > RT_MAX_OUT || plen > RT_PARAMS_MAX || (plen && !params))
        return fail(b, RT_EINVAL, "%s: bad counts", oi->name);
    RtOpRec op;
    memset(&op, 0, sizeof op);
    op.kind = (uint32_t)kind;
    op.nin = (uint32_t)nin;
    op.nout = (uint32_t)nout;
    op.plen = (uint32_t)plen;
    for (int i = 0; i < nin; i++) op.in[i] = in[i];
    for (int i = 0; i < nout; i++) op.out[i] = out[i];
    if (plen) memcpy(op.p.bytes, params, plen);
    for (int i = 0; i < nin; i++) {
        /* fp16 weights stay fp16 only where a kernel reads them so (the op table's f16_in) */
        bool f16_read = (uint32_t)i + 1 == oi->f16_in;
        if (in[i] >= 0 && (uint32_t)in[i] < b->nbuf && b->rb[in[i]].dtype == RT_F16 &&
            b->rb[in[i]].kind == RT_BUF_WEIGHT && !f16_read)
            widen_weight(b, in[i]);
    }
    if (b->rc) return b->rc;
    char msg[200];
    int rc = rt_op_check(b->rb, b->nbuf, &op, false, msg, sizeof msg);
    if (rc) return fail(b, rc, "op %u (%s): %s", b->prog[b->cur].n, oi->name, msg);
    BProg *p = &b->prog[b->cur];
    if (!grow((void **)&p->ops, &p->cap, p->n + 1, sizeof(RtOpRec))) return fail(b, RT_ENOMEM, "out of memory");
    p->ops[p->n++] = op;
    return RT_OK;
}

int rtb_output(RtPlanBuilder *b, const char *name, int buf, RtDType io) {
    if (b->rc) return b->rc;
    if (!name || !rt_name_ok(name))
        return fail(b, RT_EINVAL, "output needs an identifier shorter than %d for a name", RT_NAME_MAX);
    if (buf < 0 || (uint32_t)buf >= b->nbuf) return fail(b, RT_EINVAL, "output %s: buffer %d out of range", name, buf);
    if (name_taken(b->outputs, b->nout, name)) return fail(b, RT_EINVAL, "output %s declared twice", name);
    uint32_t dt = b->rb[buf].dtype;
    bool ok = dt == RT_F32   ? (io == RT_F16 || io == RT_F32)
              : dt == RT_F16 ? io == RT_F16
              : dt == RT_I32 ? (io == RT_I32 || rt_dtype_narrow_int(io))
                             : (uint32_t)io == dt;
    if (!ok) return fail(b, RT_EINVAL, "output %s: cannot return a %u buffer as dtype %d", name, dt, (int)io);
    if (dt == RT_F16 || (b->rb[buf].flags & RT_BUFF_PANELS))
        return fail(b, RT_EINVAL, "output %s: fp16 weight storage", name);
    if (b->rb[buf].kind == RT_BUF_STATE)
        return fail(b, RT_EINVAL, "output %s: a state is returned through a copy", name);
    if (!grow((void **)&b->outputs, &b->capout, b->nout + 1, sizeof(RtIoRec)))
        return fail(b, RT_ENOMEM, "out of memory");
    RtIoRec *r = &b->outputs[b->nout++];
    memset(r, 0, sizeof *r);
    r->buf = (uint32_t)buf;
    r->io_dtype = (uint32_t)io;
    snprintf(r->name, sizeof r->name, "%s", name);
    return RT_OK;
}

/* ---- finish ---- */

/* Panels are a 64-wide transpose: walk K in blocks so the 64 source rows and
 * the destination block stay in L1 (one memcpy per element cost ~4x more). */
enum { PACK_KB = 64 };
void rt_pack_panels(const void *w, int64_t n, int64_t k, RtDType src, RtDType dst_dt, void *dst) {
    /* pack_weights asks only for F32 -> F32, F16 -> F16 or F16 -> F32 */
    int64_t panels = (n + RT_PANEL - 1) / RT_PANEL;
    for (int64_t p = 0; p < panels; p++) {
        int64_t rows = n - p * RT_PANEL < RT_PANEL ? n - p * RT_PANEL : RT_PANEL;
        for (int64_t k0 = 0; k0 < k; k0 += PACK_KB) {
            int64_t k1 = k0 + PACK_KB < k ? k0 + PACK_KB : k;
            if (dst_dt == RT_F32) {
                float *d = (float *)dst + p * k * RT_PANEL;
                for (int64_t j = 0; j < rows; j++) {
                    int64_t r = (p * RT_PANEL + j) * k;
                    if (src == RT_F32)
                        for (int64_t kk = k0; kk < k1; kk++) d[kk * RT_PANEL + j] = ((const float *)w)[r + kk];
                    else
                        for (int64_t kk = k0; kk < k1; kk++)
                            d[kk * RT_PANEL + j] = half_to_float(((const uint16_t *)w)[r + kk]);
                }
                for (int64_t j = rows; j < RT_PANEL; j++)
                    for (int64_t kk = k0; kk < k1; kk++) d[kk * RT_PANEL + j] = 0;
            } else {
                uint16_t *d = (uint16_t *)dst + p * k * RT_PANEL;
                for (int64_t j = 0; j < rows; j++) {
                    const uint16_t *r = (const uint16_t *)w + (p * RT_PANEL + j) * k;
                    for (int64_t kk = k0; kk < k1; kk++) d[kk * RT_PANEL + j] = r[kk];
                }
                for (int64_t j = rows; j < RT_PANEL; j++)
                    for (int64_t kk = k0; kk < k1; kk++) d[kk * RT_PANEL + j] = 0;
            }
        }
    }
}

/* Marks weight w as panels of dtype dt and queues the conversion (run by
 * run_packs, in parallel: packing is most of rtb_finish).  fp16 -> fp32
 * widening happens inside the pack, so the weight is read and written once. */
static void pack_in_place(RtPlanBuilder *b, int w, RtDType dt) {
    if (b->rc) return;
    if (!grow((void **)&b->packs, &b->cappack, b->npack + 1, sizeof(PackJob))) {
        fail(b, RT_ENOMEM, "out of memory packing weights");
        return;
    }
    BBuf *bb = &b->bufs[w];
    b->packs[b->npack++] =
        (PackJob){.w = w, .src = (RtDType)bb->rec.dtype, .n = b->rb[w].dims[0], .k = b->rb[w].dims[1]};
    bb->rec.dtype = (uint32_t)dt;
    bb->rec.flags |= RT_BUFF_PANELS;
    rt_buf_init(&b->rb[w], &bb->rec, NULL, 0);
}

typedef struct {
    RtPlanBuilder *b;
    _Atomic uint32_t next;
    atomic_int failed;
} PackRun;

static void *pack_thread(void *arg) {
    PackRun *r = arg;
    RtPlanBuilder *b = r->b;
    for (uint32_t i; (i = atomic_fetch_add(&r->next, 1)) < b->npack;) {
        PackJob *j = &b->packs[i];
        BBuf *bb = &b->bufs[j->w];
        void *packed = malloc((size_t)rt_buf_storage(&bb->rec));
        if (!packed) {
            atomic_store(&r->failed, 1);
            continue;
        }
        rt_pack_panels(bb->data, j->n, j->k, j->src, (RtDType)bb->rec.dtype, packed);
        consumed(b, bb, bb->data, (size_t)(j->n * j->k * (j->src == RT_F16 ? 2 : 4)));
        if (!bb->borrowed) free(bb->data);
        bb->data = packed;
        bb->borrowed = false;
    }
    return NULL;
}

/* Runs the queued packs on up to PACK_THREADS threads (the caller's included). */
enum { PACK_THREADS = 4 };
static void run_packs(RtPlanBuilder *b) {
    PackRun r = {.b = b};
    long ncpu = os_cpu_count();
    int nth = ncpu < 1 ? 1 : ncpu > PACK_THREADS ? PACK_THREADS : (int)ncpu;
    if ((uint32_t)nth > b->npack) nth = b->npack ? (int)b->npack : 1;
    pthread_t t[PACK_THREADS];
    int started = 0;
    for (int i = 1; i < nth; i++, started++)
        if (pthread_create(&t[started], NULL, pack_thread, &r) != 0) break;
    pack_thread(&r);
    for (int i = 0; i < started; i++) pthread_join(t[i], NULL);
    b->npack = 0;
    if (atomic_load(&r.failed)) fail(b, RT_ENOMEM, "out of memory packing weights");
}

/* A copy of weight w as a new buffer (same name, dtype, data). */
static int twin_weight(RtPlanBuilder *b, int w) {
    char name[RT_NAME_MAX];
    memcpy(name, b->bufs[w].name, sizeof name); /* rtb_weight may move b->bufs */
    int64_t dims[2] = {b->rb[w].dims[0], b->rb[w].dims[1]};
    /* a borrowed source is shared (both packs only read it); an owned one is
     * copied, since w's own pack frees it */
    bool borrowed = b->bufs[w].borrowed;
    int t = (borrowed ? rtb_weight_ref : rtb_weight)(b, name, (RtDType)b->rb[w].dtype, 2, dims, b->bufs[w].data);
    if (t >= 0 && borrowed) b->bufs[w].shared = b->bufs[t].shared = true;
    return t;
}

static void rewire(RtPlanBuilder *b, int w, int to) {
    for (int p = 0; p < 2; p++)
        for (uint32_t i = 0; i < b->prog[p].n; i++) {
            RtOpRec *op = &b->prog[p].ops[i];
            if (op->kind == RT_OP_GEMM && op->in[1] == w) op->in[1] = to;
        }
}

/* Every GEMM (and CONV_GEMM) weight becomes panels of its own dtype: an fp16 weight stays
 * fp16 (half the bytes to store, checksum, map and read; the kernel widens
 * each K-block once per block of rows, so prefill loses nothing), an fp32
 * one stays fp32.  A weight also read by other ops (which made it fp32)
 * keeps that plain form and its panels go to a twin. */
static void pack_weights(RtPlanBuilder *b) {
    int nb0 = (int)b->nbuf;
    for (int w = 0; w < nb0 && !b->rc; w++) {
        if (b->rb[w].kind != RT_BUF_WEIGHT) continue;
        bool gemm = false, other = false;
        for (int p = 0; p < 2; p++)
            for (uint32_t i = 0; i < b->prog[p].n; i++) {
                const RtOpRec *op = &b->prog[p].ops[i];
                for (uint32_t j = 0; j < op->nin; j++) {
                    if (op->in[j] != w) continue;
                    if ((op->kind == RT_OP_GEMM || op->kind == RT_OP_CONV_GEMM) && j == 1)
                        gemm = true;
                    else
                        other = true;
                }
            }
        if (!gemm) continue;
        if (other) {
            int t = twin_weight(b, w);
            if (t < 0) return;
            pack_in_place(b, t, RT_F32);
            rewire(b, w, t);
        } else {
            pack_in_place(b, w, (RtDType)b->rb[w].dtype);
        }
    }
}

typedef struct {
    uint32_t buf;
    int64_t first, last;
    uint64_t size, off;
} Live;

static int cmp_size_desc(const void *a, const void *b) {
    const Live *x = a, *y = b;
    if (x->size != y->size) return x->size < y->size ? 1 : -1;
    return x->buf < y->buf ? -1 : 1;
}
static int cmp_off(const void *a, const void *b) {
    const Live *const *x = a, *const *y = b;
    return (*x)->off < (*y)->off ? -1 : (*x)->off > (*y)->off;
}

/* The placed lifetimes, indexed by first use: a segment tree over first-use
 * time keeps the latest last use under each node, so the placed buffers
 * whose lifetime meets [f, l] are found in O((k + 1) log n) for k of them —
 * not by a scan of all placed so far, which made placement quadratic in the
 * op count.  Times run from -1 (inputs) to n (outputs); leaf = time + 1. */
typedef struct {
    uint32_t size;    /* leaves, a power of two */
    int64_t *maxlast; /* per node; INT64_MIN where nothing is placed */
    uint32_t *head;   /* per leaf: first Live placed there + 1, 0 none */
    uint32_t *next;   /* per Live: the next one in its leaf + 1 */
} LiveIndex;

static bool lix_init(LiveIndex *x, uint32_t nops, uint32_t nlive) {
    x->size = 1;
    while (x->size < (uint64_t)nops + 2) x->size *= 2;
    x->maxlast = malloc(sizeof(int64_t) * 2 * x->size);
    x->head = calloc(x->size, sizeof(uint32_t));
    x->next = malloc(sizeof(uint32_t) * (nlive ? nlive : 1));
    if (!x->maxlast || !x->head || !x->next) return false;
    for (uint32_t i = 0; i < 2 * x->size; i++) x->maxlast[i] = INT64_MIN;
    return true;
}

static void lix_free(LiveIndex *x) { free(x->maxlast), free(x->head), free(x->next); }

static void lix_add(LiveIndex *x, const Live *lv, uint32_t i) {
    uint32_t leaf = (uint32_t)(lv[i].first + 1);
    x->next[i] = x->head[leaf];
    x->head[leaf] = i + 1;
    for (uint32_t n = x->size + leaf; n; n >>= 1)
        if (x->maxlast[n] < lv[i].last) x->maxlast[n] = lv[i].last;
}

/* Appends to out every placed Live whose lifetime meets [f, l]. */
static void lix_find(const LiveIndex *x, const Live *lv, uint32_t node, uint32_t lo, uint32_t hi, int64_t f, int64_t l,
                     Live **out, uint32_t *n) {
    if ((int64_t)lo - 1 > l || x->maxlast[node] < f) return;
    if (node >= x->size) {
        for (uint32_t j = x->head[lo]; j; j = x->next[j - 1])
            if (lv[j - 1].last >= f) out[(*n)++] = (Live *)&lv[j - 1];
        return;
    }
    uint32_t mid = lo + (hi - lo) / 2;
    lix_find(x, lv, 2 * node, lo, mid, f, l, out, n);
    lix_find(x, lv, 2 * node + 1, mid + 1, hi, f, l, out, n);
}

/* Greedy best-known heuristic: biggest first, lowest gap that no
 * overlapping-lifetime buffer occupies. */
static int place_greedy(RtPlanBuilder *b, Live *lv, uint32_t nl, Live **placed, uint32_t nops, uint64_t *top) {
    LiveIndex x;
    if (!lix_init(&x, nops, nl)) {
        lix_free(&x);
        return fail(b, RT_ENOMEM, "out of memory");
    }
    qsort(lv, nl, sizeof *lv, cmp_size_desc);
    for (uint32_t i = 0; i < nl; i++) {
        uint32_t np = 0;
        lix_find(&x, lv, 1, 0, x.size - 1, lv[i].first, lv[i].last, placed, &np);
        qsort(placed, np, sizeof *placed, cmp_off);
        uint64_t off = 0;
        for (uint32_t j = 0; j < np; j++) {
            if (placed[j]->off >= off + lv[i].size) break;
            if (placed[j]->off + placed[j]->size > off) off = placed[j]->off + placed[j]->size;
        }
        lv[i].off = off;
        if (off + lv[i].size > *top) *top = off + lv[i].size;
        lix_add(&x, lv, i);
    }
    lix_free(&x);
    return RT_OK;
}

static uint64_t align_arena(uint64_t x) { return (x + RT_ARENA_ALIGN - 1) & ~(uint64_t)(RT_ARENA_ALIGN - 1); }

/* Plans one program's arena.  offsets[nbuf] gets UINT64_MAX for buffers the
 * program does not keep in the arena (weights, unused). */
static int plan_arena(RtPlanBuilder *b, int pi, uint64_t *offsets, uint64_t *arena) {
    BProg *p = &b->prog[pi];
    int64_t *first = malloc(sizeof(int64_t) * b->nbuf), *last = malloc(sizeof(int64_t) * b->nbuf);
    Live *lv = malloc(sizeof(Live) * (b->nbuf ? b->nbuf : 1));
    Live **placed = malloc(sizeof(Live *) * (b->nbuf ? b->nbuf : 1));
    if (!first || !last || !lv || !placed) {
        free(first), free(last), free(lv), free(placed);
        return fail(b, RT_ENOMEM, "out of memory");
    }
    for (uint32_t i = 0; i < b->nbuf; i++) first[i] = INT64_MAX, last[i] = -2;
    for (uint32_t i = 0; i < b->nin; i++) first[b->inputs[i].buf] = -1, last[b->inputs[i].buf] = -1;
    for (uint32_t i = 0; i < b->nstate; i++) first[b->states[i].buf] = -1, last[b->states[i].buf] = -1;
    for (uint32_t i = 0; i < p->n; i++) {
        const RtOpRec *op = &p->ops[i];
        for (uint32_t j = 0; j < op->nin + op->nout; j++) {
            int id = j < op->nin ? op->in[j] : op->out[j - op->nin];
            if (b->rb[id].kind == RT_BUF_WEIGHT) continue;
            if (first[id] > (int64_t)i) first[id] = i;
            if (last[id] < (int64_t)i) last[id] = i;
            if (j < op->nin && b->rb[id].kind == RT_BUF_TEMP && first[id] == (int64_t)i)
                return free(first), free(last), free(lv), free(placed),
                       fail(b, RT_EINVAL, "%s program: op %u (%s) reads buffer %d before any op writes it",
                            pi ? "non-bonded" : "bonded", i, rt_op_name((RtOpKind)op->kind), id);
        }
    }
    for (uint32_t i = 0; i < b->nout; i++) {
        uint32_t id = b->outputs[i].buf;
        if (b->rb[id].kind == RT_BUF_WEIGHT) continue;
        if (last[id] == -2)
            return free(first), free(last), free(lv), free(placed),
                   fail(b, RT_EINVAL, "%s program never writes output %s", pi ? "non-bonded" : "bonded",
                        b->outputs[i].name);
        last[id] = p->n;
    }
    uint32_t *jump = malloc(sizeof(uint32_t) * (p->n ? p->n : 1));
    char msg[200];
    int nloops = jump ? rt_loops(p->ops, p->n, jump, msg, sizeof msg) : RT_ENOMEM;
    if (nloops > 0) rt_loops_extend(p->ops, p->n, jump, b->nbuf, first, last);
    bool had_jump = jump != NULL;
    free(jump);
    if (nloops < 0)
        return free(first), free(last), free(lv), free(placed),
               fail(b, nloops, "%s program: %s", pi ? "non-bonded" : "bonded", had_jump ? msg : "out of memory");
    uint32_t nl = 0;
    for (uint32_t i = 0; i < b->nbuf; i++) {
        offsets[i] = UINT64_MAX;
        if (last[i] != -2 && !rt_buf_external(&b->rb[i]))
            lv[nl++] = (Live){.buf = i, .first = first[i], .last = last[i], .size = align_arena(b->rb[i].bytes)};
    }
    uint64_t top = 0;
    if (pi == RT_PROG_NONBONDED) {
        /* Every intermediate materialised in its own place, as a naive runtime would. */
        for (uint32_t i = 0; i < nl; i++) lv[i].off = top, top += lv[i].size;
    } else if (place_greedy(b, lv, nl, placed, p->n, &top) != RT_OK) {
        free(first), free(last), free(lv), free(placed);
        return b->rc;
    }
    for (uint32_t i = 0; i < nl; i++) offsets[lv[i].buf] = lv[i].off;
    *arena = top;
    free(first), free(last), free(lv), free(placed);
    return RT_OK;
}

int rtb_finish(RtPlanBuilder *b, const char *source_mil, size_t mlen, RtArtifact **out, char *err, size_t errlen) {
    *out = NULL;
    if (!b->rc && b->nout == 0) fail(b, RT_EINVAL, "plan has no outputs");
    if (!b->rc) mark_shared(b);
    if (!b->rc) pack_weights(b);
    if (!b->rc) run_packs(b);
    int progs[2] = {rt_mode(b->mode)->bonded, rt_mode(b->mode)->nonbonded};
    uint64_t *offs[2] = {NULL, NULL}, arena[2] = {0, 0};
    for (int p = 0; p < 2 && !b->rc; p++) {
        if (!progs[p]) {
            if (b->prog[p].n) fail(b, RT_EINVAL, "ops recorded for a program mode %d does not have", b->mode);
            continue;
        }
        offs[p] = malloc(sizeof(uint64_t) * (b->nbuf ? b->nbuf : 1));
        if (!offs[p])
            fail(b, RT_ENOMEM, "out of memory");
        else
            plan_arena(b, p, offs[p], &arena[p]);
    }
    if (b->rc) {
        free(offs[0]), free(offs[1]);
        return rt_errf(err, errlen, b->rc, "%s", b->err);
    }
    uint32_t nweights = 0;
    for (uint32_t i = 0; i < b->nbuf; i++) nweights += b->rb[i].kind == RT_BUF_WEIGHT;
    int n = 1 + 1 + progs[0] + progs[1] + 1 + (int)nweights;
    RtSection *secs = calloc((size_t)n, sizeof *secs);
    int k = 1, rc = RT_OK;
    if (!secs) goto nomem;

    /* META: head, buffer records, input records, output records, state records. */
    size_t msize = sizeof(RtMetaHead) + b->nbuf * sizeof(RtBufRec) + (b->nin + b->nout + b->nstate) * sizeof(RtIoRec);
    unsigned char *meta = calloc(1, msize);
    if (!meta) goto nomem;
    RtMetaHead mh = {b->nbuf, b->nin, b->nout, b->nstate};
    memcpy(meta, &mh, sizeof mh);
    size_t o = sizeof mh;
    for (uint32_t i = 0; i < b->nbuf; i++, o += sizeof(RtBufRec)) memcpy(meta + o, &b->bufs[i].rec, sizeof(RtBufRec));
    if (b->nin) memcpy(meta + o, b->inputs, b->nin * sizeof(RtIoRec)); /* a program may take no input */
    o += b->nin * sizeof(RtIoRec);
    memcpy(meta + o, b->outputs, b->nout * sizeof(RtIoRec));
    o += b->nout * sizeof(RtIoRec);
    if (b->nstate) memcpy(meta + o, b->states, b->nstate * sizeof(RtIoRec));
    secs[k++] = (RtSection){.kind = RT_SEC_META, .id = 0, .data = meta, .size = msize};

    for (int p = 0; p < 2; p++) {
        if (!progs[p]) continue;
        size_t psize = sizeof(RtPlanHead) + b->nbuf * sizeof(uint64_t) + b->prog[p].n * sizeof(RtOpRec);
        unsigned char *plan = calloc(1, psize);
        if (!plan) goto nomem;
        RtPlanHead ph = {(uint32_t)p, b->prog[p].n, arena[p]};
        memcpy(plan, &ph, sizeof ph);
        memcpy(plan + sizeof ph, offs[p], b->nbuf * sizeof(uint64_t));
        if (b->prog[p].n)
            memcpy(plan + sizeof ph + b->nbuf * sizeof(uint64_t), b->prog[p].ops, b->prog[p].n * sizeof(RtOpRec));
        secs[k++] = (RtSection){.kind = RT_SEC_PLAN, .id = (uint32_t)p, .data = plan, .size = psize};
    }
    void *src = malloc(mlen ? mlen : 1);
    if (!src) goto nomem;
    if (mlen) memcpy(src, source_mil, mlen);
    secs[k++] = (RtSection){.kind = RT_SEC_SOURCE, .id = 0, .data = src, .size = mlen};
    for (uint32_t i = 0; i < b->nbuf; i++) {
        if (b->rb[i].kind != RT_BUF_WEIGHT) continue;
        if (b->bufs[i].borrowed) { /* the artifact owns its sections */
            void *copy = malloc(b->rb[i].bytes ? (size_t)b->rb[i].bytes : 1);
            if (!copy) goto nomem;
            memcpy(copy, b->bufs[i].data, (size_t)b->rb[i].bytes);
            consumed(b, &b->bufs[i], b->bufs[i].data, (size_t)b->rb[i].bytes);
            b->bufs[i].data = copy;
            b->bufs[i].borrowed = false;
        }
        secs[k++] =
            (RtSection){.kind = RT_SEC_WEIGHT, .id = i, .data = b->bufs[i].data, .size = (size_t)b->rb[i].bytes};
        b->bufs[i].data = NULL; /* now the artifact's */
    }
    free(offs[0]), free(offs[1]);
    return rt_artifact_assemble(out, secs, n, b->mode, err, errlen);

nomem:
    rc = rt_errf(err, errlen, RT_ENOMEM, "out of memory serialising the plan");
    if (secs)
        for (int i = 1; i < k; i++) free((void *)secs[i].data);
    free(secs);
    free(offs[0]), free(offs[1]);
    return rc;
}
