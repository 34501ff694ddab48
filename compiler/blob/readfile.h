/* readfile.h — reading an untrusted input file (private to milc_blob). */
#ifndef MILC_BLOB_READFILE_H
#define MILC_BLOB_READFILE_H

#include <stddef.h>

#include "milc/diag.h"

/* Open path for reading: a regular file only (no waiting on a FIFO); on
 * failure an error at loc and -1. */
int blob_open_input(const char *path, SrcLoc loc, DiagSink *d, int *fd);

/* Read the regular file at path into a 64-byte-aligned buffer the caller
 * frees.  A FIFO or device is refused without blocking; a file that shrinks
 * meanwhile is an I/O error.  Errors go to d at loc.  0 or -1. */
int blob_read_file(const char *path, SrcLoc loc, DiagSink *d, void **buf, size_t *size);

#endif
