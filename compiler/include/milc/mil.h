/* mil.h — the MIL front end: parse model.mil text into the IR (ir.h), check
 * and type it, print it back as canonical text.  The grammar and dialects are
 * in docs/MIL.md; the op signatures in ops.h.
 *
 * Diagnostics go to a DiagSink as `file:line:col: error: message`; nothing
 * here prints or exits.  The parser registers the text with diag_add_source
 * so rendering shows the line and a caret.
 */
#ifndef MILC_MIL_H
#define MILC_MIL_H

#include <stdbool.h>
#include <stddef.h>

#include "milc/arena.h"
#include "milc/blob.h"
#include "milc/diag.h"
#include "milc/ir.h"

typedef enum MilTarget { MIL_TARGET_CPU, MIL_TARGET_ANE } MilTarget;

typedef struct MilCheckOptions {
    MilTarget target;
    const char *model_path;     /* the dir @model_path names; NULL: the MIL file's directory */
    const MilBlobFile *weights; /* or NULL; else the file every BLOBFILE names (a build's, made in memory) */
} MilCheckOptions;

/* Parse text; file is the name used in SrcLocs.  Returns the program
 * (allocated in a, valid until arena_free(a)), or NULL when the text has
 * errors (all reported to d, capped by d->max_errors; the parser recovers at
 * the next ';').  Names are resolved here: undefined and redefined variables,
 * unknown ops and outputs naming nothing are parse errors.  text need not be
 * NUL-terminated. */
IrProgram *mil_parse(Arena *a, DiagSink *d, const char *file, const char *text, size_t len);

/* Make every negative axis and permutation entry (the arguments the op table
 * flags @) non-negative: an inline literal is replaced, a const serving only
 * that argument is rewritten in place, a shared one is left alone and the
 * argument gets its own literal.  Entries out of range stay for mil_check to
 * report.  mil_parse and pkg_read_spec call it; a pass that builds ops with negative axes
 * calls it again. */
void mil_normalize_axes(IrProgram *p);

/* Type-check every op against the op table: argument names, presence, const
 * requirements, dtype groups, ranks, broadcasting, the declared result types
 * against the inferred ones (both reported), BLOBFILE records (dtype and byte
 * size against the tensor type), and with target ANE the ANE path limits of
 * MIL.md (see check.c for which are errors and which warnings).  Result
 * dimensions the declaration leaves dynamic are not refined.  Safe to run
 * again after passes (it is the IR verifier).  o may be NULL (CPU, file dir).
 * false if any error was added. */
bool mil_check(IrProgram *p, const MilCheckOptions *o, DiagSink *d);

/* An input's shape, given for a run (milc compile/run --shape x=1,128,4). */
typedef struct MilInputShape {
    const char *name;
    int rank;
    int64_t dims[16];
} MilInputShape;

/* Give the inputs of function fname (NULL: "main", else the program's only
 * function) the shapes named, before mil_check: a flexible input (a Core ML
 * package's RangeDim, `?` in the text) becomes static, so inference makes
 * every shape after it static too (the checker takes an inferred size for a
 * declared `?`).  A static dimension must be given as it is.  only_flexible:
 * leave inputs without a dynamic dimension alone (milc run's shapes from its
 * .npy files, which the binding checks itself).  False with diagnostics for a
 * name that is no input, a wrong rank, a size that is not the declared one
 * or not positive. */
bool mil_specialize(IrProgram *p, const char *fname, const MilInputShape *s, int n, bool only_flexible, DiagSink *d);

/* True when name is a MIL identifier ([A-Za-z_][A-Za-z0-9_]*), as the lexer
 * reads them.  A function's inputs and outputs must be: the runtime names
 * files after them. */
bool mil_is_identifier(const char *name);

/* Canonical text, malloc'd (caller frees), NUL-terminated; *len gets its
 * length (len may be NULL).  Arguments and attributes in alphabetical order,
 * dict keys sorted, floats as C99 hex floats, 4-space indentation, scalar
 * dialect by program version (ir.h).  print -> parse -> print is the identity. */
char *mil_print(const IrProgram *p, size_t *len);

/* Format v as a C99 hex float ("0x1.4p+3", "-0x0p+0", "inf", "nan"),
 * deterministic and locale-independent.  buf of at least 32 bytes. */
char *mil_format_hexfloat(double v, char *buf);

/* Resolve a BLOBFILE path ("@model_path/weights/weight.bin") against the
 * model directory into out.  The path must start with "@model_path/", have no
 * ".." component, and — symlinks followed — name a file inside model_dir, so a
 * program cannot make milc read (or embed in an artifact) a file outside its
 * model.  Returns 0, or -1 with a reason in *why (a static string). */
int mil_blob_path(const char *model_dir, const char *blob_path, char *out, size_t outlen, const char **why);

#endif
