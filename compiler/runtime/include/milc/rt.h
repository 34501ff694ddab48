/* rt.h — CPU runtime: artifact bytes (file form and cache form), loading an
 * untrusted artifact, and running it.  The format is described in
 * compiler/runtime/ARTIFACT.md.  Errors are negative RT_E* codes (milc/plan.h)
 * with a message written to the caller's buffer; nothing here prints or exits. */
#ifndef MILC_RT_H
#define MILC_RT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "milc/plan.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RT_FORMAT_VERSION 3
#define RT_BACKEND_CPU    1

/* Section kinds (the section table of ARTIFACT.md). */
typedef enum {
    RT_SEC_MANIFEST = 0, /* header + section table: always section 0 of the cache form */
    RT_SEC_META = 1,     /* buffer table, input/output names, shapes, dtypes */
    RT_SEC_PLAN = 2,     /* one program; id = RtProgram */
    RT_SEC_SOURCE = 3,   /* canonical MIL text, opaque */
    RT_SEC_WEIGHT = 4,   /* one weight tensor; id = its buffer index */
} RtSectionKind;

/* One section as bytes.  data is borrowed: its owner is whoever produced the
 * array (the artifact, the file mapping, an LMDB read transaction). */
typedef struct {
    uint32_t kind, id; /* informative; the loader trusts only the manifest */
    const void *data;
    size_t size;
} RtSection;

/* ---- built artifacts (from rtb_finish) ---- */

/* The artifact's sections: (*secs)[0] is the manifest, then the table's
 * sections in order.  The array and its bytes belong to the artifact and live
 * until rt_artifact_free.  Store each as its own value and hand the same
 * list, in the same order, to rt_model_load. */
int rt_artifact_sections(const RtArtifact *a, const RtSection **secs, int *n);
/* Total bytes of the file form. */
size_t rt_artifact_file_size(const RtArtifact *a);
/* Writes the file form (64-byte aligned sections) to path atomically
 * (path.tmp.PID then rename).  RT_EIO on failure. */
int rt_artifact_write_file(const RtArtifact *a, const char *path, char *err, size_t errlen);
/* Serialises the file form into buf (cap >= rt_artifact_file_size). */
int rt_artifact_write_mem(const RtArtifact *a, void *buf, size_t cap, char *err, size_t errlen);
void rt_artifact_free(RtArtifact *a);

/* Cuts an untrusted file-form artifact into its sections without copying:
 * secs[0..*n) point into bytes (valid while bytes is).  Checks the header,
 * table, bounds, alignment and overlaps, not checksums.  max is secs' capacity;
 * RT_EFORMAT if the artifact has more. */
int rt_artifact_split(const void *bytes, size_t len, RtSection *secs, int max, int *n, char *err, size_t errlen);

/* Header facts of a manifest (section 0), checked like rt_model_load does. */
typedef struct {
    uint32_t format_version, backend, mode, nsections;
    char milc_version[32];
} RtArtifactInfo;
int rt_artifact_info(const RtSection *manifest, RtArtifactInfo *info, char *err, size_t errlen);
/* Verifies every section's XXH3-64 checksum and the header checksum. */
int rt_artifact_verify(const RtSection *secs, int n, char *err, size_t errlen);

/* ---- loading and running ---- */
typedef struct RtModel RtModel;

/* A thread pool: nthreads - 1 workers plus the thread that calls rt_run.
 * Models that run one after another (the chunks of one forward pass) should
 * share one: each model's own pool keeps its workers spinning ~200 µs after
 * its run, on the cores the next chunk's threads need, and models on one
 * pool also share one arena and one kernel scratch, as big as the largest
 * model's (allocated and touched when a model that needs more loads).  So
 * models sharing a pool must not run at the same time, and a model's
 * intermediates (rt_model_buffer) last only until another model of the pool
 * runs.  nthreads <= 0: the online CPUs.  RT_OK, RT_ENOMEM or RT_ESYS. */
typedef struct RtPool RtPool;
int rt_pool_new(RtPool **out, int nthreads);
void rt_pool_free(RtPool *p); /* after every model that uses it */

/* Kernel variants: one build carries every variant of its architecture
 * (x86-64: avx512, avx2, scalar; aarch64: neon, scalar) and picks one per
 * model at load.  The scalar variant is a correctness reference. */
typedef enum {
    RT_CPU_AUTO = 0, /* the best variant this CPU runs */
    RT_CPU_SCALAR,   /* plain C, any CPU */
    RT_CPU_AVX2,     /* AVX2 + FMA + F16C, 256-bit */
    RT_CPU_AVX512,   /* AVX-512 F/BW/DQ/VL + F16C, 512-bit */
    RT_CPU_NEON,     /* AArch64 Advanced SIMD with fp16 conversions */
    RT_CPU_COUNT_
} RtCpu;
/* "scalar", "avx2", "avx512", "neon" ("auto" for RT_CPU_AUTO). */
const char *rt_cpu_name(RtCpu v);

/* A fingerprint of the op table (each kind's number, name, parameter size and
 * arity).  Cache keys carry it: two builds of the same version whose op kinds
 * were numbered differently (branches that each appended a kind) must never
 * serve each other's artifacts, which the artifact format number alone
 * (bumped by hand) does not guarantee. */
uint64_t rt_op_table_digest(void);
/* The variant called name; RT_EINVAL (message names the known ones) otherwise. */
int rt_cpu_parse(const char *name, RtCpu *out, char *err, size_t errlen);
/* The best variant this CPU and build run. */
RtCpu rt_cpu_best(void);
/* RT_OK if this build has variant v and this CPU runs it; else RT_ECPU and
 * a message saying what is missing and which variants would run. */
int rt_cpu_check(RtCpu v, char *err, size_t errlen);

enum {
    RT_LOAD_VERIFY = 1,   /* verify checksums (the cache may do it on its own schedule) */
    RT_LOAD_DESCRIBE = 2, /* validate all, allocate nothing to run: the model
                             describes its inputs and outputs (to check a
                             caller's before a big arena is faulted in) but
                             rt_run refuses it (RT_EINVAL) */
};
typedef struct {
    int nthreads;       /* worker threads including the caller's; <= 0: online CPUs (ignored with pool) */
    int flags;          /* RT_LOAD_* */
    uint64_t max_arena; /* refuse plans whose arena, or arena and scratch,
                           exceed it (RT_ENOMEM, before allocating); 0: no limit */
    RtPool *pool;       /* run on this pool (borrowed); NULL: the model starts its own */
    RtCpu cpu;          /* kernel variant; RT_CPU_AUTO: the best this CPU runs (RT_ECPU if it lacks cpu) */
} RtLoadOptions;

/* Loads an artifact given as sections (secs[0] = manifest).  Everything is
 * validated before use; all run-time memory (arena, per-thread scratch,
 * thread pool) is allocated here.  Errors: RT_EFORMAT, RT_EVERSION,
 * RT_ECHECKSUM (with RT_LOAD_VERIFY), RT_ENOMEM, RT_ESYS, RT_ECPU; err says what.  Weights are NOT copied: the section bytes must
 * stay valid and unchanged until rt_model_free (e.g. keep the LMDB read
 * transaction or the file mapping open), and must be 16-byte aligned.
 * opts may be NULL.  On success *out is owned by the caller. */
int rt_model_load(RtModel **out, const RtSection *secs, int n, const RtLoadOptions *opts, char *err, size_t errlen);
void rt_model_free(RtModel *m);

/* A dense tensor handed to rt_run; data is the caller's. */
typedef struct {
    RtDType dtype;
    int rank;
    int64_t dims[RT_MAX_RANK];
    void *data;
    size_t size; /* bytes available at data */
} RtTensor;

/* Input or output `i` of the model: name (valid until rt_model_free), the
 * dtype the caller passes or receives, and the shape.  RT_EINVAL if out of range. */
typedef struct {
    const char *name;
    RtDType dtype;
    int rank;
    int64_t dims[RT_MAX_RANK];
    /* an output whose rows are known only at run time (non_zero of run-time
     * data): dims[0] is their upper bound, the caller binds a tensor of
     * these dims, and rt_run sets its dims[0] to the rows it wrote */
    int bounded;
} RtIoInfo;
int rt_model_ninputs(const RtModel *m);
int rt_model_noutputs(const RtModel *m);
int rt_model_input(const RtModel *m, int i, RtIoInfo *info);
int rt_model_output(const RtModel *m, int i, RtIoInfo *info);
int rt_model_mode(const RtModel *m);
/* Index of the input (output != 0: output) called name, or RT_EINVAL. */
int rt_model_find(const RtModel *m, const char *name, int output);

/* True when name may name an input or output: a MIL identifier
 * ([A-Za-z_][A-Za-z0-9_]*) shorter than RT_NAME_MAX.  Callers make file
 * names of them (`milc run -o DIR` writes DIR/NAME.npy), so a '/', "..", a
 * control character or an empty name must never get this far: the builder
 * and the loader refuse such artifacts. */
bool rt_name_ok(const char *name);
/* name for a message: printable ASCII as is, other bytes (and '"', '\\') as
 * \xHH, cut to fit cap (> 0). */
void rt_name_show(const char *name, char *out, size_t cap);

/* States (rtb_state): buffers the loaded model keeps from run to run, as
 * Core ML keeps an MLState: zero at load, changed only by the model's
 * writes and by rt_model_state_set.  A state's dtype is its own (F16, F32,
 * I32 or BOOL): set and get copy it as it is.  RT_EINVAL for an index out
 * of range or a model loaded with RT_LOAD_DESCRIBE (set/get), RT_EBIND for
 * a tensor of another dtype or shape, or too small. */
int rt_model_nstates(const RtModel *m);
int rt_model_state(const RtModel *m, int i, RtIoInfo *info);
/* Index of the state called name, or RT_EINVAL. */
int rt_model_find_state(const RtModel *m, const char *name);
int rt_model_state_set(RtModel *m, int i, const RtTensor *t);
int rt_model_state_get(const RtModel *m, int i, RtTensor *t);
/* Every state back to zero, as at load. */
void rt_model_state_reset(RtModel *m);

typedef struct {
    uint64_t dispatches; /* sub-program dispatches in this run */
    uint64_t ops;        /* ops executed */
    double seconds;      /* wall time of rt_run */
} RtRunStats;

enum {
    RT_RUN_NONBONDED = 1, /* mode 0 only: run the non-bonded variant */
};

/* Runs the model: in[i] binds input i, out[i] receives output i (in the
 * order of rt_model_input/output; dtype, rank, dims must match and size must
 * suffice, else RT_EBIND; a bounded output's dims[0] is then set to the rows
 * the run wrote).  An fp16 input the model reads in place
 * (rtb_input_f16) is not copied: its bytes must not change until rt_run
 * returns.  No allocation, no system calls but futex wakes.
 * One rt_run at a time per model (the model owns one arena and one thread
 * pool); different models may run concurrently.  RT_EINDEX: a gather met an
 * out-of-range index (its rows are zero; the outputs are still written).
 * RT_EINVAL: RT_RUN_NONBONDED on a model without that variant.  stats may be NULL. */
int rt_run(RtModel *m, const RtTensor *in, int nin, RtTensor *out, int nout, int flags, RtRunStats *stats);

/* Inspection after a run: the F32/I32/BOOL contents of buffer `buf` of the
 * last program run (weights, inputs, temps).  *data is valid until the next
 * rt_run or rt_model_free; temps of the bonded program may have been
 * overwritten by later ops (arena reuse) — run non-bonded to inspect them.
 * fp16 inputs read in place (rtb_input_f16) are the caller's: RT_EINVAL. */
int rt_model_buffer(const RtModel *m, int buf, const void **data, RtDType *dtype, int *rank, int64_t *dims);

#ifdef __cplusplus
}
#endif
#endif
