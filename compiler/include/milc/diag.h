/* diag.h — diagnostics as data.
 *
 * Library code never prints or exits on bad input: it adds a Diag to a
 * DiagSink and returns failure.  Only the CLI renders a sink to a stream.
 * A rendered error reads
 *
 *     model.mil:12:5: error: unknown op 'matmull'
 *         tensor<fp16, [1, 4]> y = matmull(x = x, y = w)[name = string("y")];
 *                                  ^
 *
 * Sources registered with diag_add_source() give the line and caret.
 */
#ifndef MILC_DIAG_H
#define MILC_DIAG_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

/* A position in a source.  file points at a string owned by the DiagSink
 * (from diag_intern / diag_add_source) or by the caller for its lifetime.
 * line and col are 1-based; 0 means "unknown" (then only file: is printed). */
typedef struct SrcLoc {
    const char *file;
    int line;
    int col;
} SrcLoc;

typedef enum DiagLevel { DIAG_ERROR, DIAG_WARNING, DIAG_NOTE } DiagLevel;

typedef struct Diag {
    DiagLevel level;
    SrcLoc loc;
    char *msg; /* owned by the sink */
} Diag;

typedef struct DiagSource DiagSource;

typedef struct DiagSink {
    Diag *items;
    int count, cap;
    int errors, warnings;
    int system_errors; /* errors of the system, not the input (I/O, disk full):
                          the CLI exits 3 for these, 1 for the rest */
    int max_errors;    /* stop recording errors past this many (0 = 100) */
    bool truncated;    /* true once max_errors was hit */
    bool warn_as_error;
    DiagSource *sources; /* registered texts for caret rendering */
} DiagSink;

void diag_init(DiagSink *s);
void diag_free(DiagSink *s);
/* Forget the diagnostics recorded (once reported), keeping the registered
 * sources and names: the locations of a program parsed with s point into
 * them, so s lives as long as the program does. */
void diag_clear(DiagSink *s);

/* Register source text so rendering can show the offending line.  The text is
 * copied; the returned name is owned by the sink and usable as SrcLoc.file. */
const char *diag_add_source(DiagSink *s, const char *name, const char *text, size_t len);
/* A sink-owned copy of a file name, for SrcLocs of files without text. */
const char *diag_intern(DiagSink *s, const char *name);

void diag_add(DiagSink *s, DiagLevel level, SrcLoc loc, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
void diag_vadd(DiagSink *s, DiagLevel level, SrcLoc loc, const char *fmt, va_list ap);
#define diag_error(s, loc, ...) diag_add((s), DIAG_ERROR, (loc), __VA_ARGS__)
/* An error of the system rather than of the input: a failed write, a full
 * disk, a failed allocation of a resource.  Counted in system_errors. */
#define diag_syserror(s, loc, ...) ((s)->system_errors++, diag_add((s), DIAG_ERROR, (loc), __VA_ARGS__))
#define diag_warn(s, loc, ...)     diag_add((s), DIAG_WARNING, (loc), __VA_ARGS__)
#define diag_note(s, loc, ...)     diag_add((s), DIAG_NOTE, (loc), __VA_ARGS__)

/* True when the sink holds an error (or a warning under warn_as_error). */
bool diag_failed(const DiagSink *s);

/* Render every diagnostic as text, in order:
 *   file:line:col: level: message\n  <source line>\n  <caret>\n
 * Returns a malloc'd NUL-terminated string the caller frees (NULL on OOM). */
char *diag_render(const DiagSink *s);

#endif
