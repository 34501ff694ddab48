/* milc.h — libmilc, the whole public interface of milc: a MIL compiler and
 * artifact cache for the CPU.  Open a cache, build or look up a program, load
 * it, run it on your buffers.
 *
 * Conventions.  Every handle is opaque.  Every function that can fail returns
 * a MilcStatus (MILC_OK is 0) and leaves its message for milc_last_error.
 * The library never prints, never exits and never reads the environment:
 * everything it needs is an option.  Returned memory is the caller's only
 * where a *_free function says so. */
#ifndef MILC_H
#define MILC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Status codes.  The values are the milc command's exit codes where one
 * exists, so a front end can exit with them. */
typedef enum MilcStatus {
    MILC_OK = 0,
    MILC_E_INPUT = 1,       /* the input is invalid: a template, parameter, weights, artifact */
    MILC_E_USAGE = 2,       /* the call is wrong: a bad argument, a name that does not exist */
    MILC_E_SYSTEM = 3,      /* I/O, cache, memory or another system failure */
    MILC_E_UNSUPPORTED = 4, /* valid, but this build or artifact cannot do it */
    MILC_E_NOTFOUND = 5,    /* a lookup that found nothing (not an error for a cache) */
} MilcStatus;

/* A fixed description of a status code ("invalid input"). */
const char *milc_strerror(int status);

/* Message levels, for a front end's message callback. */
enum { MILC_MSG_ERROR = 0, MILC_MSG_WARNING = 1 };

/* The library's version ("0.1.0"). */
const char *milc_version(void);

/* The message of the calling thread's last failed call ("template 'gpt3'
 * not found in ..."; several lines for template diagnostics), or "" if none
 * failed yet.  Valid until that thread's next call into the library. */
const char *milc_last_error(void);

/* ---- compile modes --------------------------------------------------------- */

/* What a program is compiled into.  MILC_MODE_DEFAULT asks for the default
 * (bonded). */
enum {
    MILC_MODE_BOTH = 0,      /* bonded and non-bonded variants in one artifact */
    MILC_MODE_NONBONDED = 1, /* one dispatch per op, every intermediate inspectable */
    MILC_MODE_BONDED = 2,    /* ops fused into few dispatches (the default) */
    MILC_MODE_DEFAULT = -1,
};
/* The mode's name ("bonded"), or NULL for a mode that does not exist. */
const char *milc_mode_name(int mode);

/* ---- the cache --------------------------------------------------------------- */

typedef struct MilcCache MilcCache;

/* How hits are checked before they are served. */
enum {
    MILC_VERIFY_ONCE = 0,   /* checksum a hit unless it passed since boot and only milc wrote the cache since */
    MILC_VERIFY_ALWAYS = 1, /* checksum every hit */
    MILC_VERIFY_NEVER = 2,  /* trust the cache file */
};

typedef struct MilcCacheOptions {
    const char *template_dirs; /* ':'-separated directories searched for templates, in order;
                                  NULL: the templates installed with the library */
    uint64_t max_memory;       /* the most one program's weights, a run's arena and scratch, or
                                  a template's generated text may take; 0: no limit */
    int verify;                /* MILC_VERIFY_* */
    int threads;               /* worker threads of each model loaded; 0: every CPU */
} MilcCacheOptions;

/* Open (creating it if needed) the cache in directory dir.  o may be NULL
 * (the defaults).  *out is the caller's until milc_cache_close.  A cache
 * handle may be used by one thread at a time; open one per thread. */
MilcStatus milc_cache_open(MilcCache **out, const char *dir, const MilcCacheOptions *o);
/* Close it.  Models loaded from it must be freed first.  NULL is fine. */
void milc_cache_close(MilcCache *c);

/* ---- building: a request becomes programs ------------------------------------ */

/* A template parameter: NAME=VALUE, applied in order (a later value of a
 * name wins).  VALUE may be a comma list: one program per combination. */
typedef struct MilcParam {
    const char *name;
    const char *value;
} MilcParam;

/* What to build: the same words as `milc build`. */
typedef struct MilcRequest {
    const char *model;       /* template or preset name; NULL: "gpt2" */
    const char *weights;     /* "random:SEED" or FILE.safetensors; NULL: random:0 */
    const MilcParam *params; /* nparams template parameters */
    int nparams;
    int mode;   /* MILC_MODE_*; 0 (MILC_MODE_BOTH) is a real mode: say MILC_MODE_DEFAULT */
    long chunk; /* 0: one program; K: the whole model in chunks of K layers */
} MilcRequest;

typedef struct MilcBuild MilcBuild;

enum { MILC_BUILT = 0, MILC_HIT_DIRECT = 1, MILC_HIT_FULL = 2 };

/* One program of a build. */
typedef struct MilcProgramInfo {
    char key[33];    /* its artifact's cache key, 32 hex digits */
    char label[256]; /* what tells it apart in its request ("first_layer=4 layers=4"), or "" */
    int outcome;     /* MILC_BUILT, or how it was found */
    int mode;
    uint64_t artifact_bytes;
    double ms_total;   /* this program's build or lookup, ms */
    double ms_compile; /* of which generation, checks and compilation (0 on a hit) */
} MilcProgramInfo;

/* Build every program of req, or find it in the cache: the direct key (the
 * template, parameters and weights), then the full key (the program's text
 * and weight digest), then compile.  A repeated request finds its programs
 * from a note without reading a template.  *out lists them in order (the
 * chain's chunks first to last); free it with milc_build_free.
 * MILC_E_INPUT: a bad template, parameter or weight source (the
 * diagnostics in milc_last_error). */
MilcStatus milc_build(MilcCache *c, const MilcRequest *req, MilcBuild **out);
int milc_build_count(const MilcBuild *b);
/* MILC_E_USAGE if i is out of range. */
MilcStatus milc_build_program(const MilcBuild *b, int i, MilcProgramInfo *out);
void milc_build_free(MilcBuild *b);

/* The resolved value of a template parameter or derived value of req ("dim",
 * "rope_theta"), as text in out (n bytes).  MILC_E_NOTFOUND: no such name. */
MilcStatus milc_request_param(MilcCache *c, const MilcRequest *req, const char *name, char *out, size_t n);

/* Build every request of a prewarm manifest (the format of `milc help
 * prewarm`: one line of `milc build` options each) in this thread.
 * Counts go to *done (may be NULL).  MILC_E_INPUT: a bad line (nothing
 * built) or a failed build (the rest were still built). */
typedef struct MilcPrewarmResult {
    int programs, built, hits, failed;
} MilcPrewarmResult;
MilcStatus milc_prewarm(MilcCache *c, const char *manifest_path, MilcPrewarmResult *done);

/* ---- artifacts --------------------------------------------------------------- */

/* Compile a MIL program (a model.mil file, a folder holding one, or a
 * .mlpackage) into the artifact file out_path, as `milc compile` does: no
 * cache involved; milc_model_load_file loads the result.  mode: MILC_MODE_*.
 * The file is replaced atomically, and not at all on failure.
 * MILC_E_INPUT: the program does not parse or check (its diagnostics in
 * milc_last_error). */
MilcStatus milc_compile_file(const char *path, const char *out_path, int mode);

enum { MILC_MAX_RANK = 6 }; /* the most dimensions a tensor has */

/* The size an input of flexible shape (a package's RangeDim, '?' in the
 * text) is compiled for: every dimension, the static ones as declared. */
typedef struct MilcShape {
    const char *name;
    int rank;
    int64_t dims[MILC_MAX_RANK];
} MilcShape;
typedef struct MilcCompileOptions {
    int mode;                /* MILC_MODE_* */
    const char *function;    /* the function compiled; NULL: main, or the program's only one */
    const MilcShape *shapes; /* `milc compile --shape`: nshapes of them, or NULL */
    int nshapes;
} MilcCompileOptions;
/* milc_compile_file with options (o NULL: the defaults).  MILC_E_INPUT also
 * for a shape that names no input or does not fit it. */
MilcStatus milc_compile_file_with(const char *path, const char *out_path, const MilcCompileOptions *o);

typedef struct MilcArtifactInfo {
    int mode;
    uint64_t bytes; /* its sections' total */
    int sections;
    char description[160]; /* what made it, one line */
    uint64_t compile_ns;   /* what building it took */
    uint64_t hits;
} MilcArtifactInfo;

/* The cache entry of key (32 hex digits), checked as the cache's verify
 * option says.  MILC_E_NOTFOUND: no such entry; MILC_E_INPUT: a damaged one
 * or one another milc made (never served). */
MilcStatus milc_artifact_info(MilcCache *c, const char *key, MilcArtifactInfo *out);

/* ---- models: loading and running --------------------------------------------- */

typedef struct MilcModel MilcModel;

/* Load the artifact of key from the cache (checked as milc_artifact_info
 * does).  The model reads its weights where the cache holds them: free it
 * before closing c.  One run at a time per model; models may run in
 * parallel. */
MilcStatus milc_model_load(MilcCache *c, const char *key, MilcModel **out);
/* Load an artifact file (`milc compile -o`), checksums verified.  threads:
 * 0 = every CPU. */
MilcStatus milc_model_load_file(const char *path, int threads, MilcModel **out);
void milc_model_free(MilcModel *m);

/* MILC_U8 .. MILC_U16: a program's int8/uint8/int16/uint16 inputs and outputs
 * (computed in int32 inside; an output wraps to its width, as a cast does). */
typedef enum MilcDType {
    MILC_F32 = 1,
    MILC_F16 = 2,
    MILC_I32 = 3,
    MILC_BOOL = 4,
    MILC_U8 = 5,
    MILC_I8 = 6,
    MILC_I16 = 7,
    MILC_U16 = 8
} MilcDType;

typedef struct MilcTensorInfo {
    const char *name; /* valid until milc_model_free */
    int dtype;        /* MilcDType of the caller's buffer */
    int rank;
    int64_t dims[MILC_MAX_RANK];
    size_t bytes; /* the buffer's size: elements x element size */
    /* an output whose rows are counted at run time (non_zero of run-time
     * data): dims[0] and bytes are their upper bound, which the caller's
     * buffer holds; milc_model_output_shape says how many a run wrote */
    int bounded;
} MilcTensorInfo;

int milc_model_ninputs(const MilcModel *m);
int milc_model_noutputs(const MilcModel *m);
/* MILC_E_USAGE if i is out of range. */
MilcStatus milc_model_input(const MilcModel *m, int i, MilcTensorInfo *out);
MilcStatus milc_model_output(const MilcModel *m, int i, MilcTensorInfo *out);
/* The index of the input (output != 0: output) called name, or -1. */
int milc_model_find(const MilcModel *m, const char *name, int output);
int milc_model_mode(const MilcModel *m);

/* What one run did: the bench primitives' figures. */
typedef struct MilcRunStats {
    uint64_t dispatches; /* sub-program dispatches */
    uint64_t ops;        /* ops executed */
    double seconds;      /* wall time of the run */
} MilcRunStats;

/* Run: inputs[i] holds input i (milc_model_input: its dtype and shape,
 * bytes exactly), outputs[i] receives output i.  Buffers are the caller's;
 * nothing is allocated.  stats may be NULL.  MILC_E_USAGE: a NULL buffer;
 * MILC_E_INPUT: a gather index out of range (outputs still written). */
MilcStatus milc_model_run(MilcModel *m, const void *const *inputs, void *const *outputs, MilcRunStats *stats);
/* Output i as the last run wrote it: milc_model_output's, with a bounded
 * output's dims[0] and bytes the rows that run wrote (before any run, the
 * bound).  MILC_E_USAGE if i is out of range. */
MilcStatus milc_model_output_shape(const MilcModel *m, int i, MilcTensorInfo *out);

/* ---- states ------------------------------------------------------------------ */

/* States are buffers a model keeps between runs (MIL's state<tensor<...>>:
 * a KV cache held by the model, read and updated in place by each run,
 * instead of passed in as inputs and returned as outputs), as Core ML keeps
 * an MLState: zero at load, changed only by the model's runs and by
 * milc_model_state_write.  milc_model_nstates says how many;
 * milc_model_state describes one like an input (its dtype is its own: an
 * fp16 state is read and written as fp16); milc_model_state_read/_write
 * copy one out or in, exactly its bytes (MILC_E_INPUT for another size,
 * MILC_E_USAGE for an index out of range); milc_model_reset_states zeroes
 * them all. */
int milc_model_nstates(const MilcModel *m);
MilcStatus milc_model_state(const MilcModel *m, int i, MilcTensorInfo *out);
MilcStatus milc_model_state_read(MilcModel *m, int i, void *dst, size_t bytes);
MilcStatus milc_model_state_write(MilcModel *m, int i, const void *src, size_t bytes);
MilcStatus milc_model_reset_states(MilcModel *m);

/* Monotonic time in nanoseconds: what the bench measures with. */
int64_t milc_now_ns(void);

#ifdef __cplusplus
}
#endif
#endif
