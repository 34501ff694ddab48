/* exec.c — the persistent thread pool (spin, then futex sleep) and rt_run.
 * A dispatch wakes the pool and runs a range of ops, each cut into parts the
 * threads claim, one op complete before the next starts.  Bonded programs are
 * one dispatch; non-bonded ones pay the whole dispatch path once per op. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "milc/half.h"
#include "milc/ossys.h"
#include "rt_internal.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#else
#define cpu_relax() ((void)0)
#endif

/* How long an idle worker spins before sleeping: long enough that the next
 * dispatch of a decode loop or a non-bonded program finds it awake. */
enum { SPIN_NS = 200000 };
/* Pause iterations a thread spins waiting for an op's parts or a dispatch's end
 * before it sleeps on a futex (os_wait: ~50 µs).  Sleeping rather than yielding matters
 * when the machine is oversubscribed: the thread being waited for gets the
 * core at once instead of after the yielding one's time slice. */
enum { SPIN_WAIT = 1 << 11 };

struct RtPool {
    int nth;
    pthread_t *threads;
    _Atomic uint32_t gen;    /* futex word: bumped once per dispatch */
    _Atomic uint32_t open;   /* the gen workers may still join; 0 once the work is done */
    _Atomic uint32_t inside; /* futex word: workers inside the current dispatch */
    atomic_int sleepers, stop, inside_waiting;
    RtPoolFn fn;
    void *arg;
    /* the models' run-time memory (rt_pool_memory) */
    unsigned char *arena, *scratch;
    size_t arena_size, arena_mapped, scratch_size, scratch_mapped;
    uint32_t mem_gen;
};

/* n zeroed bytes for activations (and kernels' scratch).  A large arena is
 * its own mapping on 2 MB boundaries with transparent huge pages asked for
 * and every page faulted in now (os_huge_alloc): a fresh process otherwise
 * takes a fault per 4 KB page of it inside its first run (30 MB of GPT-2
 * prefill activations: 7.5k faults, ~8 ms of a 70 ms time to first token)
 * and TLB misses in every run.  *mapped gets the mapping's length (0: from
 * malloc). */
enum { HUGE = 2 << 20 };
static void *mem_alloc(size_t n, size_t *mapped) {
    *mapped = 0;
    if (n < HUGE) {
        void *p = aligned_alloc(RT_ARENA_ALIGN, n ? n : RT_ARENA_ALIGN);
        if (p) memset(p, 0, n);
        return p;
    }
    return os_huge_alloc(n, mapped);
}

static void mem_free(void *p, size_t mapped) {
    if (mapped)
        os_huge_free(p, mapped);
    else
        free(p);
}

int rt_pool_memory(RtPool *p, size_t arena, size_t scratch) {
    if (arena <= p->arena_size && scratch <= p->scratch_size && p->arena && p->scratch) return RT_OK;
    size_t an = arena > p->arena_size ? arena : p->arena_size,
           sn = scratch > p->scratch_size ? scratch : p->scratch_size;
    size_t am, sm;
    unsigned char *a = mem_alloc(an, &am), *s = mem_alloc(sn, &sm);
    if (!a || !s) {
        if (a) mem_free(a, am);
        if (s) mem_free(s, sm);
        return RT_ENOMEM;
    }
    /* No model of the pool is running (the pool's rule), and each rebinds
     * to the new generation before its next run. */
    if (p->arena) mem_free(p->arena, p->arena_mapped);
    if (p->scratch) mem_free(p->scratch, p->scratch_mapped);
    p->arena = a, p->arena_size = an, p->arena_mapped = am;
    p->scratch = s, p->scratch_size = sn, p->scratch_mapped = sm;
    p->mem_gen++;
    return RT_OK;
}

void rt_pool_memory_get(const RtPool *p, unsigned char **arena, unsigned char **scratch, uint32_t *gen) {
    *arena = p->arena, *scratch = p->scratch, *gen = p->mem_gen;
}

uint32_t rt_pool_memory_gen(const RtPool *p) { return p->mem_gen; }

static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

typedef struct {
    RtPool *pool;
    int ith;
} WorkerArg;

/* A worker joins a dispatch only while it is open: one that wakes late (it
 * was descheduled; the machine is busy) finds the work done and the dispatch
 * closed, and never holds the caller up. */
static void *worker_main(void *arg) {
    RtPool *p = ((WorkerArg *)arg)->pool;
    int ith = ((WorkerArg *)arg)->ith;
    free(arg);
    uint32_t seen = 0;
    for (;;) {
        uint32_t g = atomic_load_explicit(&p->gen, memory_order_acquire);
        if (g == seen) {
            uint64_t t0 = now_ns();
            for (int i = 0; (g = atomic_load_explicit(&p->gen, memory_order_acquire)) == seen; i++) {
                cpu_relax();
                if ((i & 255) == 255 && now_ns() - t0 > SPIN_NS) {
                    atomic_fetch_add(&p->sleepers, 1);
                    os_wait(&p->gen, seen); /* returns at once if gen moved on */
                    atomic_fetch_sub(&p->sleepers, 1);
                    t0 = now_ns();
                }
            }
        }
        seen = g;
        if (atomic_load(&p->stop)) break;
        atomic_fetch_add(&p->inside, 1); /* seq_cst: pairs with the caller closing */
        if (atomic_load(&p->open) == g) p->fn(p->arg, ith, p->nth);
        if (atomic_fetch_sub(&p->inside, 1) == 1 && atomic_load(&p->inside_waiting)) os_wake_all(&p->inside);
    }
    return NULL;
}

int rt_pool_new(RtPool **out, int nth) {
    *out = NULL;
    if (nth <= 0) nth = os_cpu_count();
    if (nth < 1) nth = 1;
    if (nth > 256) nth = 256;
    RtPool *p = calloc(1, sizeof *p);
    if (!p) return RT_ENOMEM;
    p->nth = nth;
    p->threads = calloc((size_t)nth, sizeof(pthread_t));
    if (!p->threads) {
        free(p);
        return RT_ENOMEM;
    }
    for (int i = 1; i < nth; i++) {
        WorkerArg *a = malloc(sizeof *a);
        if (!a || pthread_create(&p->threads[i], NULL, worker_main, (a->pool = p, a->ith = i, a)) != 0) {
            free(a);
            p->nth = i; /* stop the ones already running */
            rt_pool_free(p);
            return RT_ESYS;
        }
    }
    *out = p;
    return RT_OK;
}

void rt_pool_free(RtPool *p) {
    if (!p) return;
    atomic_store(&p->stop, 1);
    atomic_fetch_add(&p->gen, 1);
    os_wake_all(&p->gen);
    for (int i = 1; i < p->nth; i++) pthread_join(p->threads[i], NULL);
    if (p->arena) mem_free(p->arena, p->arena_mapped);
    if (p->scratch) mem_free(p->scratch, p->scratch_mapped);
    free(p->threads);
    free(p);
}

int rt_pool_threads(const RtPool *p) { return p->nth; }

/* fn must return on the caller only when the dispatch's work is all done
 * (run_job does: it waits for every op's last part); workers that joined are
 * then waited for, late ones are shut out. */
void rt_pool_run(RtPool *p, RtPoolFn fn, void *arg) {
    if (p->nth == 1) {
        fn(arg, 0, 1);
        return;
    }
    p->fn = fn;
    p->arg = arg;
    uint32_t g = atomic_load(&p->gen) + 1;
    if (g == 0) g = 1; /* 0 means closed */
    atomic_store(&p->open, g);
    atomic_store(&p->gen, g); /* seq_cst: pairs with the sleepers count */
    if (atomic_load(&p->sleepers)) os_wake_all(&p->gen);
    fn(arg, 0, p->nth);
    atomic_store(&p->open, 0);
    uint32_t n;
    for (int i = 0; (n = atomic_load(&p->inside)) != 0; i++) {
        if (i < SPIN_WAIT) {
            cpu_relax();
            continue;
        }
        atomic_store(&p->inside_waiting, 1);
        if ((n = atomic_load(&p->inside)) != 0) os_wait(&p->inside, n);
        atomic_store(&p->inside_waiting, 0);
    }
}

/* ---- rt_run ---- */

/* Elements an op touches, below which splitting it costs more (a hand-over
 * between threads, or waking the pool) than it saves: ~16K elements is a few µs. */
enum { SERIAL_WORK = 1 << 14 };

bool rt_op_serial(const RtBuf *bufs, const RtOpRec *op) {
    int64_t work = 0;
    if (op->kind == RT_OP_COPY) { /* a part of a shared output: count the walk */
        int64_t n = 1;
        for (int i = 0; i < op->p.copy.rank; i++) n *= op->p.copy.dims[i];
        return 2 * n < SERIAL_WORK;
    }
    if (op->kind == RT_OP_UPDATE) return 2 * bufs[op->in[0]].numel < SERIAL_WORK; /* a box of a (big) state */
    if (op->kind == RT_OP_NON_ZERO) return true; /* its rows follow from every element before them */
    for (uint32_t i = 0; i < op->nin; i++) work += bufs[op->in[i]].numel;
    for (uint32_t i = 0; i < op->nout; i++) work += bufs[op->out[i]].numel;
    return work < SERIAL_WORK;
}

/* The equal units of work the GEMM and attention kernels deal out to parts
 * (rt_op_parts keeps them even). */
int64_t rt_op_units(const RtBuf *bufs, const RtOpRec *op, int nth) {
    if (op->kind == RT_OP_GEMM) { /* the blocks the kernel's split deals out */
        const RtBuf *wb = &bufs[op->in[1]];
        bool cols;
        return rt_split_blocks(rt_gemm_rows(&bufs[op->in[0]], wb->dims[1], op->p.gemm.layout), wb->dims[0], nth, &cols);
    }
    if (op->kind == RT_OP_CONV_GEMM) { /* the same split over output positions x output channels */
        const RtBuf *yb = &bufs[op->out[0]];
        bool cols;
        return rt_split_blocks(yb->numel / yb->dims[1], yb->dims[1], nth, &cols);
    }
    if (op->kind == RT_OP_ATTENTION) { /* (batch, head, query rows) units */
        const RtBuf *qb = &bufs[op->in[0]];
        int64_t bh = qb->dims[0] * qb->dims[1], l = qb->dims[2];
        return op->p.attn.flags ? bh * l : bh * ((l + RT_ATT_LB - 1) / RT_ATT_LB);
    }
    return 0;
}

/* Parts: 1 for a serial op (or one thread); else RT_PARTS_PER_THREAD per
 * thread, unless the op's work comes in few equal units that so many parts
 * would deal out unevenly.  12 heads or 64-column blocks in 8 parts are
 * parts of 1 and 2, and the thread left holding a 2 keeps the other waiting;
 * then the most parts up to that, a multiple of nth, that divide the units
 * (GPT-2 on 2 threads: prefill 3-8% and decode 0-3% faster, paired runs). */
uint32_t rt_op_parts(const RtBuf *bufs, const RtOpRec *op, int nth) {
    if (nth <= 1 || rt_op_serial(bufs, op)) return 1;
    int max = nth * RT_PARTS_PER_THREAD;
    int64_t units = rt_op_units(bufs, op, nth);
    if (units > 0 && units < 4 * (int64_t)max)
        for (int p = max - max % nth; p >= nth; p -= nth)
            if (units % p == 0) return (uint32_t)p;
    return (uint32_t)max;
}

typedef struct {
    RtModel *m;
    const RtOpRec *ops;
    const uint32_t *parts, *ahead;
    RtOpSync *sync;
    uint32_t begin, end;
} Job;

/* Waits until all `parts` parts of an op are done: spin, then sleep. */
static void wait_parts(RtOpSync *s, uint32_t parts) {
    uint32_t d;
    for (int i = 0; (d = atomic_load_explicit(&s->done, memory_order_acquire)) < parts; i++) {
        if (i < SPIN_WAIT) {
            cpu_relax();
            continue;
        }
        atomic_fetch_add(&s->waiters, 1);
        if ((d = atomic_load(&s->done)) < parts) os_wait(&s->done, d);
        atomic_fetch_sub(&s->waiters, 1);
    }
}

/* Regions on nth threads, and the first part of region r of nr. */
static int regions(int nth) { return nth < RT_REGIONS ? nth : RT_REGIONS; }
static uint32_t region_first(uint32_t parts, int r, int nr) {
    return (uint32_t)((uint64_t)parts * (uint64_t)r / (uint64_t)nr);
}

/* Claims part *k of an op: the next of the thread's own region while it
 * lasts, then whatever is left in the others'.  A thread's parts are then
 * one run of the op's work (a GEMV's weight bytes in one stream, where
 * taking parts from one shared counter interleaved the threads: decode 4%
 * slower), and a thread the OS deschedules still holds up only the part it
 * holds: the others take the rest of its region. */
bool rt_part_claim(RtOpSync *s, uint32_t parts, int ith, int nth, uint32_t *k) {
    int nr = regions(nth);
    for (int i = 0; i < nr; i++) {
        int r = (ith + i) % nr;
        uint32_t lo = region_first(parts, r, nr), n = region_first(parts, r + 1, nr) - lo;
        if (atomic_load_explicit(&s->next[r], memory_order_relaxed) >= n) continue;
        uint32_t c = atomic_fetch_add_explicit(&s->next[r], 1, memory_order_relaxed);
        if (c < n) {
            *k = lo + c;
            return true;
        }
    }
    return false;
}

/* Every op is cut into parts (rt_op_parts, decided at load) that threads
 * claim (rt_part_claim), and no thread starts an op before the previous one is
 * complete. */
static void run_job(void *arg, int ith, int nth) {
    Job *j = arg;
    for (uint32_t i = j->begin; i < j->end; i++) {
        const RtOpRec *op = &j->ops[i];
        RtOpSync *s = &j->sync[i];
        uint32_t parts = j->parts[i];
        RtKernelFn kernel = j->m->kern->kernel[op->kind];
        for (uint32_t k; rt_part_claim(s, parts, ith, nth, &k);) {
            kernel(&j->m->ex, op, (int)k, (int)parts);
            atomic_fetch_add(&s->done, 1); /* seq_cst: pairs with waiters */
            if (atomic_load(&s->waiters)) os_wake_all(&s->done);
        }
        /* Out of parts: start the stream of this thread's first part of the
         * next parallel op (its region's first) while the others finish. */
        uint32_t x = j->ahead[i];
        RtKernelFn pre = x < j->end ? j->m->kern->prefetch[j->ops[x].kind] : NULL;
        if (pre)
            pre(&j->m->ex, &j->ops[x], (int)region_first(j->parts[x], ith % regions(nth), regions(nth)),
                (int)j->parts[x]);
        wait_parts(s, parts);
    }
}

/* One dispatch: bind the program's buffers, validate the sub-program's
 * operands are bound, run it on the pool (or, when every op is serial, on the
 * caller alone: waking workers for a tiny op costs more than the op), return. */
static int dispatch(RtModel *m, int prog, uint32_t begin, uint32_t end) {
    RtProg *pr = &m->prog[prog];
    m->ex.ptr = m->ptr[prog];
    bool all_serial = true;
    for (uint32_t i = begin; i < end; i++) {
        const RtOpRec *op = &pr->ops[i];
        for (uint32_t k = 0; k < op->nin; k++)
            if (!m->ex.ptr[op->in[k]]) return RT_EINVAL;
        for (uint32_t k = 0; k < op->nout; k++)
            if (!m->ex.ptr[op->out[k]]) return RT_EINVAL;
        all_serial &= pr->parts[i] == 1;
        for (int r = 0; r < RT_REGIONS; r++) atomic_store_explicit(&pr->sync[i].next[r], 0, memory_order_relaxed);
        atomic_store_explicit(&pr->sync[i].done, 0, memory_order_relaxed);
    }
    int nth = rt_pool_threads(m->pool);
    Job j = {m, pr->ops, pr->parts, pr->ahead, pr->sync, begin, end};
    if (all_serial || nth == 1)
        run_job(&j, 0, 1);
    else
        rt_pool_run(m->pool, run_job, &j); /* its seq_cst publication orders the resets above */
    return RT_OK;
}

/* A program with loops: the runs of ops between control ops are dispatched
 * (one dispatch per op when non-bonded), and the control ops are done here,
 * on the caller's thread, once every op before them is complete. */
static int run_loops(RtModel *m, int prog, uint64_t *dispatches) {
    RtProg *pr = &m->prog[prog];
    uint32_t i = 0;
    while (i < pr->nops) {
        uint32_t e = i;
        while (e < pr->nops && !rt_op_control(pr->ops[e].kind)) e++;
        for (uint32_t b = i; b < e;) {
            uint32_t end = prog == RT_PROG_BONDED ? e : b + 1;
            int rc = dispatch(m, prog, b, end);
            if (rc) return rc;
            ++*dispatches, b = end;
        }
        if (e == pr->nops) break;
        const RtOpRec *op = &pr->ops[e];
        if (op->kind == RT_OP_LOOP_BEGIN) {
            pr->iters[pr->jump[e]] = 0;
            i = e + 1;
        } else if (op->kind == RT_OP_LOOP_TEST) {
            if (!*(const uint8_t *)m->ptr[prog][op->in[0]])
                i = pr->jump[e];
            else if (++pr->iters[e] > RT_LOOP_MAX_ITERS)
                return RT_ELOOP;
            else
                i = e + 1;
        } else {
            i = pr->jump[e];
        }
    }
    return RT_OK;
}

/* An output with its rows counted at run time is bound at its bound (the
 * dims rt_model_output gives); rt_run then sets dims[0] to the rows written. */
static int bind_check(const RtModel *m, const RtIoRec *r, const RtTensor *t) {
    const RtBuf *b = &m->bufs[r->buf];
    if (!t->data || (uint32_t)t->dtype != r->io_dtype || t->rank != (int)b->rank) return RT_EBIND;
    for (uint32_t i = 0; i < b->rank; i++)
        if (t->dims[i] != b->dims[i]) return RT_EBIND;
    if (t->size < (size_t)b->numel * rt_dtype_size(t->dtype)) return RT_EBIND;
    return RT_OK;
}

/* A narrow integer boundary tensor to its I32 buffer, and back (wrapping). */
static void widen_int(const void *src, RtDType t, int32_t *dst, int64_t n) {
#define WIDEN(T)                                                                                                       \
    for (int64_t i = 0; i < n; i++) dst[i] = ((const T *)src)[i];                                                     \
    break
    switch (t) {
    case RT_U8: WIDEN(uint8_t);
    case RT_I8: WIDEN(int8_t);
    case RT_I16: WIDEN(int16_t);
    default: WIDEN(uint16_t);
    }
#undef WIDEN
}

static void narrow_int(const int32_t *src, void *dst, RtDType t, int64_t n) {
    if (rt_dtype_size(t) == 1)
        for (int64_t i = 0; i < n; i++) ((uint8_t *)dst)[i] = (uint8_t)src[i];
    else
        for (int64_t i = 0; i < n; i++) ((uint16_t *)dst)[i] = (uint16_t)src[i];
}

int rt_run(RtModel *m, const RtTensor *in, int nin, RtTensor *out, int nout, int flags, RtRunStats *stats) {
    uint64_t t0 = now_ns();
    if (!m->pool) return RT_EINVAL; /* loaded with RT_LOAD_DESCRIBE */
    if (nin != (int)m->ninputs || nout != (int)m->noutputs || (nin && !in) || !out) return RT_EBIND;
    int prog = m->has_prog[0] ? 0 : 1;
    if (flags & RT_RUN_NONBONDED) {
        if (!m->has_prog[1]) return RT_EINVAL;
        prog = 1;
    }
    for (int i = 0; i < nin; i++)
        if (bind_check(m, &m->inputs[i], &in[i])) return RT_EBIND;
    for (int i = 0; i < nout; i++)
        if (bind_check(m, &m->outputs[i], &out[i])) return RT_EBIND;
    if (m->mem_gen != rt_pool_memory_gen(m->pool)) rt_model_bind_memory(m); /* a shared pool's arena grew */
    void **ptr = m->ptr[prog];
    for (int i = 0; i < nin; i++) {
        const RtBuf *b = &m->bufs[m->inputs[i].buf];
        if (b->dtype == RT_F16) { /* read in place by the kernels; unbound again below */
            ptr[m->inputs[i].buf] = in[i].data;
            continue;
        }
        void *dst = ptr[m->inputs[i].buf];
        if (in[i].dtype == RT_F16)
            m->kern->h2f(in[i].data, dst, (size_t)b->numel);
        else if (rt_dtype_narrow_int(in[i].dtype))
            widen_int(in[i].data, in[i].dtype, dst, b->numel);
        else
            memcpy(dst, in[i].data, (size_t)b->numel * rt_dtype_size((RtDType)b->dtype));
    }
    atomic_store(&m->ex.index_error, 0);
    m->last_prog = prog;
    RtProg *pr = &m->prog[prog];
    uint64_t dispatches = 0;
    int rc = RT_OK;
    if (pr->jump) {
        rc = run_loops(m, prog, &dispatches);
    } else if (prog == RT_PROG_BONDED) {
        if (pr->nops) rc = dispatch(m, prog, 0, pr->nops), dispatches = 1;
    } else {
        for (uint32_t i = 0; i < pr->nops && !rc; i++, dispatches++) rc = dispatch(m, prog, i, i + 1);
    }
    for (int i = 0; i < nin; i++) /* the caller's memory is only ours during the run */
        if (m->bufs[m->inputs[i].buf].dtype == RT_F16) ptr[m->inputs[i].buf] = NULL;
    if (rc) return rc;
    for (int i = 0; i < nout; i++) {
        const RtBuf *b = &m->bufs[m->outputs[i].buf];
        const void *src = ptr[m->outputs[i].buf];
        int64_t n = b->numel;
        if (b->flags & RT_BUFF_ROWS) { /* its rows as the run counted them */
            out[i].dims[0] = m->ex.rows[m->outputs[i].buf];
            n = out[i].dims[0] * (b->numel / b->dims[0]);
        }
        if (out[i].dtype == RT_F16)
            m->kern->f2h(src, out[i].data, (size_t)n);
        else if (rt_dtype_narrow_int(out[i].dtype))
            narrow_int(src, out[i].data, out[i].dtype, n);
        else
            memcpy(out[i].data, src, (size_t)n * rt_dtype_size((RtDType)b->dtype));
    }
    if (stats) {
        stats->dispatches = dispatches;
        stats->ops = pr->nops;
        stats->seconds = (double)(now_ns() - t0) * 1e-9;
    }
    return atomic_load(&m->ex.index_error) ? RT_EINDEX : RT_OK;
}
