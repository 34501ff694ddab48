/* pkg.h — Core ML containers: a MIL program read from, or written to, a
 * `.mlpackage` (Manifest.json + the protobuf Model spec + weights), a compiled
 * `.mlmodelc` or any folder holding `model.mil`, or a bare model.mil file.
 * Whatever the container, the program lands in the same IR the text parser
 * builds, so its canonical text (and every cache key made of it) does not
 * depend on the container.  Every file is untrusted: sizes are bounded, every
 * path is kept inside the package, and errors name the file and the field.
 * Nothing here prints or exits; diagnostics go to the DiagSink. */
#ifndef MILC_PKG_H
#define MILC_PKG_H

#include <stdbool.h>
#include <stddef.h>

#include "milc/arena.h"
#include "milc/diag.h"
#include "milc/ir.h"

typedef enum PkgKind {
    PKG_KIND_NONE,      /* nothing usable at the path */
    PKG_KIND_MIL,       /* a model.mil text file */
    PKG_KIND_MIL_DIR,   /* a folder with model.mil (a .mlmodelc is one) */
    PKG_KIND_MLPACKAGE, /* a folder with Manifest.json */
} PkgKind;

/* Limits on what the reader accepts (untrusted input). */
enum {
    PKG_MAX_MANIFEST = 1 << 20, /* Manifest.json */
    PKG_MAX_SPEC = 64 << 20,    /* model.mlmodel: weights live outside it; protobuf-c
                                       allocates ~20x the wire size of small messages */
    PKG_MAX_MIL = 1 << 30,      /* model.mil text */
    PKG_MAX_ITEMS = 4096,       /* Manifest.json items */
};

/* What a path holds, by its contents (a folder with Manifest.json is a
 * package whatever its name). */
PkgKind pkg_kind(const char *path);

typedef struct PkgProgram {
    IrProgram *prog;
    PkgKind kind;
    const char *file;      /* the file the program came from (model.mil or model.mlmodel) */
    const char *model_dir; /* the folder @model_path names (arena) */
} PkgProgram;

/* Read the program at path (any PkgKind) into the IR.  model_path, when not
 * NULL, overrides the folder @model_path stands for (only meaningful for a
 * bare model.mil; a package's weights live in the package).  Returns 0, or -1
 * with diagnostics in d (input errors, or system errors counted as such). */
int pkg_load(Arena *a, DiagSink *d, const char *path, const char *model_path, PkgProgram *out);

/* Read a .mlpackage's program from memory: the Manifest.json text and the
 * root model's bytes (the fuzz target's entry; pkg_load calls it). names
 * give the files for diagnostics. */
IrProgram *pkg_read_spec(Arena *a, DiagSink *d, const char *spec_name, const void *spec, size_t len);
/* The root model item's path (relative to the package's Data folder) from a
 * Manifest.json text; NULL with diagnostics. */
char *pkg_manifest_root(Arena *a, DiagSink *d, const char *name, const char *json, size_t len);

typedef enum PkgFormat { PKG_OUT_MLPACKAGE, PKG_OUT_MIL_DIR } PkgFormat;

/* Write p to out as a package or a model.mil folder.  Weight files the
 * program names (@model_path/...) are copied byte for byte from model_dir,
 * not re-encoded.  Everything is written beside out first and renamed into
 * place, so a failure leaves nothing behind; an existing out is replaced.
 * The same program and weights give the same bytes.  Returns 0 or -1 with
 * diagnostics. */
int pkg_write(const IrProgram *p, const char *model_dir, PkgFormat fmt, const char *out, DiagSink *d);

/* The protobuf Model for p (malloc'd bytes in *data, caller frees): what
 * pkg_write puts in model.mlmodel.  0 or -1 with diagnostics. */
int pkg_encode_spec(const IrProgram *p, void **data, size_t *len, DiagSink *d);

/* Core ML's specificationVersion for an opset ("ios18" -> 9); 0 if unknown. */
int pkg_spec_version(const char *opset);

#endif
