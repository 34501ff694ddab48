/* tier_io.h — the remote tier on the build path: read-through on a local miss,
 * write-back after a store.  It lives with the pipeline because the pipeline
 * calls it between its own lookups; a remote failure is never a build
 * failure, only a warning (through the library's sink, lib.h) and the local
 * path.  Opening the remote from options is the front end's (cli/tier.c). */
#ifndef MILC_LIB_TIER_IO_H
#define MILC_LIB_TIER_IO_H

#include <stdbool.h>
#include <stddef.h>

#include "milc/cache.h"
#include "milc/remote.h"

/* Report the breaker's warning if one is pending (the remote just went down). */
void tier_io_warn(Remote *r);
/* Bring the entry (or the direct key's mapping and its entry) from the remote
 * into cache c.  true when c now holds it.  A refused entry (a MAC or size
 * check failed) is a warning and a miss.  r NULL: false. */
bool tier_pull(Remote *r, Cache *c, const CacheKey *k, const void *rec, size_t rlen);
bool tier_pull_direct(Remote *r, Cache *c, const CacheKey *dkey, const void *drec, size_t dlen);
/* Write-back after a local store: the entry, then its direct key (if dkey). */
void tier_push(Remote *r, Cache *c, const CacheKey *k, const CacheKey *dkey, const void *drec, size_t dlen);

#endif
