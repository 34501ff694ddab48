/* gen_internal.h — what the generator's files share: values and scopes of the
 * template expression language, the loaded template, and the expansion
 * result.  Private to compiler/gen. */
#ifndef MILC_GEN_INTERNAL_H
#define MILC_GEN_INTERNAL_H

#include <libxml/parser.h>
#include <libxml/tree.h>
#include <stdint.h>

#include "milc/arena.h"
#include "milc/diag.h"
#include "milc/gen.h"

/* ---- expression language (expr.c) ---- */

typedef enum ValKind { VAL_INT, VAL_FLOAT, VAL_STR } ValKind;
typedef struct Value {
    ValKind kind;
    int64_t i;
    double f;
    const char *s; /* arena-owned */
} Value;

typedef struct Var {
    const char *name;
    Value v;
} Var;

/* A chain of name → value tables; lookups walk to the parent.  Arena-owned. */
typedef struct Scope {
    struct Scope *parent;
    Var *vars;
    int n, cap;
} Scope;

/* Where an expression or text came from, for diagnostics. */
typedef struct ExprCtx {
    Arena *arena;
    DiagSink *diag;
    SrcLoc loc;
    const char *what; /* "attribute 'value'" etc., for messages; may be NULL */
} ExprCtx;

Scope *scope_new(Arena *a, Scope *parent);
void scope_set(Arena *a, Scope *s, const char *name, Value v); /* defines or overwrites in s */
const Value *scope_get(const Scope *s, const char *name);

/* Evaluate expression text.  false on error (diagnostic added). */
bool expr_eval(ExprCtx *x, const Scope *s, const char *text, Value *out);
/* Interpolate {expr} in text ({{ and }} are literal braces).  NULL on error. */
char *expr_interp(ExprCtx *x, const Scope *s, const char *text);
/* Canonical text of a value (ints decimal, floats C99 hex).  Arena-owned. */
const char *value_str(Arena *a, Value v);
bool value_truthy(Value v);
/* Parse a literal parameter value of a type; false when malformed. */
bool value_parse(Arena *a, GenParamType type, const char *text, Value *out);

/* ---- templates (template.c) ---- */

typedef struct GenBlock {
    const char *name; /* as included, e.g. "blocks/attention" */
    const char *path; /* file */
    xmlDoc *doc;
    char *bytes; /* file content (for the digest) */
    size_t len;
} GenBlock;

struct GenTemplate {
    int refs; /* loads not yet freed, the set's own included */
    Arena arena;
    GenSearchPath sp; /* copy of the dirs (arena strings) */
    const char *name, *path, *doc;
    xmlDoc *xml;
    char *bytes;
    size_t len;
    GenParam *params;
    int nparams;
    const int *param_lines;
    GenBlock *blocks; /* every block reachable by <include>, loaded up front */
    int nblocks, cap_blocks;
    uint8_t digest[16];
};

/* libxml2, loaded on first use (xml.c).  gx_load: true once it is loaded,
 * else false with a system error at file; every other call takes what a
 * parse returned. */
bool gx_load(DiagSink *d, const char *file);
xmlParserCtxtPtr gx_new_ctxt(void);
void gx_free_ctxt(xmlParserCtxtPtr c);
xmlDoc *gx_read_memory(xmlParserCtxtPtr c, const char *buf, int len, const char *url, int opts);
void gx_free_doc(xmlDoc *doc); /* NULL: nothing */
xmlNode *gx_root(const xmlDoc *doc);
xmlChar *gx_prop(const xmlNode *n, const char *name); /* gx_free it */
bool gx_has_prop(const xmlNode *n, const char *name);
long gx_line(const xmlNode *n);
xmlChar *gx_content(const xmlNode *n); /* gx_free it */
void gx_free(void *p);                 /* NULL: nothing */

/* Parse an XML file's bytes without letting libxml2 print or fetch anything;
 * parse errors go to d at file:line.  NULL on error. */
xmlDoc *gen_xml_parse(const char *path, const char *bytes, size_t len, DiagSink *d);
/* Read a whole file (malloc'd, NUL-terminated).  NULL + error on failure. */
char *gen_read_file(const char *path, size_t *len, DiagSink *d);
const GenBlock *gen_template_block(const GenTemplate *t, const char *name);
/* NAME.xml in the first directory of the path holding it (names checked,
 * symlinks out of the directory ignored); malloc'd, or NULL. */
char *gen_resolve(const GenSearchPath *sp, const char *name);
/* Preset NAME from the presets.xml files of the path, earlier first: its
 * element, with the document (*docp), file bytes (*bytesp) and path (*pathp)
 * handed to the caller to free.  NULL when there is none. */
xmlNode *gen_find_preset(const GenSearchPath *sp, const char *name, xmlDoc **docp, char **bytesp, char **pathp,
                         DiagSink *d);
/* The attribute's value (arena copy) or NULL. */
const char *gen_attr(Arena *a, xmlNode *n, const char *name);
SrcLoc gen_loc(DiagSink *d, const char *path, xmlNode *n);

/* ---- expansion (expand.c) ---- */

typedef struct GenWeight {
    const char *name; /* MIL variable */
    int rank;
    int64_t shape[8];
    uint64_t count;   /* elements */
    uint64_t offset;  /* BLOBFILE offset (metadata record) */
    uint32_t dtype;   /* MILBLOB_FP16 or MILBLOB_FP32 */
    const char *init; /* initializer: normal zeros ones fill rope_cos rope_sin rope_sign causal_mask */
    double args[4];
    int nargs;
    uint64_t seed_key;     /* hash of the global weight name: random values depend on it only */
    const char *source;    /* checkpoint tensor name or NULL */
    const char *transform; /* e.g. "split(1, 3, 0) t" or NULL */
    SrcLoc loc;
} GenWeight;

typedef struct GenLine {
    char *text; /* one statement */
    SrcLoc loc; /* template line that produced it */
} GenLine;

typedef struct GenProgram {
    GenIo *inputs;
    int ninputs, cap_inputs;
    GenIo *outputs;
    int noutputs, cap_outputs;
    SrcLoc *output_locs;
    GenWeight *weights;
    int nweights, cap_weights;
    GenLine *lines;
    int nlines, cap_lines;
    uint64_t blob_end;   /* next record offset in weight.bin */
    uint64_t text_bytes; /* of lines so far */
    uint64_t max_text;   /* the most text lines may hold; 0: no limit */
} GenProgram;

/* Run the template's body with the resolved parameters.  Arena-owned
 * program in *p.  0 or -1. */
int gen_expand(const GenTemplate *t, Arena *a, Scope *globals, uint64_t max_text, GenProgram *p, DiagSink *d);
/* Run only the template's top-level <let> and <require> elements (what
 * gen_config_resolve checks).  0 or -1. */
int gen_resolve_globals(const GenTemplate *t, Arena *a, Scope *globals, DiagSink *d);

/* The expanded program of a config (its weights' layout), in a: what
 * gen_generate writes, without writing it (bench_gen). */
int gen_config_expand(GenConfig *c, Arena *a, GenProgram *p, DiagSink *d);

/* ---- weights (weights.c) ---- */

/* gen_weights_open without the digest, for a source that keys nothing
 * (gen_weights_id must not be asked of it). */
int gen_weights_open_unkeyed(const char *source, GenWeights **out, DiagSink *d);
/* Fill every weight of p into DIR/weights/weight.bin from the source,
 * streamed (memory does not grow with the weights).  digest, if not NULL,
 * gets the file's milblob_file_digest, made while writing. */
int gen_weights_write(const GenProgram *p, const GenWeights *src, const char *path, bool scratch, uint8_t digest[16],
                      DiagSink *d);
/* The same file made in memory (*out, the caller frees it), no file. */
int gen_weights_make(const GenProgram *p, const GenWeights *src, const GenOptions *o, MilBlobImage *out,
                     uint8_t digest[16], DiagSink *d);
/* Elements [first, first + n) of computed weight w (random, a table), n <=
 * 4096, as w's dtype into out: the generator's inner loop (bench_gen). */
void gen_init_piece(const GenWeight *w, uint64_t seed, uint64_t first, size_t n, void *out);
/* Use the fill loops of level: 0 portable, 1 AVX2+F16C, 2 AVX-512 (the
 * default), or the best below it this CPU runs: the bytes must be the same
 * whichever (tests). */
void gen_fill_select(int level);
/* The bf16 -> fp16 loops this CPU can run (portable first, then its vector
 * twins), with their names: each must give the same bytes (tests, bench). */
typedef void (*GenConvertFn)(const uint16_t *src, uint16_t *dst, size_t n);
int gen_bf16_variants(GenConvertFn out[], const char *names[], int max);

#endif
