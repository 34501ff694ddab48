/* gen.h — the template-driven chunk generator (compiler/gen).
 *
 * A template (mil-templates/NAME.xml, format in mil-templates/README.md) plus
 * parameter values plus a weight source give a MIL program and its weights.
 * Templates are data found on a search path; nothing here reads the
 * environment or prints: the CLI builds the search path and renders the sink.
 *
 * Typical use (what `milc emit` does):
 *
 *     GenSearchPath sp = {dirs, ndirs};          // built-in dir first, then --template-dir, $MILC_TEMPLATE_PATH
 *     GenConfig *c = gen_config_open(&sp, "gpt2-medium", d);   // a template or a preset name
 *     gen_config_set(c, "--kv-heads", "4", d);   // once per option, in command-line order
 *     if (gen_config_resolve(c, d) == 0)         // ranges, derived values, requirements
 *         gen_emit(c, &(GenOptions){.weights = "random:0", .compile_mode = -1}, "out", d);
 *     gen_config_free(c);
 */
#ifndef MILC_GEN_H
#define MILC_GEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "milc/blob.h"
#include "milc/diag.h"

typedef struct GenTemplateSet GenTemplateSet;

/* Directories searched in order; the first holding a name wins.  The
 * strings are borrowed: keep them alive while any object made from the path
 * lives.  With a set, a template is read and parsed once and shared by every
 * config opened through the path (a whole model's chunks load it once, not
 * once per chunk); the files are then read as they were at that first load. */
typedef struct GenSearchPath {
    const char *const *dirs;
    int count;
    GenTemplateSet *loaded; /* optional; NULL: every open reads the files */
} GenSearchPath;

/* The templates loaded through a path.  Free it after every config opened
 * through that path. */
GenTemplateSet *gen_template_set_new(void);
void gen_template_set_free(GenTemplateSet *s);

typedef enum GenParamType { GEN_PARAM_INT, GEN_PARAM_FLOAT, GEN_PARAM_ENUM, GEN_PARAM_STRING } GenParamType;

/* One declared template parameter.  Strings are owned by the template. */
typedef struct GenParam {
    const char *name; /* e.g. "kv_heads" */
    GenParamType type;
    const char *default_value; /* as written in the template */
    const char *doc;           /* one line, "" when absent */
    bool has_min, has_max;     /* range for int/float, inclusive */
    double min, max;
    const char *const *choices; /* enum values */
    int nchoices;
} GenParam;

/* ---- listing ------------------------------------------------------------ */

typedef enum GenEntryKind { GEN_ENTRY_TEMPLATE, GEN_ENTRY_PRESET } GenEntryKind;
typedef struct GenEntry {
    GenEntryKind kind;
    char *name;          /* what --template takes */
    char *template_name; /* presets: the template it configures; templates: = name */
    char *path;          /* file it was found in */
    char *doc;           /* one line */
} GenEntry;

/* Every template (top-level *.xml with a <template> root) and every preset
 * (presets.xml) on the path, sorted by name; a name shadowed by an earlier
 * directory is listed once.  *out is malloc'd: free with gen_list_free.
 * Unreadable or malformed files add a warning and are skipped.  Returns 0. */
int gen_list(const GenSearchPath *sp, GenEntry **out, int *count, DiagSink *d);
void gen_list_free(GenEntry *entries, int count);

/* A digest of everything the path can give a template, block or preset:
 * each directory's name and every *.xml file under it (its name relative to
 * the directory and its bytes), in order.  Files are read, not parsed, so a
 * caller can tell the path is unchanged before it loads a template.  0, or -1
 * when a directory is too big to be a template directory (more than 16384
 * entries, 4096 template files or 64 MB of them). */
int gen_path_digest(const GenSearchPath *sp, uint8_t out[16]);

/* ---- templates ---------------------------------------------------------- */

typedef struct GenTemplate GenTemplate;

/* Load and validate template NAME (NAME.xml on the path) and every block it
 * includes, or take it from the path's set.  NULL on error (diagnostics at
 * the template's file:line).  A loaded template is read-only; each load is
 * paired with one gen_template_free. */
GenTemplate *gen_template_load(const GenSearchPath *sp, const char *name, DiagSink *d);
void gen_template_free(GenTemplate *t);

const char *gen_template_name(const GenTemplate *t);
const char *gen_template_path(const GenTemplate *t);
const char *gen_template_doc(const GenTemplate *t);
int gen_template_param_count(const GenTemplate *t);
const GenParam *gen_template_param(const GenTemplate *t, int i);
/* Index of the parameter an option names, or -1.  Accepts "kv_heads",
 * "kv-heads", "--kv-heads" and "--kv_heads" alike (see gen_name_matches). */
int gen_template_find_param(const GenTemplate *t, const char *option);
/* True when option names param: leading "--" dropped, '-' and '_' equal. */
bool gen_name_matches(const char *param, const char *option);

/* XXH3-128 over the template's bytes and those of every block it can include
 * (all branches, in a fixed order), each prefixed by its name and length: a
 * changed template or block changes the digest.  For the direct cache key. */
void gen_template_digest(const GenTemplate *t, uint8_t out[16]);

/* Human-readable description for `milc templates show`: doc, parameters
 * (type, default, range, choices, doc), derived values, presets are not
 * included.  malloc'd; the caller frees. */
char *gen_template_describe(const GenTemplate *t);

/* ---- configuration ------------------------------------------------------ */

typedef struct GenConfig GenConfig;

/* A configuration for NAME: a template name, or a preset name (presets.xml
 * on the path) whose values are applied over the template's defaults.  The
 * config owns its template.  NULL on error. */
GenConfig *gen_config_open(const GenSearchPath *sp, const char *name, DiagSink *d);
void gen_config_free(GenConfig *c);
const GenTemplate *gen_config_template(const GenConfig *c);
/* The preset applied, or NULL. */
const char *gen_config_preset(const GenConfig *c);

/* Set a parameter from an option (name matched by gen_name_matches).  The
 * value is checked against type and range now; a later set wins.  0 or -1
 * (unknown parameter, bad value: error added). */
int gen_config_set(GenConfig *c, const char *option, const char *value, DiagSink *d);

/* Evaluate the template's derived values and requirements with the current
 * parameters (errors point at the template line).  Must succeed before
 * canonical/generate.  0 or -1. */
int gen_config_resolve(GenConfig *c, DiagSink *d);

/* The resolved parameter set, one "name=value\n" per parameter sorted by
 * name, preceded by "template=NAME\n": ints in decimal, floats as C99 hex,
 * strings verbatim.  Equal strings mean equal programs (with the template
 * digest and weight source).  malloc'd; NULL if not resolved. */
char *gen_config_canonical(const GenConfig *c);

/* The resolved value of a parameter or derived value, for the CLI (e.g. to
 * print "seq padded to 16").  false when there is no such name. */
bool gen_config_get_int(const GenConfig *c, const char *name, int64_t *out);
bool gen_config_get_float(const GenConfig *c, const char *name, double *out);
bool gen_config_get_str(const GenConfig *c, const char *name, const char **out);

/* ---- generation --------------------------------------------------------- */

/* The size of the weight file the config's program would have (records and
 * headers), from the template's weight declarations alone: nothing is
 * generated, so it is cheap at any model size (`build --chunk auto` sizes
 * chunks with it).  0, or -1 with diagnostics in d. */
int gen_config_weight_bytes(GenConfig *c, uint64_t *bytes, DiagSink *d);

/* A weight source, opened once: "random" or "random:SEED" (SEED a decimal
 * uint64; NULL means random:0), or a .safetensors checkpoint: its header
 * read and validated, every byte hashed (the digest), the descriptor kept;
 * a program reads the tensors it maps by pread when it is generated, so
 * memory does not grow with the checkpoint.  A key made from the digest
 * names exactly the weights compiled: a checkpoint replaced by a rename is
 * still read from the file opened, and one written in place or cut after
 * the open fails the generation (a system error) instead of mixing bytes.
 * 0, or -1 with an error in d (a missing, unreadable or malformed file). */
typedef struct GenWeights GenWeights;
int gen_weights_open(const char *weights, GenWeights **out, DiagSink *d);
/* The source's digest, as gen_weights_digest gives for the same bytes. */
void gen_weights_id(const GenWeights *w, uint8_t out[16]);
void gen_weights_close(GenWeights *w);

typedef struct GenOptions {
    /* "random" or "random:SEED" (the default when NULL; SEED is a decimal
     * uint64), or the path of a .safetensors checkpoint: named in the
     * manifest, and read for the weights unless source is given. */
    const char *weights;
    /* Recorded in buildInfo as {"milc-compile-mode", "N"}; -1 omits it. */
    int compile_mode;
    /* Skip mil_parse/mil_check/mil_print and keep the generated text as is
     * (debugging templates).  Normally false. */
    bool raw;
    /* The output directory is scratch (a build's): files are not fsynced. */
    bool scratch;
    /* The weights are made in memory (GenResult.weights) and no file is
     * written: dir only names @model_path.  A build's, whose weights are
     * compiled and dropped (implies scratch's limit check). */
    bool in_memory;
    /* The weights, already read (gen_weights_open of the same string), or
     * NULL: read here. */
    const GenWeights *source;
    /* The most memory the program may need, checked before it is made: its
     * weight file (staged in memory whole), and 1/32 of it for the MIL text
     * (parsed, it takes ~30 times its size).  0: no limit. */
    uint64_t max_memory;
    /* With in_memory: told before the weights touch more memory, and may
     * wait (milblob_writer_on_grow).  NULL: not told. */
    MilBlobGrowFn grow;
    void *grow_ctx;
} GenOptions;

typedef struct GenIo {
    char *name;
    char *dtype; /* "fp16", ... */
    int rank;
    int64_t shape[8];
    bool state; /* an input held as state<tensor<...>> (ios18): the model keeps it across runs */
} GenIo;

typedef struct GenResult {
    char *mil; /* canonical MIL text, NUL-terminated */
    size_t mil_len;
    char *manifest; /* manifest.json text */
    GenIo *inputs;  /* in function-signature order */
    int ninputs;
    GenIo *outputs;
    int noutputs;
    int nweights;
    uint64_t weight_file_bytes; /* size of weights/weight.bin (0 when not written) */
    uint8_t weights_digest[16]; /* its milblob_file_digest, made while writing (when written) */
    MilBlobImage weights;       /* with GenOptions.in_memory: the weight file's bytes */
} GenResult;

/* Generate the program of a resolved config.  With dir non-NULL, writes the
 * weights to DIR/weights/weight.bin (DIR and DIR/weights created as needed);
 * with dir NULL, no weights are produced (the MIL text still names them):
 * enough to hash or check the program.  Errors in the generated program are
 * reported at the generated line with a note at the template line that
 * produced it.  r is filled on success (free with gen_result_free); 0 or -1. */
int gen_generate(GenConfig *c, const GenOptions *o, const char *dir, GenResult *r, DiagSink *d);
void gen_result_free(GenResult *r);

/* gen_generate plus DIR/model.mil and DIR/manifest.json.  Byte-identical
 * output for identical template, parameters and weights.  0 or -1. */
int gen_emit(GenConfig *c, const GenOptions *o, const char *dir, DiagSink *d);

/* XXH3-128 of a weight source for the direct key: of the string for
 * "random:SEED", of the file's bytes for a checkpoint (streamed, not kept:
 * to look a key up; a key stored for compiled weights takes
 * gen_weights_id of the source they were generated from).  0 or -1 (I/O
 * error added to d). */
int gen_weights_digest(const char *weights, uint8_t out[16], DiagSink *d);

#endif
