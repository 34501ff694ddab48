/* pipeline.h — `milc build`'s path through generator, compiler and cache:
 * the key records, the direct and full lookups, compile on a miss, store. */
#ifndef MILC_LIB_PIPELINE_H
#define MILC_LIB_PIPELINE_H

#include <stdbool.h>
#include "milc/lib.h"
#include "milc/cache.h"
#include "milc/gen.h"
#include "milc/mil.h"
#include "milc/pkg.h"
#include "milc/store.h"

/* A key-record item tag: four characters, big-endian. */
#define KEY_TAG(a, b, c, d) ((uint32_t)(a) << 24 | (uint32_t)(b) << 16 | (uint32_t)(c) << 8 | (uint32_t)(d))

/* Key-record layout version; bump when the set or meaning of fields changes. */
#define MILC_KEY_FORMAT 2

enum { BUILD_VERIFY_NONE = 0, BUILD_VERIFY_FULL = 1, BUILD_VERIFY_ONCE = 2 };

typedef enum { BUILD_MISS = 0, BUILD_HIT_DIRECT = 1, BUILD_HIT_FULL = 2 } BuildOutcome;

typedef struct BuildResult {
    CacheKey key; /* the artifact key */
    BuildOutcome outcome;
    uint64_t artifact_bytes;
    int dispatches;   /* per forward, from the compiler */
    bool checksummed; /* a hit: its checksum was recomputed now (else it had
                              passed earlier, or --no-verify) */
    bool from_note;   /* a direct hit whose key came from the request's note
                              (request.c): no template was read */
    bool from_remote; /* a hit the remote tier brought into the local cache */
    /* Timing breakdown in ms (0 where the stage did not run). */
    double ms_lookup, ms_generate, ms_check, ms_passes, ms_lower, ms_store, ms_total;
    char description[160];
    uint8_t wdig[16]; /* the weights' digest the keys were made with */
} BuildResult;

typedef struct BuildRequest {
    GenConfig *config;             /* resolved */
    const char *weights;           /* weight source, NULL = random:0 */
    const uint8_t *weights_digest; /* its gen_weights_digest, if the caller has it,
                                      to look up; NULL: computed here */
    const GenWeights *source;      /* the weights read once (gen_weights_open of
                                 weights), shared by a request's programs, or
                                 NULL: read here on a miss.  Keys stored name
                                 the digest of the bytes compiled, whatever
                                 weights_digest said. */
    int mode;                      /* RT_MODE_* */
    const char *tmp_root;          /* where scratch directories go (the cache dir) */
    int verify_hits;               /* on a hit: BUILD_VERIFY_NONE no checksum, _FULL checksum
                            every byte, _ONCE unless it passed since boot and
                            nothing but milc wrote the cache since (CACHE_GET_VERIFY_ONCE) */
    StoreEntry **hit_out;          /* non-NULL: on success, the stored artifact's entry
                             (the caller store_releases it) */
    uint64_t max_memory;           /* --max-memory: GenOptions.max_memory; 0: no limit */
    Store *remote;                 /* the shared tier (tier.h), or NULL: read-through on a
                            local miss, write-back after a store */
    bool *missed;                  /* non-NULL: look up only; on a direct miss set it
                            (nothing built) and return MILC_OK */
    bool known_miss;               /* the direct lookup ran already (missed): skip it */
    struct PipelineKept **kept;    /* non-NULL (and hit_out NULL): on a miss, stop
                            once the artifact is compiled and hand it out here,
                            store left to pipeline_keep, which may run on
                            another thread meanwhile */
    bool (*store_busy)(void *ctx); /* with kept: true while another thread uses the
                            Store, which then defers the full-key lookup to
                            pipeline_keep (after the compile); false, or NULL:
                            the Store is this thread's, so it is looked up
                            before compiling and a hit compiles nothing */
    void *store_busy_ctx;
    const struct BuildBudget *budget; /* with kept: the memory this program shares with
                            the one being stored meanwhile, or NULL */
} BuildRequest;

/* One memory budget for the program being made and the one being stored
 * (request.c): take is asked before the weights touch n more bytes and may
 * wait; give is told of n bytes of a stored artifact handed back. */
typedef struct BuildBudget {
    void (*take)(void *ctx, uint64_t n);
    void (*give)(void *ctx, uint64_t n);
    void *ctx;
} BuildBudget;

/* What every key record starts with: key format, milc version, backend,
 * artifact format. */
void pipeline_key_base(CacheKeyBuilder *b);

/* The instruction-set features this milc was compiled for ("x86_64 avx2 fma
 * avx512f ..."): a key field, since the compiler's own arithmetic (constant
 * folding, packing) runs with them (cpufeat.c). */
const char *pipeline_cpu_features(void);

/* The direct key's record of req (key base, mode, template digest, the
 * canonical parameters params, weight source and digest) in *db (the caller
 * frees it) and its key.  MILC_OK, or MILC_E_INPUT / MILC_E_SYSTEM (a weight
 * source that cannot be read: diagnostics in d). */
int pipeline_direct_record(const BuildRequest *req, const char *params, CacheKeyBuilder *db, CacheKey *dkey,
                           DiagSink *d);

/* A hit is served only if its artifact is one this runtime reads, of the
 * mode asked for. */
bool pipeline_hit_usable(const StoreEntry *e, int mode);

/* The cache_get flags that check a hit under policy (BUILD_VERIFY_*), for the
 * front ends' lookups by key; verify_store_flags: the same as store_get flags. */
unsigned verify_get_flags(int policy);
unsigned verify_store_flags(int policy);

typedef struct ProgramRequest {
    const char *what; /* for `cache ls`: the file */
    int mode;
    int verify_hits;      /* BUILD_VERIFY_* */
    StoreEntry **hit_out; /* required: the entry, for the caller to run */
    const char *function; /* BackendOptions.function; a key field when set */
} ProgramRequest;

/* A checked program from a file (text or package) compiled through the cache
 * under the full key only: the canonical text and the weight files' digests,
 * so the same program in any container, or made by `milc build`, is one
 * entry.  Returns EXIT_*, diagnostics in d. */
struct IrProgram;
int pipeline_program(Store *s, const struct IrProgram *p, const char *model_dir, const ProgramRequest *req,
                     BuildResult *res, DiagSink *d);

/* Build one program or find it in the cache.  Returns MILC_OK, or MILC_E_INPUT
 * with diagnostics in d, or MILC_E_SYSTEM with a message printed. */
int pipeline_build(Store *s, const BuildRequest *req, BuildResult *res, DiagSink *d);

/* A compiled artifact on its way into the cache (BuildRequest.kept).  Its
 * store finished by pipeline_keep: the full-key lookup (a hit there stores
 * nothing), the store, the direct key, the remote's copy; res is the one
 * pipeline_build filled, completed.  Frees k.  Touches the Store only: the
 * thread that runs it is the Store's one user meanwhile. */
typedef struct PipelineKept PipelineKept;
int pipeline_keep(Store *s, PipelineKept *k, BuildResult *res);
void pipeline_kept_free(PipelineKept *k);
/* The bytes of its artifact (what its store hands back to a budget). */
uint64_t pipeline_kept_bytes(const PipelineKept *k);

/* ---- program files (compile.c) ---- */

/* Read the program at path (a .mil file, a folder holding one, a .mlpackage;
 * model_path, if not NULL, is what @model_path stands for) into arena and
 * check it for target.  MILC_OK with out filled, or MILC_E_INPUT /
 * MILC_E_SYSTEM with diagnostics in d (out->prog is set if it parsed). */
int pipeline_load_program(Arena *arena, const char *path, const char *model_path, MilTarget target, PkgProgram *out,
                          DiagSink *d);

/* What pipeline_load_program_with reads a program for. */
typedef struct ProgramLoadOptions {
    const char *model_path; /* as pipeline_load_program's */
    MilTarget target;
    const char *function; /* whose inputs the shapes name (NULL: main, or the only function) */
    /* Input shapes (mil_specialize) before the checks: shapes as given
     * (--shape), then from_data for inputs still flexible (milc run's .npy
     * files). */
    const MilInputShape *shapes, *from_data;
    int nshapes, nfrom_data;
} ProgramLoadOptions;
int pipeline_load_program_with(Arena *arena, const char *path, const ProgramLoadOptions *o, PkgProgram *out,
                               DiagSink *d);

/* The artifact file beside a program: path without a trailing '/' and its
 * .mil, .mlpackage or .mlmodelc, plus ".milc".  malloc'd, NULL if out of memory. */
char *pipeline_artifact_path(const char *path);
/* Whether stage is one of the backend's stages a compile can dump. */
bool pipeline_stage_known(const char *stage);

typedef struct CompileFileOptions {
    const char *model_path; /* what @model_path stands for; NULL: the program's folder */
    int mode;               /* RT_MODE_* */
    bool no_fuse;           /* BackendOptions.no_fuse */
    const char *dump_stage; /* a stage (pipeline_stage_known), or NULL */
    const char *function;   /* BackendOptions.function */
    const MilInputShape *shapes; /* ProgramLoadOptions.shapes */
    int nshapes;
} CompileFileOptions;

typedef struct CompileFileResult {
    char *dump;                      /* the program after dump_stage as MIL text (the caller frees),
                       also when only parsing succeeded and the stage is "parse" */
    uint64_t bytes;                  /* the artifact file's */
    int ops_in, ops_out, dispatches; /* BackendStats */
    double ms_check, ms_passes, ms_lower, ms_pack, ms_total;
} CompileFileResult;

/* Read, check and compile the program at path into the artifact file
 * out_path, no cache involved.  A warning d treats as an error keeps the
 * file from being written.  MILC_OK, MILC_E_INPUT with diagnostics in d, or
 * MILC_E_SYSTEM (diagnostics, or a message reported). */
int pipeline_compile_file(const char *path, const char *out_path, const CompileFileOptions *o, CompileFileResult *res,
                          DiagSink *d);

#endif
