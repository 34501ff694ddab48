/* rt_internal.h — private to the runtime: the on-disk records of ARTIFACT.md,
 * the op table (one row per op: name, params, checker, scratch, kernel), the
 * loaded model, and the helpers shared by builder, loader and kernels. */
#ifndef MILC_RT_INTERNAL_H
#define MILC_RT_INTERNAL_H

#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "milc/plan.h"
#include "milc/rt.h"

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the artifact format is little-endian and read in place; port the readers first"

#endif

/* ---- on-disk records (little-endian, read by memcpy, never by pointer cast) ---- */
#define RT_MAGIC "MILCART\0"
enum { RT_HEADER_SIZE = 64, RT_ENTRY_SIZE = 32, RT_FILE_ALIGN = 64, RT_ARENA_ALIGN = 64 };

typedef struct {
    char magic[8];
    uint32_t format_version, backend, mode, nsections;
    uint64_t checksum; /* XXH3-64 of the manifest with this field zero */
    char milc_version[32];
} RtHeader;
_Static_assert(sizeof(RtHeader) == RT_HEADER_SIZE, "header layout");

typedef struct {
    uint32_t kind, id;
    uint64_t offset, size, checksum;
} RtEntry;
_Static_assert(sizeof(RtEntry) == RT_ENTRY_SIZE, "entry layout");

enum { RT_BUF_INPUT = 1, RT_BUF_WEIGHT = 2, RT_BUF_TEMP = 3, RT_BUF_STATE = 4 };
enum {
    RT_BUFF_PANELS = 1, /* GEMM weight [N, K] as 64-column panels [N/64][K][64] */
    /* a temp whose dims[0] bounds its rows: the one op writing it
     * (RT_OP_NON_ZERO) says how many it wrote; only an output reads it */
    RT_BUFF_ROWS = 2,
};
/* A panel is one kernel tile wide, so the weight bytes a thread reads for its
 * columns lie in one run and a GEMV streams them as one sequence.  32-column
 * panels made two streams, 48 KB apart, restarting every tile: against them
 * GPT-2's decode GEMV chain is 4-5% faster (5-9% in minutes of fast memory)
 * and a whole decode token 1.5-3.5%, prefill unchanged (paired runs). */
enum { RT_PANEL = 64 };

typedef struct {
    uint32_t kind, dtype, rank, flags;
    int64_t dims[RT_MAX_RANK];
} RtBufRec;
_Static_assert(sizeof(RtBufRec) == 64, "buffer record layout");

typedef struct {
    uint32_t buf, io_dtype;
    char name[RT_NAME_MAX];
} RtIoRec;
_Static_assert(sizeof(RtIoRec) == 72, "io record layout");

typedef struct {
    uint32_t nbuf, ninputs, noutputs, nstates; /* nstates: 0 before states existed */
} RtMetaHead;

enum { RT_PARAMS_MAX = 216 };
typedef struct {
    uint32_t kind, nin, nout, plen;
    int32_t in[RT_MAX_IN], out[RT_MAX_OUT];
    union {
        unsigned char bytes[RT_PARAMS_MAX];
        RtGemmParams gemm;
        RtMatmulParams matmul;
        RtAttnParams attn;
        RtNormParams norm;
        RtAxisParams axis;
        RtBinaryParams bin;
        RtUnaryParams un;
        RtReduceParams red;
        RtCopyParams copy;
        RtBandParams band;
        RtCastParams cast;
        RtEltParams elt;
        RtConvParams conv;
        RtLutParams lut;
        RtScanParams scan;
        RtScatterParams scatter;
        RtSortParams sort;
        RtRandomParams rnd;
        RtUpdateParams upd;
        RtSampleParams smp;
        RtQGemmParams qg;
        RtSpGemmParams sp;
        RtCropParams crop;
        RtNmsParams nms;
    } p;
} RtOpRec;
_Static_assert(sizeof(RtCopyParams) == RT_PARAMS_MAX, "copy params fill the record");
_Static_assert(sizeof(RtOpRec) == 272, "op record layout");

typedef struct {
    uint32_t program, nops;
    uint64_t arena_size;
    /* then uint64 offset[nbuf] (UINT64_MAX: not in this program's arena), then RtOpRec[nops] */
} RtPlanHead;

/* ---- shared helpers ---- */

/* A buffer as every checker and kernel sees it. */
typedef struct {
    uint32_t kind, dtype, rank, flags;
    int64_t dims[RT_MAX_RANK];
    int64_t numel;
    uint64_t bytes; /* storage bytes (packed weights are padded) */
} RtBuf;

/* Buffers not in a program's arena: weights (section bytes), fp16 inputs
 * (the caller's tensor, bound at rt_run and read in place) and states (the
 * model's own memory, kept across runs). */
static inline bool rt_buf_external(const RtBuf *b) {
    return b->kind == RT_BUF_WEIGHT || b->kind == RT_BUF_STATE || (b->kind == RT_BUF_INPUT && b->dtype == RT_F16);
}
/* Buffers that hold a value before the first op runs. */
static inline bool rt_buf_preset(const RtBuf *b) { return b->kind == RT_BUF_INPUT || b->kind == RT_BUF_STATE; }

/* Fills derived fields; RT_EFORMAT with a message for bad dtype/rank/dims. */
int rt_buf_init(RtBuf *b, const RtBufRec *r, char *err, size_t errlen);
/* Storage bytes of a buffer given its record, or 0 if invalid. */
uint64_t rt_buf_storage(const RtBufRec *r);

int rt_errf(char *err, size_t errlen, int code, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* ---- op table ---- */
typedef struct RtExec RtExec;
typedef int (*RtCheckFn)(const RtBuf *bufs, const RtOpRec *op, char *err, size_t errlen);
typedef size_t (*RtScratchFn)(const RtBuf *bufs, const RtOpRec *op); /* bytes per thread */
typedef void (*RtKernelFn)(RtExec *ex, const RtOpRec *op, int ith, int nth);

typedef struct {
    const char *name;
    uint32_t plen; /* exact parameter bytes */
    int min_in, max_in, min_out, max_out;
    RtCheckFn check;
    RtScratchFn scratch; /* NULL: none */
    /* Bumped when the op's operands change layout within one artifact version
     * (conv_gemm's W went from row-major to panels): it feeds the op-table
     * fingerprint in every key, so an entry holding the old layout misses and
     * is rebuilt instead of failing to load. */
    uint32_t rev;
    /* 1 + the input whose fp16 weight the kernel reads as it is (a GEMM's W,
     * a sparse GEMM's values); 0: none.  The builder widens any other. */
    uint32_t f16_in;
} RtOpInfo;

/* One kernel variant (kernels_variant.c, compiled once per instruction set
 * with its own flags): every op's kernel, and for some ops a prefetch that
 * asks for the first bytes part ith of nth will stream (called by a thread
 * done with the op before, so the stream is under way when the part starts). */
typedef struct {
    RtCpu cpu;
    RtKernelFn kernel[RT_OP_COUNT_];
    RtKernelFn prefetch[RT_OP_COUNT_]; /* NULL: none */
    /* rt_run's fp16 <-> fp32 conversion of graph inputs and outputs in this
     * variant's instructions: exec.c is built without F16C, and its portable
     * loop was 18% of a 64-channel 56x56 fp16 convolution (perf). */
    void (*h2f)(const uint16_t *src, float *dst, size_t n);
    void (*f2h)(const float *src, uint16_t *dst, size_t n);
} RtKernels;
/* The kernels of variant v, or RT_ECPU with a message naming what this CPU
 * or build lacks (cpu.c).  RT_CPU_AUTO: the best this CPU runs. */
int rt_cpu_kernels(RtCpu v, const RtKernels **out, char *err, size_t errlen);

/* The GEMM's cache blocking from this CPU's caches (cpu.c: set once, when
 * the first model loads; the defaults before that suit a 32 KB L1): kc rows
 * of a 64-column fp32 sub-panel fill about 2/3 of L1, mb rows of A per
 * K-block sit in a quarter of L2.  l1d and l2 are the sizes found (0:
 * unknown).  The kernels' stack blocks are sized for the maxima. */
enum { RT_KC_MAX = 256, RT_MB_MAX = 240 };
typedef struct {
    int64_t kc, mb;
    size_t l1d, l2;
} RtBlocking;
extern RtBlocking rt_block;

/* A software prefetch of a streamed operand, into L2 rather than L1: an
 * Intel core holds one of its ~16 L1 fill buffers per L1 prefetch until the
 * line arrives, so streams asked into L1 had that few lines in flight; L2's
 * queue tracks about three times as many (measured: kernels_gemm.c). */
#define RT_PF_L2(p) __builtin_prefetch((p), 0, 2)

/* The slice of the next K-block's nlen bytes that tile t of a row block's
 * ntile tiles asks for ahead (kblock): its first byte *off (a 64-byte line
 * boundary) and its line count.  The slices of t = 0..ntile-1 cover every
 * line of the block, each boundary line at most twice. */
static inline int rt_ahead_slice(size_t nlen, size_t t, size_t ntile, size_t *off) {
    size_t q0 = t * nlen / ntile & ~(size_t)63, q1 = (t + 1) * nlen / ntile;
    *off = q0;
    return q1 > q0 ? (int)((q1 - q0 + 63) / 64) : 0;
}

/* Panels of a GEMM whose K-blocks run together when A crowds L2 (A is then
 * read once per group, not per panel; their partial sums: rt_s_gemm). */
enum { RT_GEMM_GROUP = 4 };

/* The scratch per part that gemm, matmul and attention need (ops.c). */
size_t rt_s_gemm(const RtBuf *bufs, const RtOpRec *op);
size_t rt_s_matmul(const RtBuf *bufs, const RtOpRec *op);
size_t rt_s_attention(const RtBuf *bufs, const RtOpRec *op);

/* Work split shared by the kernels and rt_op_units: tiles of RT_TILE_M rows
 * × RT_PANEL columns, attention's query rows in blocks of RT_ATT_LB (a
 * multiple of the tile height). */
enum { RT_TILE_M = 6, RT_ATT_LB = 48 };
_Static_assert((int)RT_TILE_M == (int)RT_PACK_TILE, "a packed x's tiles are the GEMM's");
/* An M×N product splits over threads by 64-column blocks when there are
 * enough of them, else by 6-row blocks: how many, and which (*cols). */
static inline int64_t rt_split_blocks(int64_t m, int64_t n, int nth, bool *cols) {
    int64_t nb = (n + RT_PANEL - 1) / RT_PANEL, mb = (m + RT_TILE_M - 1) / RT_TILE_M;
    *cols = nb >= nth || nb >= mb;
    return *cols ? nb : mb;
}
/* A GEMM's rows: every row of x, or in the channels layout the positions
 * of one batch entry (the batch loops around them). */
static inline int64_t rt_gemm_rows(const RtBuf *xb, int64_t k, int layout) {
    if (layout == RT_GEMM_PACKED) return xb->dims[1] * RT_TILE_M; /* up to RT_TILE_M - 1 past S */
    return layout == RT_GEMM_ROWS ? xb->numel / k : xb->numel / (xb->dims[0] * k);
}

/* Shape rules shared by ops.c and ops_more.c: a and b have the same dims;
 * out is exactly the broadcast shape of ins. */
bool rt_same_dims(const RtBuf *a, const RtBuf *b);
bool rt_bcast_result(const RtBuf *const *ins, int n, const RtBuf *out);
/* The checkers of the ops in ops_more.c (elementwise math, comparisons,
 * reductions, convolution and pooling). */
int rt_check_eltwise(const RtBuf *bufs, const RtOpRec *op, char *err, size_t errlen);
int rt_check_binop(const RtBuf *bufs, const RtOpRec *op, char *err, size_t errlen);
int rt_check_reducex(const RtBuf *bufs, const RtOpRec *op, char *err, size_t errlen);
int rt_check_pad_nhwc(const RtBuf *bufs, const RtOpRec *op, char *err, size_t errlen);
int rt_check_conv_gemm(const RtBuf *bufs, const RtOpRec *op, char *err, size_t errlen);
int rt_check_lut_gemm(const RtBuf *bufs, const RtOpRec *op, char *err, size_t errlen);
size_t rt_s_lut_gemm(const RtBuf *bufs, const RtOpRec *op);
int rt_check_qgemm(const RtBuf *bufs, const RtOpRec *op, char *err, size_t errlen);
int rt_check_spgemm(const RtBuf *bufs, const RtOpRec *op, char *err, size_t errlen);
size_t rt_s_qgemm(const RtBuf *bufs, const RtOpRec *op);
int rt_check_cumsum(const RtBuf *bufs, const RtOpRec *op, char *err, size_t errlen);
int rt_check_gather_axis(const RtBuf *bufs, const RtOpRec *op, char *err, size_t errlen);
int rt_check_sample(const RtBuf *bufs, const RtOpRec *op, char *err, size_t errlen);
int rt_check_crop_resize(const RtBuf *bufs, const RtOpRec *op, char *err, size_t errlen);
int rt_check_nms(const RtBuf *bufs, const RtOpRec *op, char *err, size_t errlen);
int rt_check_non_zero(const RtBuf *bufs, const RtOpRec *op, char *err, size_t errlen);
size_t rt_s_nms(const RtBuf *bufs, const RtOpRec *op);
int rt_check_gather_nd(const RtBuf *bufs, const RtOpRec *op, char *err, size_t errlen);
int rt_check_scatter(const RtBuf *bufs, const RtOpRec *op, char *err, size_t errlen);
int rt_check_sort(const RtBuf *bufs, const RtOpRec *op, char *err, size_t errlen);
size_t rt_s_sort(const RtBuf *bufs, const RtOpRec *op);
int rt_check_random(const RtBuf *bufs, const RtOpRec *op, char *err, size_t errlen);
size_t rt_s_random(const RtBuf *bufs, const RtOpRec *op);
/* Loops of a program: checks their structure (nesting, one TEST each) and
 * fills jump[nops]: BEGIN -> its TEST, TEST -> past its END, END -> past its
 * BEGIN (other ops: 0).  Returns the loop count or a negative RT_E* code. */
int rt_loops(const RtOpRec *ops, uint32_t nops, uint32_t *jump, char *err, size_t errlen);
/* Extends last[] so that a buffer live into a loop stays live to its END. */
void rt_loops_extend(const RtOpRec *ops, uint32_t nops, const uint32_t *jump, uint32_t nbuf, const int64_t *first,
                     int64_t *last);
static inline bool rt_op_control(uint32_t kind) {
    return kind == RT_OP_LOOP_BEGIN || kind == RT_OP_LOOP_TEST || kind == RT_OP_LOOP_END;
}
int rt_check_conv(const RtBuf *bufs, const RtOpRec *op, char *err, size_t errlen);
int rt_check_pool(const RtBuf *bufs, const RtOpRec *op, char *err, size_t errlen);
int rt_check_update(const RtBuf *bufs, const RtOpRec *op, char *err, size_t errlen);
/* UPDATE's box in y for begin/end (NULL: none): false when it leaves y or
 * its extent is not x's (state.c; the kernel runs it at every run). */
bool rt_update_box(const RtBuf *x, const RtBuf *y, const RtUpdateParams *p, const int32_t *begin, const int32_t *end,
                   int64_t *start);

/* NULL for an out-of-range kind. */
const RtOpInfo *rt_op_info(uint32_t kind);
/* Full check of one op against the buffer table: counts, indices, writable
 * outputs, param size, then the op's own shape rules.  loading: also the
 * storage rules of packed weights (the builder packs them only at finish). */
int rt_op_check(const RtBuf *bufs, uint32_t nbuf, const RtOpRec *op, bool loading, char *err, size_t errlen);

/* ---- the executor ---- */

struct RtExec {
    void **ptr; /* per buffer: its bytes for the current program */
    const RtBuf *bufs;
    unsigned char *scratch; /* nth × scratch_per_thread */
    size_t scratch_per_thread;
    atomic_int index_error; /* a gather met an out-of-range index */
    int64_t *rows;          /* per buffer: the rows an RT_BUFF_ROWS temp holds after its op */
};

/* Parts a parallel op is cut into per thread (threads claim parts, so a
 * descheduled thread delays only its part).  Kernels are called with
 * (part, parts) as (ith, nth); per-part scratch is sized for that many. */
enum { RT_PARTS_PER_THREAD = 4 };
/* An op's parts are dealt into up to RT_REGIONS runs of consecutive parts,
 * one per thread (threads past that share). */
enum { RT_REGIONS = 14 };
/* Per op of a program: the parts done (a futex word), sleepers on it, and
 * the parts claimed so far from each region.  One cache line each. */
typedef struct {
    _Atomic uint32_t done;
    atomic_int waiters;
    _Atomic uint32_t next[RT_REGIONS];
} RtOpSync;
_Static_assert(sizeof(RtOpSync) == 64, "one cache line per op");

typedef struct {
    uint32_t nops;
    uint64_t arena_size;
    uint64_t *offset; /* [nbuf] */
    RtOpRec *ops;     /* copied at load so kernels read aligned structs */
    uint32_t *parts;  /* [nops]: parts the op is cut into (rt_op_parts), decided at load */
    uint32_t *ahead;  /* [nops]: the next op cut into more than one part (nops: none);
                       * in parts' allocation, after it */
    RtOpSync *sync;   /* [nops], 64-aligned */
    uint32_t *jump;   /* [nops]: rt_loops' targets; NULL when the program has no loop */
    uint32_t *iters;  /* [nops]: a LOOP_TEST's iterations in the current execution of its loop */
} RtProg;

struct RtModel {
    int mode, nthreads;
    uint32_t nbuf, ninputs, noutputs, nstates;
    RtBuf *bufs;
    RtIoRec *inputs, *outputs, *states;
    unsigned char *state_mem; /* every state's bytes (each at a 64-byte offset); the model's for its life */
    uint64_t *state_off;      /* [nstates]: offset of each in state_mem */
    const void **weight;      /* [nbuf]: section bytes of weights, else NULL */
    RtProg prog[2];
    int has_prog[2];
    unsigned char *arena; /* the pool's arena (the max of both programs, or more) */
    uint32_t mem_gen;     /* the pool memory's generation arena and ptr were bound to */
    uint64_t arena_size;
    void **ptr[2]; /* [prog][nbuf] resolved pointers */
    int last_prog;
    RtExec ex;
    RtPool *pool;
    const RtKernels *kern; /* the kernel variant chosen at load */
    bool own_pool;         /* started by this model (else borrowed: RtLoadOptions.pool);
                                 the arena and scratch are the pool's either way */
};

/* Thread pool: nth - 1 workers plus the caller.  rt_pool_run runs
 * fn(arg, ith, nth) on the caller and on every worker that wakes while the
 * dispatch is open; fn on the caller must return only when the work is done. */
typedef void (*RtPoolFn)(void *arg, int ith, int nth);
/* A pool's run-time memory: one arena and one scratch, each as big as the
 * largest need of its models (which run one at a time).  rt_pool_memory
 * grows them (a new generation: models bound to the old one rebind before
 * they run). */
int rt_pool_memory(RtPool *p, size_t arena, size_t scratch);
void rt_pool_memory_get(const RtPool *p, unsigned char **arena, unsigned char **scratch, uint32_t *gen);
uint32_t rt_pool_memory_gen(const RtPool *p);
void rt_model_bind_memory(RtModel *m);
void rt_pool_run(RtPool *p, RtPoolFn fn, void *arg);
int rt_pool_threads(const RtPool *p);

/* Is op too small to split across threads?  Such an op runs on the calling
 * thread alone: no barrier around runs of them in a bonded program, no pool
 * wake-up when it is a non-bonded dispatch of its own. */
bool rt_op_serial(const RtBuf *bufs, const RtOpRec *op);
/* Parts an op is cut into on nth threads (exec.c), and the equal units of
 * work a GEMM or attention deals out to them (kernels_gemm.c; 0: any). */
uint32_t rt_op_parts(const RtBuf *bufs, const RtOpRec *op, int nth);
int64_t rt_op_units(const RtBuf *bufs, const RtOpRec *op, int nth);
/* Thread ith of nth claims a part of an op cut into `parts`: false when none
 * is left (exec.c says in what order). */
bool rt_part_claim(RtOpSync *s, uint32_t parts, int ith, int nth, uint32_t *k);

/* Packs W [N, K] row-major (dtype src) into ceil(N/64) panels of [K][64] of
 * dtype dst (F32 -> F32, F16 -> F16, or F16 -> F32 widening), zero padded. */
void rt_pack_panels(const void *w, int64_t n, int64_t k, RtDType src, RtDType dst, void *dst_data);

/* Serialisation of a built plan (format.c). */
struct RtArtifact {
    RtSection *secs; /* [n]; secs[0] = manifest; every data pointer owned here */
    int n;
};
/* Builds an artifact from owned section payloads (kinds/ids/data/size in
 * secs[1..n), manifest slot empty); takes ownership of every data pointer. */
int rt_artifact_assemble(RtArtifact **out, RtSection *secs, int n, int mode, char *err, size_t errlen);

/* Checks a manifest and returns its header and a malloc'd copy of its table. */
int rt_manifest_read(const RtSection *ms, RtHeader *h, RtEntry **entries, char *err, size_t errlen);

#endif
