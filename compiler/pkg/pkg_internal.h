/* pkg_internal.h — what the container module's files share: the generated
 * protobuf types, the dtype and opset tables, file helpers. */
#ifndef MILC_PKG_INTERNAL_H
#define MILC_PKG_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "coreml.pb-c.h"
#include "milc/assert.h"
#include "milc/pkg.h"

/* Core ML's DataType for an IR dtype and back; false when there is none. */
bool pkg_dtype_to_cml(IrDType dt, Cml__DataType *out);
bool pkg_dtype_from_cml(Cml__DataType t, IrDType *out);
/* "ios18" <-> "CoreML8"; NULL when unknown. */
const char *pkg_opset_to_cml(const char *opset);
const char *pkg_opset_from_cml(const char *cml);

/* The location of a whole file (no line). */
static inline SrcLoc pkg_at(DiagSink *d, const char *file) {
    SrcLoc l = {diag_intern(d, file), 0, 0};
    return l;
}

/* Read a whole file of at most max bytes; NULL with a diagnostic naming the
 * file (too large: an input error; unreadable: a system error unless it is
 * missing, which is the input's fault). */
char *pkg_read_file(DiagSink *d, const char *path, size_t max, size_t *len);
/* Write bytes to path (a new file); 0 or -1 with a system diagnostic. */
int pkg_write_bytes(DiagSink *d, const char *path, const void *data, size_t len);
/* Copy src to dst (a new file) byte for byte; 0 or -1 with a diagnostic. */
int pkg_copy_file(DiagSink *d, const char *src, const char *dst);
/* mkdir -p for the directories of a relative path under root. */
int pkg_make_dirs(DiagSink *d, const char *root, const char *rel);

/* Text fit for MIL: printable ASCII without '"' or '\' (what the text
 * parser accepts), and identifiers [A-Za-z_][A-Za-z0-9_]*. */
bool pkg_safe_string(const char *s);
bool pkg_identifier(const char *s);

#endif
