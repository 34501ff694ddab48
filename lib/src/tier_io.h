/* tier_io.h — the remote tier on the build path: read-through on a local miss,
 * write-back after a store.  It lives with the pipeline because the pipeline
 * calls it between its own lookups; a remote failure is never a build
 * failure, only a warning (through the library's sink, lib.h) and the local
 * path.  Both tiers are Stores (milc/store.h): the local one and the shared
 * one, whatever holds them.  Opening the remote from options is the front
 * end's (cli/tier.c). */
#ifndef MILC_LIB_TIER_IO_H
#define MILC_LIB_TIER_IO_H

#include <stdbool.h>
#include <stddef.h>

#include "milc/store.h"

/* Report the remote's pending notice (its breaker just tripped), if any. */
void tier_io_warn(Store *remote);
/* Bring the entry (or the direct key's mapping and its entry) from the remote
 * into the local store.  true when it now holds it.  A refused entry (a MAC
 * or size check failed) is a warning and a miss.  remote NULL: false. */
bool tier_pull(Store *remote, Store *local, const CacheKey *k, const void *rec, size_t rlen);
bool tier_pull_direct(Store *remote, Store *local, const CacheKey *dkey, const void *drec, size_t dlen);
/* Write-back after a local store: the entry, then its direct key (if dkey). */
void tier_push(Store *remote, Store *local, const CacheKey *k, const CacheKey *dkey, const void *drec, size_t dlen);

#endif
