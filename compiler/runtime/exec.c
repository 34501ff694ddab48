/* exec.c — the persistent thread pool (spin, then futex sleep) and rt_run.
 * A dispatch wakes the pool, runs a range of ops with a barrier between ops,
 * and returns when every thread is done.  Bonded programs are one dispatch;
 * non-bonded ones pay the whole dispatch path once per op, on purpose. */
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "milc/half.h"
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

struct RtPool {
    int nth;
    pthread_t *threads;
    _Atomic uint32_t gen; /* futex word: bumped once per dispatch */
    atomic_int sleepers, stop, done;
    _Atomic uint32_t bar_count, bar_gen;
    RtPoolFn fn;
    void *arg;
};

static void futex_wait(_Atomic uint32_t *addr, uint32_t val) {
    syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}
static void futex_wake(_Atomic uint32_t *addr) {
    syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL, NULL, 0);
}

static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

typedef struct {
    RtPool *pool;
    int ith;
} WorkerArg;

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
                    futex_wait(&p->gen, seen); /* returns at once if gen moved on */
                    atomic_fetch_sub(&p->sleepers, 1);
                    t0 = now_ns();
                }
            }
        }
        seen = g;
        if (atomic_load(&p->stop)) break;
        p->fn(p->arg, ith, p->nth);
        atomic_fetch_add_explicit(&p->done, 1, memory_order_release);
    }
    return NULL;
}

int rt_pool_new(RtPool **out, int nth) {
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
    futex_wake(&p->gen);
    for (int i = 1; i < p->nth; i++) pthread_join(p->threads[i], NULL);
    free(p->threads);
    free(p);
}

void rt_pool_run(RtPool *p, RtPoolFn fn, void *arg) {
    if (p->nth == 1) {
        fn(arg, 0, 1);
        return;
    }
    p->fn = fn;
    p->arg = arg;
    atomic_store_explicit(&p->done, 0, memory_order_relaxed);
    atomic_fetch_add(&p->gen, 1); /* seq_cst: pairs with the sleepers count */
    if (atomic_load(&p->sleepers)) futex_wake(&p->gen);
    fn(arg, 0, p->nth);
    for (int i = 0; atomic_load_explicit(&p->done, memory_order_acquire) < p->nth - 1; i++) {
        cpu_relax();
        if (i > (1 << 11)) sched_yield(); /* a worker was descheduled: give it our core */
    }
}

void rt_pool_barrier(RtPool *p) {
    if (p->nth == 1) return;
    uint32_t g = atomic_load_explicit(&p->bar_gen, memory_order_acquire);
    if (atomic_fetch_add_explicit(&p->bar_count, 1, memory_order_acq_rel) == (uint32_t)p->nth - 1) {
        atomic_store_explicit(&p->bar_count, 0, memory_order_relaxed);
        atomic_fetch_add_explicit(&p->bar_gen, 1, memory_order_release);
        return;
    }
    for (int i = 0; atomic_load_explicit(&p->bar_gen, memory_order_acquire) == g; i++) {
        cpu_relax();
        if (i > (1 << 11)) sched_yield();
    }
}

/* ---- rt_run ---- */

typedef struct {
    RtModel *m;
    const RtOpRec *ops;
    uint32_t begin, end;
} Job;

static void run_job(void *arg, int ith, int nth) {
    Job *j = arg;
    for (uint32_t i = j->begin; i < j->end; i++) {
        const RtOpRec *op = &j->ops[i];
        rt_op_info(op->kind)->kernel(&j->m->ex, op, ith, nth);
        if (i + 1 < j->end) rt_pool_barrier(j->m->pool);
    }
}

/* One dispatch: bind the program's buffers, validate the sub-program's
 * operands are bound, run it on the pool, return. */
static int dispatch(RtModel *m, int prog, uint32_t begin, uint32_t end) {
    RtProg *pr = &m->prog[prog];
    m->ex.ptr = m->ptr[prog];
    for (uint32_t i = begin; i < end; i++) {
        const RtOpRec *op = &pr->ops[i];
        for (uint32_t k = 0; k < op->nin; k++)
            if (!m->ex.ptr[op->in[k]]) return RT_EINVAL;
        for (uint32_t k = 0; k < op->nout; k++)
            if (!m->ex.ptr[op->out[k]]) return RT_EINVAL;
    }
    Job j = {m, pr->ops, begin, end};
    rt_pool_run(m->pool, run_job, &j);
    return RT_OK;
}

static int bind_check(const RtModel *m, const RtIoRec *r, const RtTensor *t) {
    const RtBuf *b = &m->bufs[r->buf];
    if (!t->data || (uint32_t)t->dtype != r->io_dtype || t->rank != (int)b->rank) return RT_EBIND;
    for (uint32_t i = 0; i < b->rank; i++)
        if (t->dims[i] != b->dims[i]) return RT_EBIND;
    if (t->size < (size_t)b->numel * rt_dtype_size(t->dtype)) return RT_EBIND;
    return RT_OK;
}

int rt_run(RtModel *m, const RtTensor *in, int nin, RtTensor *out, int nout, int flags, RtRunStats *stats) {
    uint64_t t0 = now_ns();
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
    void **ptr = m->ptr[prog];
    for (int i = 0; i < nin; i++) {
        const RtBuf *b = &m->bufs[m->inputs[i].buf];
        void *dst = ptr[m->inputs[i].buf];
        if (in[i].dtype == RT_F16) half_to_float_n(in[i].data, dst, (size_t)b->numel);
        else memcpy(dst, in[i].data, (size_t)b->numel * rt_dtype_size((RtDType)b->dtype));
    }
    atomic_store(&m->ex.index_error, 0);
    m->last_prog = prog;
    RtProg *pr = &m->prog[prog];
    uint64_t dispatches = 0;
    int rc = RT_OK;
    if (prog == RT_PROG_BONDED) {
        if (pr->nops) rc = dispatch(m, prog, 0, pr->nops), dispatches = 1;
    } else {
        for (uint32_t i = 0; i < pr->nops && !rc; i++, dispatches++) rc = dispatch(m, prog, i, i + 1);
    }
    if (rc) return rc;
    for (int i = 0; i < nout; i++) {
        const RtBuf *b = &m->bufs[m->outputs[i].buf];
        const void *src = ptr[m->outputs[i].buf];
        if (out[i].dtype == RT_F16) float_to_half_n(src, out[i].data, (size_t)b->numel);
        else memcpy(out[i].data, src, (size_t)b->numel * rt_dtype_size((RtDType)b->dtype));
    }
    if (stats) {
        stats->dispatches = dispatches;
        stats->ops = pr->nops;
        stats->seconds = (double)(now_ns() - t0) * 1e-9;
    }
    return atomic_load(&m->ex.index_error) ? RT_EINDEX : RT_OK;
}
