/* mapfile.h — mapping an untrusted input file read-only (private to milc_blob). */
#ifndef MILC_BLOB_MAPFILE_H
#define MILC_BLOB_MAPFILE_H

#include <stddef.h>

#include "milc/diag.h"

/* Map the regular file at path read-only.  A FIFO or device is refused
 * without blocking; an empty file gives *map = NULL, *size = 0.  Errors go to
 * d at loc.  0 or -1.  The caller munmaps a non-NULL *map. */
int blob_map_file(const char *path, SrcLoc loc, DiagSink *d, void **map, size_t *size);

#endif
