/* manifest.h — parsing a prewarm manifest line (format: `milc help prewarm`). */
#ifndef MILC_LIB_MANIFEST_H
#define MILC_LIB_MANIFEST_H

#include <stdint.h>

#include "milc.h"
#include "milc/diag.h"
#include "milc/jobs.h"

/* One request: the build options of a line.  Strings point into the line's
 * text, which the parser cuts in place; extra is malloc'd. */
typedef struct ManifestLine {
    MilcParam *extra; /* template parameters, in order */
    int nextra;
    const char *config, *weights, *modes; /* --model/--template, --weights, --mode */
    long chunk;                           /* --chunk, 0 if absent; JOBS_CHUNK_AUTO for auto */
    uint64_t max_chunk_bytes;             /* --max-chunk-bytes (with --chunk auto), 0 if absent */
} ManifestLine;

/* Parse text (one line, NUL-terminated, modified in place).  A blank or
 * comment line gives an empty request.  0, or -1 with errors at loc's file
 * and line and the offending column.  Free with manifest_line_free either way. */
int manifest_parse_line(char *text, SrcLoc loc, ManifestLine *ln, DiagSink *d);
void manifest_line_free(ManifestLine *ln);

/* The build request a parsed line asks for, its errors pointing at loc.
 * Borrows ln's strings: valid while ln is. */
JobSpec manifest_line_spec(const ManifestLine *ln, SrcLoc loc);

#endif
